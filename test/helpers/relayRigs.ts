import type { Message } from '@aws-sdk/client-sqs';
import { type JsMsg, jetstreamManager, StorageType } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { TcpProxy } from '../../devkit/TcpProxy.js';
import { NATS_URL, natsLocal } from '../../devkit/transports/nats.js';
import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import type { Backend, Publisher } from '../../shared/index.js';
import { DEFAULT_RETENTION } from '../../shared/index.js';
import { RABBITMQ_NAMES } from '../../shared/pipeline/names.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import { createBackend } from '../../shared/transport/index.js';
import { NATS_HEADERS } from '../../shared/transport/nats/constants.js';
import { natsNames } from '../../shared/transport/nats/index.js';
import { header } from '../../shared/transport/nats/messages.js';
import type { ConsumerNames } from '../../shared/transport/nats/topology.js';
import { SCHEMA_VERSION_HEADER } from '../../shared/transport/rabbitmq/constants.js';
import { rabbitmqBackend } from '../../shared/transport/rabbitmq/RabbitMqBackend.js';
import { SQS_ATTRIBUTES } from '../../shared/transport/sqs/constants.js';
import { sqsBackend } from '../../shared/transport/sqs/SqsBackend.js';
import type { SqsServer } from '../globalSetup.js';
import { queueDepth, type ReceivedMessage, readMessages, testConnection } from './amqp.js';
import { readNatsMessages } from './nats.js';
import { amqpUrlVia, createTestVhost } from './rabbit.js';
import { AMQP_URL, SERVICES, uniqueName } from './services.js';
import { createSqsRig, receiveAll, SQS_FEATURES, SQS_SERVERS } from './sqs.js';

/** A message as it reached a consumer's destination, read alike on every transport. */
export interface WireMessage {
  messageId: string | undefined;
  type: string | undefined;
  correlationId: string | undefined;
  schemaVersion: string | undefined;
  /**
   * Kept on disk by the broker (AMQP delivery mode 2; SQS keeps every message; a JetStream
   * stream whose storage is a file).
   */
  durable: boolean;
  body: Record<string, unknown>;
}

/** Where the relay publishes to, and a consumer's view of what arrived. */
export interface RelayRig {
  /** The relay's backend, prepared for publishing. */
  backend: Backend;
  /** The environment `bin/dev.ts` needs (besides DATABASE_URL) to reach the same broker. */
  devEnv: Record<string, string>;
  /** Another backend on the same destinations, reaching the broker through a proxy the test cuts. */
  throughProxy(): Promise<{ backend: Backend; proxy: TcpProxy }>;
  /** A publisher of `outbox` whose destination does not exist. */
  missingDestination(): Publisher;
  /** Takes what reached the order consumer's destination until `done` holds. */
  orders(done: (messages: WireMessage[]) => boolean): Promise<WireMessage[]>;
  /** Takes what reached the results destination (from `inventory_outbox`) until `done` holds. */
  results(done: (messages: WireMessage[]) => boolean): Promise<WireMessage[]>;
  /** Copies of order events a tap kept besides the consumer's queue (RabbitMQ: audit.orders). */
  tapCopies?(): Promise<number>;
  close(): Promise<void>;
}

/** One transport's publishing side as the relay tests run it. */
export interface RelayRigKind {
  /** Shown in the test names. */
  name: string;
  /** What a publish to a missing destination says (its outcome's `error`). */
  missingDestinationError: RegExp;
  /**
   * Takes thousands of messages from four relays at once within seconds, and hands hundreds back
   * as quickly (moto does neither: its sends time out, reading 200 takes over 15 s on a busy machine).
   */
  quickBulkSends: boolean;
  /** A rig of its own (a vhost or a queue prefix). */
  setup(label: string): Promise<RelayRig>;
}

/** Closes what a rig opened, last first. */
function closers() {
  const all: (() => Promise<unknown>)[] = [];
  return {
    add: (close: () => Promise<unknown>) => all.push(close),
    async run() {
      for (const close of all.reverse()) await close().catch(() => {});
    },
  };
}

