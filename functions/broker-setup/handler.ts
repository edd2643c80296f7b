import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { CloudFormationCustomResourceEvent } from 'aws-lambda';
import type { Logger } from '../../shared/logger.js';
import type { RabbitMqBackend } from '../../shared/transport/rabbitmq/index.js';

export interface BrokerSetupResponse {
  PhysicalResourceId: string;
  Data: { queues: number; policies: number; rabbitmqVersion: string };
}

export interface BrokerSetupDeps {
  backend: Pick<RabbitMqBackend, 'prepare' | 'config'>;
  logger: Logger;
}

/**
 * Declares the topology (exchanges, quorum queues, bindings, retry buckets, parking) and applies
 * its policies through the management API on deploy: the `onEvent` handler of a CloudFormation
 * custom resource (CDK Provider framework). Create and Update are idempotent; Delete leaves the
 * broker alone (it goes with the stack).
 */
export function createBrokerSetupHandler(deps: BrokerSetupDeps) {
  return middy<CloudFormationCustomResourceEvent, BrokerSetupResponse>()
    .use(injectLambdaContext(deps.logger, { resetKeys: true }))
    .handler(async (event) => {
      const vhost = deps.backend.config.vhost;
      if (event.RequestType === 'Delete') {
        return {
          PhysicalResourceId: event.PhysicalResourceId,
          Data: { queues: 0, policies: 0, rabbitmqVersion: '' },
        };
      }
      const report = await deps.backend.prepare('consume');
      const rabbitmqVersion = (report.server ?? '').replace(/^RabbitMQ /, '');
      deps.logger.info('broker topology applied', {
        queues: report.queues,
        policies: report.policies,
        rabbitmqVersion,
      });
      return {
        PhysicalResourceId: `broker-topology:${vhost}`,
        Data: { queues: report.queues, policies: report.policies, rabbitmqVersion },
      };
    });
}
