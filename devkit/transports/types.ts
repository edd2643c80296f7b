import type { Env } from '../../shared/config/env.js';
import type { Journal } from '../../shared/consumer/journal.js';
import type { Logger } from '../../shared/logger.js';
import type {
  Backend,
  MessageHandler,
  ParkNotices,
  RunningConsumer,
} from '../../shared/port/types.js';
import type { TransportName } from '../../shared/transport/index.js';
import type { RabbitManagement } from '../../shared/transport/rabbitmq/index.js';
import type { DeployedSettings } from '../lambda/deployedSettings.js';
import type { EventSourceOptions, RunningEventSource } from '../lambda/eventSources.js';
import type { LocalDeployment } from '../lambda/LocalDeployment.js';
import type { SynthOptions } from '../lambda/synth.js';
import type { RequiredServices } from '../preflight.js';

/** Where the services are (tests: the global setup's; the lab, the soak, the benchmarks: env). */
export interface Services {
  databaseUrl: string;
  amqpUrl: string;
  managementUrl: string;
  /** An SQS-compatible endpoint (fauxqs, moto); needed for SQS backends only. */
  sqsEndpoint?: string | undefined;
}

/** A RabbitMQ virtual host of one scratch environment. */
export interface ScratchVhost {
  vhost: string;
  amqpUrl: string;
  /** The management API URL (with credentials) the vhost was created through. */
  managementUrl: string;
  management: RabbitManagement;
  delete(): Promise<void>;
}

/**
 * What the local tooling knows of a transport beyond its module (`shared/transport/<name>/`):
 * the services it needs, how one run gets a namespace of its own on them, and, where the stacks
 * deploy it, its consumer functions and the emulation of their Lambda event source. One entry per
 * registered transport (devkit/transports/index.ts); the steps are in docs/adding-a-transport.md.
 */
export interface LocalTransport {
  readonly name: TransportName;
  /**
   * Whether separate processes share its broker (the local pipeline's roles, the lab's child
   * processes); false for the in-memory backend.
   */
  readonly shared: boolean;
  /** The services the preflight checks before a process publishes or consumes on it. */
  required(env: Env, scope: 'publish' | 'consume'): RequiredServices;
  /**
   * Starts what it needs locally that may not be running (SQS: an embedded server unless one
   * answers), or undefined; the settings a backend then needs (an endpoint), and one line for the
   * console.
   */
  startLocal?(
    env: Env,
  ): Promise<{ config: Record<string, unknown>; line: string; stop(): Promise<void> }>;
  /** Its namespace in a scratch environment (a vhost, a queue or stream prefix). */
  namespace(services: Services, name: string): Promise<Namespace>;
  /**
   * Puts messages on the transport as they are, where the relay publishes order events (poison
   * messages for the lab and the tests), and waits until the broker took them.
   */
  publishRaw?(backend: Backend, messages: readonly RawMessage[]): Promise<void>;
  /** The stacks deploy it: its consumer functions and their event source. Absent: local only. */
  deployed?: DeployedConsumers;
}

/**
 * A message put on the transport as it is, bypassing the outbox and the publisher: poison
 * messages (a body that is not JSON, an envelope missing fields), or envelopes the relay did not
 * write.
 */
export interface RawMessage {
  body: Buffer | string;
  /** The transport's message id (AMQP `message_id`, SQS `event_id`); none when unset. */
  messageId?: string;
  /** The event type (AMQP `type`, SQS `event_type`). */
  type?: string;
  /** The envelope schema version (header or attribute). */
  schemaVersion?: string;
  /** RabbitMQ and NATS: the routing key or subject's last part. Default: the type, else `order.created`. */
  routingKey?: string;
}

/** A transport's namespace of one scratch environment. */
export interface Namespace {
  /** Configuration of a backend on exactly this namespace. */
  config: Record<string, unknown>;
  /** The RabbitMQ virtual host, where the namespace is one. */
  vhost?: ScratchVhost | undefined;
  /** Removes what the namespace holds (queues, streams, the vhost). */
  delete(): Promise<void>;
}

/** The deployed consumer functions of a transport and how they run locally. */
export interface DeployedConsumers {
  /** The CDK app's transport (`-c transport=…`) whose stacks deploy it. */
  stack: SynthOptions['transport'];
  /** Logical ids of the consumer functions in the synthesized template. */
  functions: { inventory: string; results: string };
  /** Runs a consumer function's handler around `handler` behind its event source's emulation. */
  emulate(
    backend: Backend,
    handler: MessageHandler,
    settings: ConsumerSettings,
  ): Promise<RunningConsumer>;
  /**
   * The event source mapping's settings from the template (batch size, window, concurrency,
   * timeout), each replaced by its variable when that is set.
   */
  triggerSettings(
    deployed: DeployedSettings,
    functionId: string,
    env: Env,
    functionEnv: Env,
  ): ConsumerSettings;
  /** How the consumer runs, in a few words (`SQS trigger emulation (visibility mode)`). */
  describe(env: Env): string;
  /** The event source of the deployed bundles (`--bundles`): its mapping, from the template. */
  startEventSource(
    deployment: LocalDeployment,
    functionId: string,
    options: EventSourceOptions & { amqpUrl: string; vhost?: string | undefined },
  ): Promise<RunningEventSource>;
  /** The event source's name in the console's lines (`SQS`, `Amazon MQ`). */
  eventSourceName: string;
  /**
   * How an operator outside the stack reaches its broker (`--stack`): the configuration of a
   * backend on the deployment's resources, or why it is reached as locally instead.
   */
  operator(stack: { name: string; region: string }, env: Env): OperatorAccess;
  /** What to check when the deployment's resources do not answer (one line). */
  unreachable: (stack: string) => string;
}

/** An operator's backend on a deployment, or a note that the local settings reach it. */
export type OperatorAccess = { config: Record<string, unknown>; close(): void } | { note: string };

/**
 * How a consumer runs locally:
 * - `worker`: in this process, on the backend's own consumer (RabbitMQ worker, in-memory);
 * - `lambda`: the deployed reserve function's handler behind the emulation of its Lambda trigger
 *   (Amazon MQ event source mapping on RabbitMQ, SQS event source mapping on SQS).
 * SQS has only `lambda`.
 */
export type ConsumerMode = 'worker' | 'lambda';

export interface ConsumerSettings {
  mode?: ConsumerMode;
  /**
   * Which queue: `inventory` (default: `inventory.orders`, inventory's reserve function) or
   * `results` (`orders.inventory-results` / `orders-inventory-results`, the order side's results
   * function).
   */
  queue?: 'inventory' | 'results';
  journal?: Journal | undefined;
  logger?: Logger | undefined;
  /** Worker channels (RabbitMQ worker), or invocations at once (SQS trigger's maximum concurrency). */
  concurrency?: number;
  /** Worker: unacknowledged deliveries per channel, and the largest batch. */
  prefetch?: number;
  maxBatch?: number;
  /** Worker: channel reconnect backoff after a give-back. */
  reconnectBaseMs?: number;
  reconnectMaxMs?: number;
  /** Trigger: messages per invocation, batching window, the function's timeout. */
  batchSize?: number;
  batchWindowMs?: number;
  functionTimeoutMs?: number;
  /** SQS trigger: the mapping's `ReportBatchItemFailures` (default on). */
  reportBatchItemFailures?: boolean;
  /** Called when an emulated invocation fails (the batch goes back), before the trigger reacts. */
  onInvocationError?: (err: Error) => void;
  /** The use case's notices of parked messages (inventory: `INVENTORY_PARK_NOTICES`). */
  notices?: ParkNotices | undefined;
}
