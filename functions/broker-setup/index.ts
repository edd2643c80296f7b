import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { createLogger, loadEnv } from '../../shared/index.js';
import { readBrokerSecret } from '../../shared/transport/rabbitmq/index.js';
import { sharedRabbit } from '../commons/clients.js';
import { createBrokerSetupHandler } from './handler.js';

/**
 * Lambda entry point (custom resource on deploy of the RabbitMQ pipeline stack). It runs as the
 * broker's administrator (BROKER_SECRET_ARN) and creates the pipeline user of
 * BROKER_PIPELINE_SECRET_ARN, whose secret the other functions and the event source use.
 */
const logger = createLogger('broker-setup');
const env = loadEnv();
const pipelineSecretArn = env.BROKER_PIPELINE_SECRET_ARN;
export const handler = createBrokerSetupHandler({
  backend: sharedRabbit(logger),
  logger,
  ...(pipelineSecretArn
    ? {
        pipelineUser: () =>
          readBrokerSecret(new SecretsManagerClient({ region: env.AWS_REGION }), pipelineSecretArn),
      }
    : {}),
});
