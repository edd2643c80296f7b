import { mqtAmqpPeer } from './mqtAmqp.js';
import { mqtSqsPeer } from './mqtSqs.js';
import { pgTransactionalOutboxPeer, pgTransactionalOutboxRelay } from './pgTransactionalOutbox.js';
import { powertoolsPeer } from './powertools.js';
import { sqsConsumerPeer } from './sqsConsumer.js';
import type { PeerConsumer } from './types.js';

export { pgTransactionalOutboxRelay };

/** Every consumer peer, in the order the reports list them. */
export const CONSUMER_PEERS: PeerConsumer[] = [
  powertoolsPeer,
  sqsConsumerPeer,
  mqtSqsPeer,
  mqtAmqpPeer,
  pgTransactionalOutboxPeer,
];
