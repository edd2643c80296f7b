import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { LocalTransport } from './types.js';

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
 * NATS JetStream: nothing deploys it (no consumer functions, worker mode only) and the preflight
 * has no check for it (a server that does not answer fails the backend's `ready`). A namespace is
 * a name prefix: nothing exists until a backend prepares its streams.
 */
export const natsLocal: LocalTransport = {
  name: 'nats-jetstream',
  // one server, shared by every process (the pipeline's roles, the lab's children)
  shared: true,
  required: () => ({}),
  async namespace(_services, name) {
    const prefix = `${name}_`;
    return {
      config: { servers: NATS_URL.split(','), prefix },
      delete: () => deleteNatsStreams(prefix),
    };
  },
};
