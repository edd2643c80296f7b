import { TransportError } from '../../port/errors.js';

/**
 * A small client of the RabbitMQ management HTTP API (the way Amazon MQ is configured): virtual
 * hosts, permissions, policies, queue inspection.
 */
export class RabbitManagement {
  private readonly base: URL;
  private readonly auth: string;

  constructor(managementUrl: string) {
    const u = new URL(managementUrl);
    this.auth = `Basic ${Buffer.from(`${decodeURIComponent(u.username || 'guest')}:${decodeURIComponent(u.password || 'guest')}`).toString('base64')}`;
    u.username = '';
    u.password = '';
    this.base = u;
  }

  get user(): string {
    return Buffer.from(this.auth.slice(6), 'base64').toString().split(':')[0] ?? 'guest';
  }

  /** Calls the API; 404 resolves to `undefined`, other errors throw `TransportError`. */
  async request<T = unknown>(method: string, path: string, body?: unknown): Promise<T | undefined> {
    const res = await fetch(new URL(path, this.base), {
      method,
      headers: { authorization: this.auth, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(10_000),
    });
    if (res.status === 404) return undefined;
    if (!res.ok) {
      throw new TransportError(
        `RabbitMQ management ${method} ${path}: ${res.status} ${await res.text()}`,
      );
    }
    const text = await res.text();
    return (text ? JSON.parse(text) : undefined) as T;
  }

  /** Creates a virtual host and gives the management user full permissions on it. Idempotent. */
  async createVhost(vhost: string): Promise<void> {
    const v = encodeURIComponent(vhost);
    await this.request('PUT', `/api/vhosts/${v}`, {});
    await this.request('PUT', `/api/permissions/${v}/${encodeURIComponent(this.user)}`, {
      configure: '.*',
      write: '.*',
      read: '.*',
    });
  }

  private versionPromise: Promise<string> | undefined;

  /** The broker's version, e.g. `3.10.7` (asked once). */
  version(): Promise<string> {
    this.versionPromise ??= this.request<{ rabbitmq_version: string }>('GET', '/api/overview').then(
      (o) => o?.rabbitmq_version ?? '0.0.0',
    );
    return this.versionPromise;
  }

  /** `apply-to: quorum_queues` exists from RabbitMQ 3.12 on. */
  async supportsQuorumApplyTo(): Promise<boolean> {
    const [major = 0, minor = 0] = (await this.version()).split('.').map(Number);
    return major > 3 || (major === 3 && minor >= 12);
  }

  async deleteVhost(vhost: string): Promise<void> {
    await this.request('DELETE', `/api/vhosts/${encodeURIComponent(vhost)}`);
  }
}

/** The AMQP URL for another virtual host on the same broker. */
export function amqpUrlForVhost(amqpUrl: string, vhost: string): string {
  const u = new URL(amqpUrl);
  u.pathname = `/${encodeURIComponent(vhost)}`;
  return u.toString();
}
