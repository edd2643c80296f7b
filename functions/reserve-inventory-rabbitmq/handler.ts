import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { Journal } from '../../shared/consumer/journal.js';
import type { InboundMessage, Outcome } from '../../shared/consumer/types.js';
import { fault } from '../../shared/faults.js';
import type { Logger } from '../../shared/logger.js';
import {
  type RabbitMQEvent,
  rawFromRmqMessage,
} from '../../shared/transport/rabbitmq/amazonMqEvent.js';
import {
  inboundFromRaw,
  type RabbitSettler,
} from '../../shared/transport/rabbitmq/RabbitSettler.js';
import type { BatchProcessor } from '../../shared/transport/rabbitmq/RabbitWorker.js';

export interface RmqBatchSummary {
  messages: number;
  acked: number;
  retried: number;
  parked: number;
}

/** Thrown to make the event source mapping hand the whole batch back to the broker. */
export class BatchNotSettledError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'BatchNotSettledError';
  }
}

/**
 * Reserve-inventory behind the Amazon MQ (RabbitMQ) trigger. That trigger has no partial batch
 * response: returning normally acknowledges every message of the batch, throwing hands the whole
 * batch back. So every message is settled here, inside the invocation: retries and parking by
 * confirmed publishes (same copies as worker mode). The handler throws only when it cannot settle:
 * the database is unreachable, or a retry / park copy could not be published. Messages committed
 * before the throw come back too, and the inbox absorbs them.
 */
export function createReserveInventoryRabbitHandler(deps: {
  process: BatchProcessor;
  settler: RabbitSettler;
  logger: Logger;
  journal?: Journal;
}) {
  return middy<RabbitMQEvent, RmqBatchSummary>()
    .use(injectLambdaContext(deps.logger, { resetKeys: true }))
    .handler(async (event) => {
      const records = Object.values(event.rmqMessagesByQueue ?? {}).flat();
      const raws = records.map(rawFromRmqMessage);
      const inbound = raws.map((raw, i) => inboundFromRaw(raw, records[i]?.redelivered ?? false));
      const outcomes = await deps.process(inbound);
      const unreachable = outcomes.find((o) => o.kind === 'retry' && o.infrastructure);
      if (unreachable && unreachable.kind === 'retry') {
        throw new BatchNotSettledError(
          `database unreachable (${unreachable.error}): the batch goes back to the broker`,
        );
      }
      const summary: RmqBatchSummary = {
        messages: records.length,
        acked: 0,
        retried: 0,
        parked: 0,
      };
      for (let i = 0; i < outcomes.length; i++) {
        const outcome = outcomes[i] as Outcome;
        const raw = raws[i] as (typeof raws)[number];
        const message = inbound[i] as InboundMessage;
        try {
          if (outcome.kind === 'retry') {
            await deps.settler.retry(raw, outcome);
            fault('reserve.after-retry-publish');
            deps.journal?.recordMessage(
              'retry-scheduled',
              message,
              outcome.errorClass,
              outcome.error,
            );
            summary.retried++;
          } else if (outcome.kind === 'park') {
            const d = await deps.settler.park(raw, outcome, message.attempt);
            deps.journal?.recordMessage('parked', message, outcome.reason, d.error);
            summary.parked++;
          } else {
            summary.acked++;
          }
        } catch (err) {
          throw new BatchNotSettledError(
            `cannot settle message ${message.messageId}: ${(err as Error).message}`,
            {
              cause: err,
            },
          );
        }
      }
      // Returning is the acknowledgement of the whole batch.
      for (const message of inbound)
        deps.journal?.recordMessage('acked', message, 'batch returned');
      deps.logger.info('batch settled', { ...summary });
      return summary;
    });
}
