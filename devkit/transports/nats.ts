import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, headers } from '@nats-io/transport-node';
import { type Backend, subscriptionOf, type Topology } from '../../shared/port/types.js';
import { NATS_HEADERS } from '../../shared/transport/nats/constants.js';
import { natsNames } from '../../shared/transport/nats/index.js';
import type { LocalTransport, RawMessage } from './types.js';

/** The NATS server local runs use (JetStream enabled): `NATS_URL`, as the backend reads it. */
export const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

/** Deletes every stream whose name starts with `prefix`, and so their consumers. */
export async function deleteNatsStreams(prefix: string, servers = NATS_URL): Promise<void> {
  const nc = await connect({ servers: servers.split(','), timeout: 2_000 });
  try {
    const jsm = await jetstreamManager(nc);
    for await (const name of jsm.streams.names()) {
      if (name.startsWith(prefix)) await jsm.streams.delete(name);
    }
  } finally {
    await nc.close();
  }
}

/**
 * To the default subscription's stream (the order events': `<prefix>orders.<type>`), each publish ack awaited; the message id
 * is the deduplication id too, as the relay's.
 */
async function publishRawNats(backend: Backend, messages: readonly RawMessage[]): Promise<void> {
  const config = (
    backend as { config?: { servers?: string | string[]; prefix?: string; topology?: Topology } }
  ).config;
  if (!config?.servers || !config.topology) throw new Error('not a NATS backend');
  const stream = subscriptionOf(config.topology).subscription.stream;
  const root = natsNames(config.prefix ?? '', config.topology).streams[stream]?.subjectRoot;
  const nc = await connect({ servers: config.servers, timeout: 2_000 });
  try {
    const js = jetstream(nc);
    for (const m of messages) {
      const h = headers();
      if (m.messageId) h.set(NATS_HEADERS.eventId, m.messageId);
      if (m.type) h.set(NATS_HEADERS.eventType, m.type);
      if (m.schemaVersion) h.set(NATS_HEADERS.schemaVersion, m.schemaVersion);
      const subject = `${root}.${m.routingKey ?? m.type ?? 'order.created'}`;
      await js.publish(subject, Buffer.from(m.body), {
        headers: h,
        ...(m.messageId ? { msgID: m.messageId } : {}),
      });
    }
  } finally {
    await nc.close();
  }
}

/**
 * NATS JetStream: nothing deploys it (no consumer functions, worker mode only) and the preflight
 * has no check for it (a server that does not answer fails the backend's `ready`). A namespace is
 * a name prefix: nothing exists until a backend prepares its streams.
 */
export const natsLocal: LocalTransport = {
  name: 'nats-jetstream',
  // one server, shared by every process (the pipeline's roles, the lab's children)
  shared: true,
  publishRaw: publishRawNats,
  required: () => ({}),
  async namespace(_services, name) {
    const prefix = `${name}_`;
    return {
      config: { servers: NATS_URL.split(','), prefix },
      delete: () => deleteNatsStreams(prefix),
    };
  },
};
