import {
  amqpUrlForVhost,
  RabbitManagement,
} from '../../shared/transport/rabbitmq/RabbitManagement.js';
import { AMQP_URL, RABBITMQ_MANAGEMENT_URL, uniqueName } from './services.js';

/**
 * RabbitMQ isolation for parallel test files: each file gets its own virtual host, so the pinned
 * names (`orders`, `inventory.orders`, …) can be used as they are without two files colliding.
 */
export interface TestVhost {
  vhost: string;
  amqpUrl: string;
  management: RabbitManagement;
  delete(): Promise<void>;
}

export async function createTestVhost(label: string): Promise<TestVhost> {
  const vhost = uniqueName(label);
  const management = new RabbitManagement(RABBITMQ_MANAGEMENT_URL);
  await management.createVhost(vhost);
  return {
    vhost,
    amqpUrl: amqpUrlForVhost(AMQP_URL, vhost),
    management,
    delete: () => management.deleteVhost(vhost),
  };
}

/** An AMQP URL pointing at `127.0.0.1:port` (e.g. a test proxy) for the given vhost. */
export function amqpUrlVia(port: number, vhost: string): string {
  const u = new URL(amqpUrlForVhost(AMQP_URL, vhost));
  u.hostname = '127.0.0.1';
  u.port = String(port);
  return u.toString();
}
