import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { BatchReport, ConsumerDriver } from '../../consumer/driver.js';
import type { Logger } from '../../logger.js';
import { type AmazonMqDelivery, amazonMqDeliveries } from './AmazonMqSettle.js';
import type { RabbitMQEvent } from './amazonMqEvent.js';

/**
 * The Lambda handler of a consumer behind the Amazon MQ (RabbitMQ) event source (`amazonMqDriver`
 * gives its driver): the event's messages go to the consumer driver, which runs the use case and settles each message inside the invocation
 * (retries and parking by confirmed copies). Returning acknowledges the whole batch; the driver
 * throws `BatchNotSettledError` when it must hand the batch back (the use case could not decide,
 * or a copy could not be published). An unreachable database is not such a case: its messages
 * are retried along the ladder by confirmed copies and parked when the budget is spent. Messages committed before
 * the throw come back too, and the inbox absorbs them.
 */
export function amazonMqLambdaHandler(deps: {
  driver: ConsumerDriver<AmazonMqDelivery>;
  logger: Logger;
}) {
  return middy<RabbitMQEvent, BatchReport>()
    .use(injectLambdaContext(deps.logger, { resetKeys: true }))
    .handler(async (event) => {
      const report = await deps.driver.deliver(amazonMqDeliveries(event));
      deps.logger.info('batch settled', { ...report });
      return report;
    });
}