/** RabbitMQ (Amazon MQ): the relay publishes to the orders exchange, confirmed. */
export const RABBITMQ_RELAY: RelayRigKind = {
  name: 'RabbitMQ',
  missingDestinationError: /NOT_FOUND/,
  quickBulkSends: true,
  async setup(label) {
    const vhost = await createTestVhost(label);
    const open = closers();
    open.add(() => vhost.delete());
    const conn = await testConnection(vhost.amqpUrl);
    open.add(() => conn.close());
    const backendAt = (url: string) => {
      const backend = rabbitmqBackend({
        url,
        managementUrl: vhost.managementUrl,
        vhost: vhost.vhost,
        budget: TEST_RETRY_BUDGET,
        retention: DEFAULT_RETENTION,
        topology: PIPELINE_TOPOLOGY,
        consumer: 'relay-test',
        reconnect: { baseMs: 50, maxMs: 500 },
        publish: { confirmTimeoutMs: 5_000, connectTimeoutMs: 1_000 },
      });
      open.add(() => backend.close());
      return backend;
    };
    const backend = backendAt(vhost.amqpUrl);
    await backend.prepare('publish');
    const wire = (m: ReceivedMessage): WireMessage => ({
      messageId: m.messageId,
      type: m.type,
      correlationId: m.correlationId,
      schemaVersion: m.headers[SCHEMA_VERSION_HEADER] as string | undefined,
      durable: m.deliveryMode === 2,
      body: m.body,
    });
    const read = async (queue: string, done: (messages: WireMessage[]) => boolean) =>
      (await readMessages(conn, queue, (m) => done(m.map(wire)))).map(wire);
    return {
      backend,
      devEnv: { AMQP_URL: vhost.amqpUrl },
      async throughProxy() {
        const proxy = await new TcpProxy(
          '127.0.0.1',
          Number(new URL(AMQP_URL).port || 5672),
        ).start();
        open.add(() => proxy.close());
        return { proxy, backend: backendAt(amqpUrlVia(proxy.port, vhost.vhost)) };
      },
      missingDestination: () => backend.publisher('outbox', { exchange: 'no-such-exchange' }),
      orders: (done) => read(RABBITMQ_NAMES.inventoryQueue, done),
      results: (done) => read(RABBITMQ_NAMES.inventoryResultsQueue, done),
      tapCopies: () => queueDepth(conn, RABBITMQ_NAMES.auditQueue),
      close: () => open.run(),
    };
  },
};

/** SQS: the relay sends to the source queue with SendMessageBatch, on one SQS server. */
export function sqsRelay(server: SqsServer): RelayRigKind {
  return {
    name: `SQS ${server.name}`,
    missingDestinationError: /NonExistentQueue|does not exist/i,
    quickBulkSends: SQS_FEATURES[server.name].quickBulkSends,
    async setup(label) {
      const f = await createSqsRig(server, label);
      const open = closers();
      open.add(() => f.close());
      const at = (attribute: string, m: Message) => m.MessageAttributes?.[attribute]?.StringValue;
      const wire = (m: Message): WireMessage => ({
        messageId: at(SQS_ATTRIBUTES.eventId, m),
        type: at(SQS_ATTRIBUTES.eventType, m),
        correlationId: at(SQS_ATTRIBUTES.correlationId, m),
        schemaVersion: at(SQS_ATTRIBUTES.schemaVersion, m),
        durable: true,
        body: JSON.parse(m.Body ?? '{}'),
      });
      const read = async (queueUrl: string, done: (messages: WireMessage[]) => boolean) =>
        (await receiveAll(f.client, queueUrl, (m) => done(m.map(wire)))).map(wire);
      return {
        backend: f.backend,
        devEnv: { SQS_ENDPOINT: f.endpoint, SQS_QUEUE_PREFIX: f.prefix },
        async throughProxy() {
          const proxy = await new TcpProxy('127.0.0.1', Number(new URL(f.endpoint).port)).start();
          open.add(() => proxy.close());
          const backend = sqsBackend({
            ...f.backend.config,
            endpoint: `http://127.0.0.1:${proxy.port}`,
            requestTimeoutMs: 500,
          });
          open.add(() => backend.close());
          await backend.queues(); // looked up while the proxy is open
          return { proxy, backend };
        },
        missingDestination() {
          // as a deployed function configures it, with a source queue URL that does not exist
          const missing = sqsBackend({
            ...f.backend.config,
            queueUrls: { source: `${f.queues.sourceUrl}-nope` },
          });
          open.add(() => missing.close());
          return missing.publisher('outbox');
        },
        orders: (done) => read(f.queues.sourceUrl, done),
        results: (done) => read(f.queues.resultsUrl, done),
        close: () => open.run(),
      };
    },
  };
}

