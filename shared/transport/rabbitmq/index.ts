import type { TransportModule } from '../module.js';
import {
  type RabbitMqBackendConfig,
  rabbitmqConfigFromEnv,
  rabbitmqConfigSchema,
} from './config.js';
import { RABBITMQ_CAPABILITIES, type RabbitMqBackend, rabbitmqBackend } from './RabbitMqBackend.js';

// What the functions (the Amazon MQ trigger's consumer, the broker's setup) and the local tooling
// use of this backend beyond its module. The pinned names are in `constants.ts`; a stack reads
// those it deploys with from here (the trigger's batching, the queue bounds, the metrics names).
export { rabbitRetryDelays } from '../../config/budget.js';
export { type AmazonMqDelivery, amazonMqDeliveries } from './AmazonMqSettle.js';
export { type RabbitMQEvent, rmqQueueKey, toRmqMessage } from './amazonMqEvent.js';
export { type BrokerCredentials, readBrokerSecret } from './brokerSecret.js';
export { ensurePipelineUser } from './brokerUsers.js';
export { type RabbitMqBackendConfig, rabbitmqConfigFromEnv } from './config.js';
export { AMAZON_MQ_TRIGGER, QUEUE_BOUNDS, QUEUE_METRICS } from './constants.js';
export { amazonMqLambdaHandler } from './lambdaHandler.js';
export { RabbitConnection } from './RabbitConnection.js';
export { amqpUrlForVhost, RabbitManagement } from './RabbitManagement.js';
export { RabbitMqBackend } from './RabbitMqBackend.js';
export { declaredTopology, vhostOf } from './topology.js';

/** The RabbitMQ backend as a module: Amazon MQ for RabbitMQ in AWS, any RabbitMQ 3.10+ locally. */
export const rabbitmqModule: TransportModule<RabbitMqBackendConfig, RabbitMqBackend> = {
  name: 'rabbitmq',
  description:
    'RabbitMQ (Amazon MQ for RabbitMQ when deployed): quorum queues, retry buckets, a parking queue',
  capabilities: RABBITMQ_CAPABILITIES,
  configSchema: rabbitmqConfigSchema,
  fromEnv: rabbitmqConfigFromEnv,
  create: rabbitmqBackend,
};
