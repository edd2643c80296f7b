import {
  BatchProcessor,
  EventType,
  processPartialResponse,
  SqsFifoPartialProcessorAsync,
} from '@aws-lambda-powertools/batch';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import type { ConsumerDriver } from '../../consumer/driver.js';
import type { Logger } from '../../logger.js';
import type { SqsRetryMode } from './constants.js';
import { type SqsDelivery, sqsDelivery } from './SqsSettle.js';

/** A record reported in batchItemFailures: SQS delivers it again later. */
class ReportedFailure extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ReportedFailure';
  }
}

/**
 * The Lambda handler of a consumer behind the SQS event source with ReportBatchItemFailures
 * (`lambdaDriver` gives its driver, mode and FIFO flag). The records go to the consumer driver; the partial batch response is built by Powertools batch, and a record
 * whose message is not done (a visibility-mode retry, parking refused, given back) is reported:
 * - standard queues: the whole batch goes through the use case at once (one transaction), then
 *   each record is settled in parallel;
 * - FIFO queues: records go one by one in order, and after a failure the rest of that message
 *   group is not processed and reported failed (other groups go on), as AWS requires.
 * A batch the use case could not decide is given back as a whole: the invocation fails.
 */
export function sqsLambdaHandler(deps: {
  driver: ConsumerDriver<SqsDelivery>;
  mode: SqsRetryMode;
  fifo: boolean;
  logger: Logger;
}) {
  const done = (record: SQSRecord, state: string) => {
    if (state !== 'ack') throw new ReportedFailure(`${record.messageId}: report as failed`);
  };
  return middy<SQSEvent, SQSBatchResponse>()
    .use(injectLambdaContext(deps.logger, { resetKeys: true }))
    .handler(async (event: SQSEvent, context: Context) => {
      if (deps.fifo) {
        return processPartialResponse(
          event,
          async (record: SQSRecord) => {
            const report = await deps.driver.deliver([sqsDelivery(record, deps.mode)]);
            done(record, report.acked === 1 ? 'ack' : 'returned');
          },
          new SqsFifoPartialProcessorAsync(),
          { context, throwOnFullBatchFailure: false, skipGroupOnError: true },
        );
      }
      const deliveries = event.Records.map((r) => sqsDelivery(r, deps.mode));
      const outcomes = await deps.driver.decide(deliveries);
      if (!outcomes) throw new Error('the batch was given back'); // SQS gives back by throwing
      const byRecord = new Map(event.Records.map((r, i) => [r.messageId, i]));
      return processPartialResponse(
        event,
        async (record: SQSRecord) => {
          const i = byRecord.get(record.messageId) as number;
          const settled = await deps.driver.settle(
            deliveries[i] as SqsDelivery,
            outcomes[i] as (typeof outcomes)[number],
          );
          done(record, settled.state);
        },
        new BatchProcessor(EventType.SQS),
        { context, throwOnFullBatchFailure: false },
      );
    });
}
