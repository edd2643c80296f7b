import { startConsumer } from '../../devkit/consumers.js';
import { deleteNatsStreams, NATS_URL } from '../../devkit/transports/nats.js';
import { TEST_RETRY_BUDGET } from '../../shared/config/budget.js';
import { DEFAULT_RETENTION } from '../../shared/index.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import { createBackend } from '../../shared/transport/index.js';
import type { NatsBackendConfig } from '../../shared/transport/nats/index.js';
import type { SqsRetryMode } from '../../shared/transport/sqs/constants.js';
import type { SqsServer } from '../globalSetup.js';
import { createTestVhost } from '../helpers/rabbit.js';
import { uniqueName } from '../helpers/services.js';
import type { TransportRig } from './transport.contract.js';

const base = {
  budget: TEST_RETRY_BUDGET,
  retention: DEFAULT_RETENTION,
  consumer: 'contract',
  topology: PIPELINE_TOPOLOGY,
};

/** RabbitMQ, worker mode or behind the Amazon MQ trigger emulation, in a vhost of its own. */
export async function rabbitRig(label: string, mode: 'worker' | 'lambda'): Promise<TransportRig> {
  const vhost = await createTestVhost(`contract_${label}`);
  const backend = createBackend('rabbitmq', {
    url: vhost.amqpUrl,
    managementUrl: vhost.managementUrl,
    vhost: vhost.vhost,
    reconnect: { baseMs: 50, maxMs: 500 },
    ...base,
  });
  await backend.prepare();
  return {
    backend,
    missingDestination: backend.publisher('outbox', { exchange: 'no-such-exchange' }),
    startConsumer: (handler) =>
      startConsumer(backend, handler, {
        mode,
        reconnectBaseMs: 50,
        reconnectMaxMs: 300,
        batchSize: 10,
        batchWindowMs: 50,
      }),
    async close() {
      await backend.close();
      await vhost.delete();
    },
  };
}

/** SQS behind the trigger emulation, with a retry mode, on standard or FIFO queues. */
export async function sqsRig(
  server: SqsServer,
  label: string,
  mode: SqsRetryMode,
  fifo = false,
): Promise<TransportRig> {
  const prefix = `${uniqueName(`contract_${label}`).replace(/_/g, '-')}-`;
  const backend = createBackend('sqs', {
    endpoint: server.endpoint,
    region: 'us-east-1',
    prefix,
    fifo,
    mode,
    visibilityTimeoutSeconds: 6,
    requestTimeoutMs: 2_000,
    maxAttempts: 1,
    ...base,
  });
  await backend.prepare();
  const missing = createBackend('sqs', {
    endpoint: server.endpoint,
    region: 'us-east-1',
    prefix: `${prefix}missing-`,
    fifo,
    mode,
    maxAttempts: 1,
    ...base,
  });
  return {
    backend,
    missingDestination: missing.publisher('outbox'),
    startConsumer: (handler) =>
      startConsumer(backend, handler, {
        mode: 'lambda',
        batchSize: 10,
        concurrency: 1,
        functionTimeoutMs: 1_000,
      }),
    async close() {
      await missing.close();
      await backend.close();
    },
  };
}

/** NATS JetStream in worker mode, every stream, consumer and subject under a prefix of its own. */
export async function natsRig(
  label: string,
  settings: Partial<NatsBackendConfig> = {},
): Promise<TransportRig> {
  const prefix = `${uniqueName(`nats_${label}`)}_`;
  const backend = createBackend('nats-jetstream', {
    servers: NATS_URL.split(','),
    prefix,
    reconnect: { baseMs: 50, maxMs: 500 },
    ...base,
    ...settings,
  });
  await backend.prepare();
  // never prepared: no stream takes its subjects
  const missing = createBackend('nats-jetstream', {
    servers: NATS_URL.split(','),
    prefix: `${prefix}missing_`,
    ...base,
  });
  return {
    backend,
    missingDestination: missing.publisher('outbox'),
    startConsumer: (handler) =>
      startConsumer(backend, handler, {
        mode: 'worker',
        reconnectBaseMs: 50,
        reconnectMaxMs: 300,
        prefetch: 10,
      }),
    async close() {
      await missing.close();
      await backend.close();
      await deleteNatsStreams(prefix);
    },
  };
}
