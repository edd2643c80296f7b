import type { Retention, RetryBudget } from '../config/budget.js';
import type { Env } from '../config/env.js';
import type { Logger } from '../logger.js';
import { type MemoryBackend, type MemoryBackendConfig, memoryBackend } from './memory/index.js';
import {
  type RabbitMqBackend,
  type RabbitMqBackendConfig,
  rabbitmqBackend,
  rabbitmqConfigFromEnv,
} from './rabbitmq/index.js';
import {
  type SqsBackend,
  type SqsBackendConfig,
  sqsBackend,
  sqsConfigFromEnv,
} from './sqs/index.js';

/**
 * Every backend behind one factory, for runtimes that choose the transport at run time (`dev`,
 * the CLI, the lab, the soak, the benchmarks). A Lambda bundle imports its own backend's module
 * instead, so that it does not carry the other one's client.
 */
export type AnyBackend = RabbitMqBackend | SqsBackend | MemoryBackend;

export type BackendConfig =
  | ({ transport: 'rabbitmq' } & RabbitMqBackendConfig)
  | ({ transport: 'sqs' } & SqsBackendConfig)
  | ({ transport: 'memory' } & MemoryBackendConfig);

export function createBackend(config: BackendConfig): AnyBackend {
  switch (config.transport) {
    case 'rabbitmq':
      return rabbitmqBackend(config);
    case 'sqs':
      return sqsBackend(config);
    case 'memory':
      return memoryBackend(config);
  }
}

/** What every backend needs beyond the environment. */
export interface BackendBase {
  budget: RetryBudget;
  retention: Retention;
  /** Who parks, for diagnoses (`inventory@<version>`). */
  consumer: string;
  logger?: Logger;
}

/** A backend configured from the runtime environment (`AMQP_URL`, `SQS_ENDPOINT`, …). */
export function backendFromEnv(
  transport: 'rabbitmq' | 'sqs',
  env: Env,
  base: BackendBase & {
    rabbitmq?: Partial<RabbitMqBackendConfig>;
    sqs?: Partial<SqsBackendConfig>;
  },
): RabbitMqBackend | SqsBackend {
  const { rabbitmq, sqs, ...common } = base;
  return transport === 'rabbitmq'
    ? rabbitmqBackend(rabbitmqConfigFromEnv(env, { ...common, ...rabbitmq }))
    : sqsBackend(sqsConfigFromEnv(env, { ...common, ...sqs }));
}