/** NATS JetStream: the relay publishes to the order events' stream, each publish ack awaited. */
export const NATS_RELAY: RelayRigKind = {
  name: 'NATS JetStream',
  missingDestinationError: /no stream takes subject/,
  quickBulkSends: true,
  async setup(label) {
    const namespace = await natsLocal.namespace(SERVICES, uniqueName(label));
    const open = closers();
    open.add(() => namespace.delete());
    const prefix = namespace.config.prefix as string;
    const backendAt = (servers: string, namespacePrefix = prefix) => {
      const backend = createBackend('nats-jetstream', {
        servers,
        prefix: namespacePrefix,
        budget: TEST_RETRY_BUDGET,
        retention: DEFAULT_RETENTION,
        topology: PIPELINE_TOPOLOGY,
        consumer: 'relay-test',
        reconnect: { baseMs: 50, maxMs: 500 },
        publish: { timeoutMs: 5_000 },
        connectTimeoutMs: 1_000,
      });
      open.add(() => backend.close());
      return backend;
    };
    const backend = backendAt(NATS_URL);
    // the consumers too: what reached a destination is read, and counted, through them
    await backend.prepare();
    const nc = await connect({ servers: NATS_URL.split(','), timeout: 2_000 });
    open.add(() => nc.close());
    const names = natsNames(prefix, PIPELINE_TOPOLOGY);
    const jsm = await jetstreamManager(nc);
    // a stream keeps its messages on disk when its storage is a file
    const onFile = async (stream: string) =>
      (await jsm.streams.info(stream)).config.storage === StorageType.File;
    const wire = (m: JsMsg, durable: boolean): WireMessage => ({
      messageId: header(m.headers, NATS_HEADERS.eventId),
      type: header(m.headers, NATS_HEADERS.eventType),
      correlationId: header(m.headers, NATS_HEADERS.correlationId),
      schemaVersion: header(m.headers, NATS_HEADERS.schemaVersion),
      durable,
      body: m.json(),
    });
    const read = async (
      consumer: keyof typeof PIPELINE_TOPOLOGY.subscriptions,
      done: (messages: WireMessage[]) => boolean,
    ) => {
      const consumerNames = names.consumers[consumer] as ConsumerNames;
      const durable = await onFile(consumerNames.stream);
      const of = (messages: JsMsg[]) => messages.map((m) => wire(m, durable));
      return of(await readNatsMessages(nc, consumerNames, (m) => done(of(m))));
    };
    return {
      backend,
      devEnv: { NATS_URL, NATS_PREFIX: prefix },
      async throughProxy() {
        const server = new URL(NATS_URL.split(',')[0] ?? NATS_URL);
        const proxy = await new TcpProxy(server.hostname, Number(server.port || 4222)).start();
        open.add(() => proxy.close());
        return { proxy, backend: backendAt(`nats://127.0.0.1:${proxy.port}`) };
      },
      // never prepared: no stream takes its subjects
      missingDestination: () => backendAt(NATS_URL, `${prefix}missing_`).publisher('outbox'),
      orders: (done) => read('inventory', done),
      results: (done) => read('results', done),
      close: () => open.run(),
    };
  },
};

/**
 * Every transport the transport-agnostic relay tests run on (`describe.each`). A new transport
 * adds its entry here.
 */
export const RELAY_RIGS: readonly RelayRigKind[] = [
  RABBITMQ_RELAY,
  ...SQS_SERVERS.map(sqsRelay),
  NATS_RELAY,
];
