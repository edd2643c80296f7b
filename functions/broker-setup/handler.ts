import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { CloudFormationCustomResourceEvent } from 'aws-lambda';
import type { Retention, RetryBudget } from '../../shared/config/budget.js';
import type { Logger } from '../../shared/logger.js';
import type { RabbitConnection } from '../../shared/transport/rabbitmq/RabbitConnection.js';
import type { RabbitManagement } from '../../shared/transport/rabbitmq/RabbitManagement.js';
import {
  buildPolicies,
  buildTopology,
  prepareInventoryTopology,
} from '../../shared/transport/rabbitmq/topology.js';

export interface BrokerSetupResponse {
  PhysicalResourceId: string;
  Data: { queues: number; policies: number; rabbitmqVersion: string };
}

export interface BrokerSetupDeps {
  connection: RabbitConnection;
  management: () => Promise<RabbitManagement>;
  vhost: string;
  budget: RetryBudget;
  retention: Retention;
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
      const topology = buildTopology(deps.budget);
      const policies = buildPolicies(deps.budget, deps.retention);
      if (event.RequestType === 'Delete') {
        return {
          PhysicalResourceId: event.PhysicalResourceId,
          Data: { queues: 0, policies: 0, rabbitmqVersion: '' },
        };
      }
      const management = await deps.management();
      await prepareInventoryTopology({
        channel: (fn) => deps.connection.withChannel(fn, 30_000),
        management,
        vhost: deps.vhost,
        budget: deps.budget,
        retention: deps.retention,
      });
      const rabbitmqVersion = await management.version();
      deps.logger.info('broker topology applied', {
        queues: topology.queues.length,
        policies: policies.length,
        rabbitmqVersion,
      });
      return {
        PhysicalResourceId: `broker-topology:${deps.vhost}`,
        Data: { queues: topology.queues.length, policies: policies.length, rabbitmqVersion },
      };
    });
}
