import { ConfigError } from '../../shared/config/env.js';
import {
  isTransportName,
  TRANSPORT_NAMES,
  type TransportName,
} from '../../shared/transport/index.js';
import { memoryLocal } from './memory.js';
import { natsLocal } from './nats.js';
import { rabbitmqLocal } from './rabbitmq.js';
import { sqsLocal } from './sqs.js';
import type { LocalTransport } from './types.js';

/**
 * The local side of every registered transport (`shared/transport/index.ts`), by name: what the
 * tooling (dev, the CLI, scratch environments, the lab, the soak, the benchmarks) needs beyond the
 * backend itself. A new transport is one line here.
 */
const LOCAL_TRANSPORTS: { readonly [N in TransportName]: LocalTransport } = {
  rabbitmq: rabbitmqLocal,
  sqs: sqsLocal,
  memory: memoryLocal,
  'nats-jetstream': natsLocal,
};

/** The transports whose broker separate processes share (dev's roles, the lab's children). */
export const SHARED_TRANSPORTS = TRANSPORT_NAMES.filter((t) => LOCAL_TRANSPORTS[t].shared);

/** The local side of transport `name`. */
export function localTransport(name: string): LocalTransport {
  if (!isTransportName(name)) throw new ConfigError(`unknown transport "${name}"`);
  return LOCAL_TRANSPORTS[name];
}

export type { DeployedConsumers, LocalTransport, Namespace, Services } from './types.js';
