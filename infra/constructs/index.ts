/**
 * The CDK constructs (`reliable-messaging-serverless/cdk`): deploy your own handlers with what
 * this repository's stacks build for its own: a Lambda function bundled like theirs
 * (`NodeFunction`), the outbox relay with its schedule, kicks and alarms
 * (`OutboxRelayFunction`), a consumer on an SQS queue with its parking queue and partial batch
 * responses (`SqsConsumer`) or on an Amazon MQ for RabbitMQ queue (`AmazonMqConsumer`, with
 * `BrokerSetup` applying the topology on deploy), Aurora Serverless v2 with the Data API and the
 * migrations, the library's and yours (`ServerlessDatabase`, `DatabaseMigrations`), and the alarms
 * on one topic (`PipelineAlarms`, with `addQueueBoundAlarms` for bounded queues); helpers for
 * the rest of a stack (`sqsEventSource`, `dataApiSettings`, `recursiveLoop`, `addFlowLogs`).
 * Each takes your handler's module as `entry`; aws-cdk-lib and constructs are peer dependencies,
 * and esbuild bundles the handlers at synth. docs/deploy.md, "Deploying your own handler".
 */

export type { Retention, RetryBudget } from '../../shared/config/env.js';
export {
  type FunctionEnvironment,
  type FunctionSettings,
  functionEnvironment,
} from '../../shared/config/functionEnvironment.js';
export { DEFAULT_RELAY_SETTINGS, type RelaySettings } from '../../shared/outbox/relaySettings.js';
export { AmazonMqConsumer, type AmazonMqConsumerProps } from './AmazonMqConsumer.js';
export type { AmazonMqAccess } from './amazonMq.js';
export { BrokerSetup, type BrokerSetupProps } from './BrokerSetup.js';
export type { ConsumerAlarmOptions } from './consumerAlarms.js';
export { DatabaseMigrations, type DatabaseMigrationsProps } from './DatabaseMigrations.js';
export {
  type DataApiLogin,
  type DatabaseAccess,
  dataApiAccess,
  dataApiLogin,
  dataApiSettings,
} from './databaseAccess.js';
export { eventTopic, grantSendTo, subscribeQueue } from './EventTopic.js';
export { addFlowLogs } from './flowLogs.js';
export { type FunctionNetwork, NodeFunction, type NodeFunctionProps } from './NodeFunction.js';
export {
  OutboxRelayFunction,
  type OutboxRelayFunctionProps,
  type RelayAlarmOptions,
} from './OutboxRelayFunction.js';
export {
  type AlarmOptions,
  type AlarmSpec,
  FROM_BROKER,
  functionValues,
  PipelineAlarms,
  relayMetric,
} from './PipelineAlarms.js';
export { addQueueBoundAlarms, type QueueBoundAlarmsProps } from './QueueBoundAlarms.js';
export { recursiveLoop } from './recursiveLoop.js';
export type { RunbookValues } from './runbook.js';
export {
  BACKUP_RETENTION_DAYS,
  DEFAULT_CAPACITY,
  DEFAULT_SECONDS_UNTIL_AUTO_PAUSE,
  ENGINE_VERSION,
  ServerlessDatabase,
  type ServerlessDatabaseProps,
} from './ServerlessDatabase.js';
export {
  SqsConsumer,
  type SqsConsumerAlarmOptions,
  type SqsConsumerProps,
  type SqsQueueOptions,
  type SqsTriggerOptions,
  sqsEventSource,
} from './SqsConsumer.js';
