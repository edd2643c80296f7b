import type { TransportModule } from '../module.js';
import { type SqsBackendConfig, sqsConfigFromEnv, sqsConfigSchema } from './config.js';
import { type SqsBackend, sqsBackend, sqsCapabilities } from './SqsBackend.js';

// What the functions (the Lambda SQS trigger's consumer) and the local tooling use of this
// backend beyond its module. The pinned names are in `constants.ts`; a stack reads those it
// deploys with from here (the topic of a stream).
export { createSnsClient, createSqsClient } from './client.js';
export { snsTopicName } from './constants.js';
export { sqsLambdaHandler } from './lambdaHandler.js';
export { toSqsRecord } from './record.js';
export { SqsBackend } from './SqsBackend.js';
export { envelopeAttributes } from './SqsPublisher.js';
export { type SqsDelivery, sqsDelivery } from './SqsSettle.js';

/** The SQS backend as a module: a source queue with its redrive policy, behind the Lambda SQS event source. */
export const sqsModule: TransportModule<SqsBackendConfig, SqsBackend> = {
  name: 'sqs',
  description:
    'Amazon SQS (any SQS-compatible server locally): visibility timeout, redrive policy, a parking queue',
  capabilities: sqsCapabilities(false),
  capabilitiesOf: (config) => sqsCapabilities(config.fifo ?? false),
  configSchema: sqsConfigSchema,
  fromEnv: sqsConfigFromEnv,
  create: sqsBackend,
};
