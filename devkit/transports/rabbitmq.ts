import { createLogger } from '../../shared/logger.js';
import { RABBITMQ_NAMES } from '../../shared/pipeline/names.js';
import type { Backend, MessageHandler, RunningConsumer } from '../../shared/port/types.js';
import {
  AMAZON_MQ_TRIGGER,
  SCHEMA_VERSION_HEADER,
} from '../../shared/transport/rabbitmq/constants.js';
import {
  amazonMqLambdaHandler,
  amqpUrlForVhost,
  RabbitManagement,
  RabbitMqBackend,
  vhostOf,
} from '../../shared/transport/rabbitmq/index.js';
import { amazonMqEventSourceOf } from '../lambda/deployedSettings.js';
import { startAmazonMqEventSource } from '../lambda/eventSources.js';
import { AmazonMqTrigger } from '../triggers/amazonMqTrigger.js';
import { watched } from '../triggers/watched.js';
import type { ConsumerSettings, LocalTransport, RawMessage, ScratchVhost } from './types.js';

/** Creates virtual host `name` (the management user gets full permissions on it). */
export async function createScratchVhost(
  managementUrl: string,
  amqpUrl: string,
  name: string,
): Promise<ScratchVhost> {
  const management = new RabbitManagement(managementUrl);
  await management.createVhost(name);
  return {
    vhost: name,
    amqpUrl: amqpUrlForVhost(amqpUrl, name),
    managementUrl,
    management,
    delete: () => management.deleteVhost(name),
  };
}

/** An AMQP URL pointing at `127.0.0.1:port` (e.g. a proxy) for the given vhost. */
export function amqpUrlVia(amqpUrl: string, port: number, vhost: string): string {
  const u = new URL(amqpUrlForVhost(amqpUrl, vhost));
  u.hostname = '127.0.0.1';
  u.port = String(port);
  return u.toString();
}

const FUNCTIONS = { inventory: 'reserve-inventory-rabbitmq', results: 'order-results-rabbitmq' };

/**
 * The reserve function for RabbitMQ behind the Amazon MQ trigger emulation (one invocation at a
 * time, as AWS runs one per RabbitMQ event source mapping, whatever `concurrency` says).
 */
async function startAmazonMqTrigger(
  backend: Backend,
  handler: MessageHandler,
  settings: ConsumerSettings,
): Promise<RunningConsumer> {
  if (!(backend instanceof RabbitMqBackend)) throw new Error('not a RabbitMQ backend');
  const results = settings.queue === 'results';
  const functionName = results ? FUNCTIONS.results : FUNCTIONS.inventory;
  const logger = settings.logger ?? createLogger(functionName);
  // The order-results function composes the same handler (functions/order-results-rabbitmq).
  const fn = amazonMqLambdaHandler({
    driver: backend.amazonMqDriver(handler, {
      journal: settings.journal,
      notices: settings.notices,
      queue: settings.queue,
    }),
    logger,
  });
  const trigger = new AmazonMqTrigger(
    { broker: backend, handler: watched(fn, settings.onInvocationError), logger },
    {
      queue: results ? RABBITMQ_NAMES.inventoryResultsQueue : RABBITMQ_NAMES.inventoryQueue,
      vhost: backend.config.vhost,
      batchSize: settings.batchSize ?? AMAZON_MQ_TRIGGER.batchSize,
      batchWindowMs: settings.batchWindowMs ?? AMAZON_MQ_TRIGGER.batchWindowMs,
      ...(settings.functionTimeoutMs ? { functionTimeoutMs: settings.functionTimeoutMs } : {}),
      functionName,
    },
  );
  await trigger.start();
  return trigger;
}

/** To the `orders` exchange on a confirm channel, the confirms awaited. */
async function publishRawRabbit(backend: Backend, messages: readonly RawMessage[]): Promise<void> {
  if (!(backend instanceof RabbitMqBackend)) throw new Error('not a RabbitMQ backend');
  await backend.withChannel(async (ch) => {
    for (const m of messages) {
      ch.publish(
        RABBITMQ_NAMES.ordersExchange,
        m.routingKey ?? m.type ?? 'order.created',
        Buffer.from(m.body),
        {
          persistent: true,
          contentType: 'application/json',
          ...(m.messageId ? { messageId: m.messageId } : {}),
          ...(m.type ? { type: m.type } : {}),
          headers: m.schemaVersion ? { [SCHEMA_VERSION_HEADER]: m.schemaVersion } : {},
        },
      );
    }
    await ch.waitForConfirms();
  });
}

/** RabbitMQ locally: the broker and its management API; a virtual host per scratch environment. */
export const rabbitmqLocal: LocalTransport = {
  name: 'rabbitmq',
  shared: true,
  publishRaw: publishRawRabbit,
  required: (env, scope) => ({
    rabbitmq: env.AMQP_URL,
    ...(scope === 'consume' ? { rabbitManagement: env.RABBITMQ_MANAGEMENT_URL } : {}),
  }),
  async namespace(services, name) {
    const vhost = await createScratchVhost(services.managementUrl, services.amqpUrl, name);
    return {
      config: {
        url: vhost.amqpUrl,
        managementUrl: vhost.managementUrl,
        vhost: vhost.vhost,
        connectionName: name,
      },
      vhost,
      delete: () => vhost.delete(),
    };
  },
  deployed: {
    stack: 'rabbitmq',
    functions: FUNCTIONS,
    emulate: startAmazonMqTrigger,
    triggerSettings(deployed, functionId, env, functionEnv) {
      const m = amazonMqEventSourceOf(deployed, functionId);
      return {
        batchSize: env.MQ_BATCH_SIZE ?? m.batchSize,
        batchWindowMs: env.MQ_BATCH_WINDOW_MS ?? m.batchWindowMs,
        functionTimeoutMs: functionEnv.FUNCTION_TIMEOUT_MS,
      };
    },
    describe: () => 'Amazon MQ trigger emulation',
    eventSourceName: 'Amazon MQ',
    operator: (stack) => ({
      note: `--stack ${stack.name}: the Amazon MQ broker is private and admits only the stack's operator security group, so the parking lot is reached at AMQP_URL and RABBITMQ_MANAGEMENT_URL from inside the stack's VPC, as without --stack (docs/cli.md)`,
    }),
    unreachable: () => "is AMQP_URL the broker, from inside the stack's VPC?",
    startEventSource: (d, functionId, options) =>
      startAmazonMqEventSource(d, functionId, {
        ...options,
        vhost: options.vhost ?? vhostOf(options.amqpUrl),
      }),
  },
};
