import type { Backend } from '../shared/port/types.js';
import { localTransport } from './transports/index.js';
import type { RawMessage } from './transports/types.js';

export type { RawMessage } from './transports/types.js';

/**
 * Publishes messages as they are where the relay publishes order events, and waits until the
 * broker took them (each transport's own way: its local entry's `publishRaw`). The lab and the
 * tests use it for poison messages.
 */
export async function publishRaw(backend: Backend, messages: readonly RawMessage[]): Promise<void> {
  const publish = localTransport(backend.transport).publishRaw;
  if (!publish) throw new Error(`no raw publish on the ${backend.transport} backend`);
  await publish(backend, messages);
}
