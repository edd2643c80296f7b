import { AMQP_URL, RABBITMQ_MANAGEMENT_URL, uniqueName } from './services.js';

/**
 * RabbitMQ isolation for parallel test files: each file gets its own virtual host, so the pinned
 * names (`orders`, `inventory.orders`, …) can be used as they are without two files colliding.
 */
export interface TestVhost {
  vhost: string;
  amqpUrl: string;
  managementUrl: string;
  delete(): Promise<void>;
}

export async function management(path: string, init: RequestInit = {}): Promise<Response> {
  const base = new URL(RABBITMQ_MANAGEMENT_URL);
  const auth = Buffer.from(
    `${decodeURIComponent(base.username)}:${decodeURIComponent(base.password)}`,
  ).toString('base64');
  base.username = '';
  base.password = '';
  const res = await fetch(new URL(path, base), {
    ...init,
    headers: {
      authorization: `Basic ${auth}`,
      'content-type': 'application/json',
      ...init.headers,
    },
  });
  if (!res.ok && res.status !== 404) {
    throw new Error(
      `RabbitMQ management ${init.method ?? 'GET'} ${path}: ${res.status} ${await res.text()}`,
    );
  }
  return res;
}

export async function createTestVhost(label: string): Promise<TestVhost> {
  const vhost = uniqueName(label);
  const v = encodeURIComponent(vhost);
  await management(`/api/vhosts/${v}`, { method: 'PUT', body: '{}' });
  const user = decodeURIComponent(new URL(RABBITMQ_MANAGEMENT_URL).username || 'guest');
  await management(`/api/permissions/${v}/${encodeURIComponent(user)}`, {
    method: 'PUT',
    body: JSON.stringify({ configure: '.*', write: '.*', read: '.*' }),
  });
  const amqp = new URL(AMQP_URL);
  amqp.pathname = `/${v}`;
  return {
    vhost,
    amqpUrl: amqp.toString(),
    managementUrl: RABBITMQ_MANAGEMENT_URL,
    async delete() {
      await management(`/api/vhosts/${v}`, { method: 'DELETE' });
    },
  };
}

/** An AMQP URL pointing at `host:port` (e.g. a test proxy) for the given vhost. */
export function amqpUrlVia(port: number, vhost: string): string {
  const u = new URL(AMQP_URL);
  u.hostname = '127.0.0.1';
  u.port = String(port);
  u.pathname = `/${encodeURIComponent(vhost)}`;
  return u.toString();
}
