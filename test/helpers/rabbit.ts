import { createScratchVhost, amqpUrlVia as viaPort } from '../../devkit/transports/rabbitmq.js';
import type { ScratchVhost } from '../../devkit/transports/types.js';
import { AMQP_URL, RABBITMQ_MANAGEMENT_URL, uniqueName } from './services.js';

/**
 * RabbitMQ isolation for parallel test files: each file gets its own virtual host, so the pinned
 * names (`orders`, `inventory.orders`, …) can be used as they are without two files colliding.
 */
export type TestVhost = ScratchVhost;

export function createTestVhost(label: string): Promise<TestVhost> {
  return createScratchVhost(RABBITMQ_MANAGEMENT_URL, AMQP_URL, uniqueName(label));
}

/** An AMQP URL pointing at `127.0.0.1:port` (e.g. a test proxy) for the given vhost. */
export function amqpUrlVia(port: number, vhost: string): string {
  return viaPort(AMQP_URL, port, vhost);
}
