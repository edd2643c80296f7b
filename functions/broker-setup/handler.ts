import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { CloudFormationCustomResourceEvent } from 'aws-lambda';
import type { Logger } from '../../shared/index.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import {
  type BrokerCredentials,
  declaredTopology,
  ensurePipelineUser,
  type RabbitMqBackend,
} from '../../shared/transport/rabbitmq/index.js';

export interface BrokerSetupResponse {
  PhysicalResourceId: string;
  Data: { queues: number; policies: number; rabbitmqVersion: string; pipelineUser: string };
}

export interface BrokerSetupDeps {
  /** Connected as the broker's administrator (the user Amazon MQ created with the broker). */
  backend: Pick<RabbitMqBackend, 'prepare' | 'config' | 'management'>;
  logger: Logger;
  /**
   * The pipeline user's credentials (`BROKER_PIPELINE_SECRET_ARN`, deployed): created or
   * updated after the topology, with permissions on its names only. Absent locally.
   */
  pipelineUser?: () => Promise<BrokerCredentials>;
}

/**
 * Declares the topology (exchanges, quorum queues, bindings, retry buckets, parking) and applies
 * its policies through the management API on deploy, then creates or updates the pipeline's own
 * broker user: the `onEvent` handler of a CloudFormation custom resource (CDK Provider
 * framework). Create and Update are idempotent; Delete leaves the broker alone (it goes with the
 * stack).
 */
export function createBrokerSetupHandler(deps: BrokerSetupDeps) {
  return middy<CloudFormationCustomResourceEvent, BrokerSetupResponse>()
    .use(injectLambdaContext(deps.logger, { resetKeys: true }))
    .handler(async (event) => {
      const vhost = deps.backend.config.vhost;
      if (event.RequestType === 'Delete') {
        return {
          PhysicalResourceId: event.PhysicalResourceId,
          Data: { queues: 0, policies: 0, rabbitmqVersion: '', pipelineUser: '' },
        };
      }
      const report = await deps.backend.prepare('consume');
      const rabbitmqVersion = (report.server ?? '').replace(/^RabbitMQ /, '');
      deps.logger.info('broker topology applied', {
        queues: report.queues,
        policies: report.policies,
        rabbitmqVersion,
      });
      let pipelineUser = '';
      if (deps.pipelineUser) {
        const { budget, retention } = deps.backend.config;
        const user = await ensurePipelineUser(await deps.backend.management(), {
          vhost,
          credentials: await deps.pipelineUser(),
          topology: declaredTopology(PIPELINE_TOPOLOGY, budget, retention).topology,
        });
        pipelineUser = user.username;
        deps.logger.info('pipeline broker user ready', { ...user });
      }
      return {
        PhysicalResourceId: `broker-topology:${vhost}`,
        Data: { queues: report.queues, policies: report.policies, rabbitmqVersion, pipelineUser },
      };
    });
}
