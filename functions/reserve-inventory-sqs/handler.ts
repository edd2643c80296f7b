import {
  BatchProcessor,
  EventType,
  processPartialResponse,
  SqsFifoPartialProcessorAsync,
} from '@aws-lambda-powertools/batch';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import type { Journal } from '../../shared/consumer/journal.js';
import type { InboundMessage, Outcome } from '../../shared/consumer/types.js';
import { fault } from '../../shared/faults.js';
import type { Logger } from '../../shared/logger.js';
import type { BatchProcessor as UseCaseBatch } from '../../shared/transport/rabbitmq/RabbitWorker.js';
import type { SqsSettler } from '../../shared/transport/sqs/SqsSettler.js';

/** A record reported in batchItemFailures: SQS delivers it again later. */
class ReportedFailure extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ReportedFailure';
  }
}

/**
 * Reserve-inventory behind the Lambda SQS trigger with ReportBatchItemFailures. The partial batch
 * response is built by Powertools batch:
 * - standard queues: the whole batch goes through the use case at once (one transaction), then
 *   each record is settled (SqsSettler) in parallel; a record whose outcome is "report as failed"
 *   throws inside the record handler;
 * - FIFO queues: records are processed one by one in order, and after a failure the rest of that
 *   message group is not processed and reported failed (other groups go on), as AWS requires.
 */
export function createReserveInventorySqsHandler(deps: {
  process: UseCaseBatch;
  settler: SqsSettler;
  logger: Logger;
  journal?: Journal;
}) {
  const fifo = deps.settler.options.fifo ?? false;

  const settle = async (record: SQSRecord, message: InboundMessage, outcome: Outcome) => {
    const settlement = await deps.settler.settle(record, message, outcome);
    if (outcome.kind === 'retry') {
      fault('reserve.after-retry-publish');
      deps.journal?.recordMessage(
        'retry-scheduled',
        message,
        outcome.errorClass,
        `${outcome.error} (in ${outcome.delayMs} ms, ${deps.settler.options.mode})`,
      );
    } else if (outcome.kind === 'park') {
      deps.journal?.recordMessage(
        'parked',
        message,
        settlement === 'ack' ? outcome.reason : 'parking refused it',
        outcome.error,
      );
    }
    if (settlement === 'fail')
      throw new ReportedFailure(`${message.messageId ?? record.messageId}: report as failed`);
    deps.journal?.recordMessage(
      'acked',
      message,
      outcome.kind === 'ack' ? outcome.result : outcome.kind,
    );
  };

  return middy<SQSEvent, SQSBatchResponse>()
    .use(injectLambdaContext(deps.logger, { resetKeys: true }))
    .handler(async (event: SQSEvent, context: Context) => {
      if (fifo) {
        const processor = new SqsFifoPartialProcessorAsync();
        return processPartialResponse(
          event,
          async (record: SQSRecord) => {
            const message = deps.settler.inbound(record);
            const [outcome] = await deps.process([message]);
            await settle(record, message, outcome as Outcome);
          },
          processor,
          { context, throwOnFullBatchFailure: false, skipGroupOnError: true },
        );
      }
      const messages = event.Records.map((r) => deps.settler.inbound(r));
      const outcomes = await deps.process(messages);
      const byRecord = new Map(event.Records.map((r, i) => [r.messageId, i]));
      return processPartialResponse(
        event,
        async (record: SQSRecord) => {
          const i = byRecord.get(record.messageId) as number;
          await settle(record, messages[i] as InboundMessage, outcomes[i] as Outcome);
        },
        new BatchProcessor(EventType.SQS),
        { context, throwOnFullBatchFailure: false },
      );
    });
}
