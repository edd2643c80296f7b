import type { SQSClient } from '@aws-sdk/client-sqs';
import type { Journal } from '../shared/consumer/journal.js';
import type { PgDatabase } from '../shared/db/pg/PgDatabase.js';

/**
 * Peers: the libraries a user would otherwise pick, doing our consumer's (and, for outbox
 * libraries, our relay's) job, each set up as its own docs recommend. Used only by the lab
 * (`npm start -- --peers`) and the benchmarks (`npm run bench -- --suite peers`); never by a
 * Lambda bundle (test/infra/peersNotBundled.test.ts). docs/peers.md has how each is set up.
 */
export const PEER_IDS = [
  'peer-powertools',
  'peer-sqs-consumer',
  'peer-mqt-sqs',
  'peer-mqt-amqp',
  'peer-pg-transactional-outbox',
] as const;
export type PeerId = (typeof PEER_IDS)[number];

/** Where a peer runs: its own namespace on the run's services. */
export interface PeerContext {
  /** Unique per run: queue-name prefix (SQS), virtual-host-scoped names (AMQP), Redis key prefix. */
  namespace: string;
  /** The run's database (migrated: `stock`, `peer_effects` from `ensurePeerSchema`). */
  db: PgDatabase;
  /** Its connection string (libraries that open their own pool). */
  databaseUrl: string;
  /** SQS peers: a client on the SQS-compatible endpoint. */
  sqs?: { client: SQSClient; endpoint: string; region: string };
  /** AMQP peers: the URL of the run's virtual host. */
  amqpUrl?: string;
  /** Redis (idempotency / deduplication stores). */
  redisUrl: string;
  /** Messages handled at once (invocations, consumers or prefetch, as the peer calls it). */
  concurrency: number;
  /** Messages per receive / invocation where the peer batches. */
  batchSize: number;
  /** Deliveries before a message goes to the peer's dead-letter queue (its redrive / retry limit). */
  maxDeliveries: number;
  /**
   * SQS peers: the queue's visibility timeout (s). Unset: the peer's documented default. The lab
   * passes its scaled settings (3 s) so a peer's redeliveries take the time ours take.
   */
  visibilityTimeoutSeconds?: number;
  /** Trigger-driven peers: the function timeout (ms; the visibility timeout must be ≥ 6 × it). */
  functionTimeoutMs?: number;
  /**
   * The business handler a user writes for this peer: parse the body, reserve the stock in
   * PostgreSQL (`reserveEffect`). Throws to fail the message (the peer retries it its way).
   */
  handle(body: string, delivery: PeerDelivery): Promise<void>;
  /**
   * Optional: the same handler run inside a transaction the peer opened (its `client`), for peers
   * that commit the effect together with their own bookkeeping (pg-transactional-outbox's inbox
   * row). Peers use it when present, else `handle` (which opens a transaction of its own).
   */
  handleIn?(client: TxClient, body: string, delivery: PeerDelivery): Promise<void>;
  /** Optional: what the peer did, as journal steps (received, duplicate, acked, parked). */
  journal?: Journal;
}

/** A database client inside a transaction someone else opened (node-postgres' or ours). */
export interface TxClient {
  query(sql: string, params?: readonly unknown[]): Promise<unknown>;
}

export interface PeerDelivery {
  /** The broker's message id (SQS MessageId, AMQP messageId property) or the envelope id. */
  messageId: string;
  /** Deliveries so far, where the transport says (SQS ApproximateReceiveCount). */
  attempt: number;
}

/** Where to put work for a running peer consumer. */
export type PeerInput =
  | { kind: 'sqs'; queueUrl: string; deadLetterQueueUrl?: string }
  | { kind: 'amqp'; exchange: string; routingKey: string; queue: string; deadLetterQueue?: string };

export interface RunningPeer {
  input: PeerInput;
  /**
   * What the peer set aside outside a broker's dead-letter queue (an inbox row it abandoned), for
   * the lab's "parked" column, read through `db` (the run's own pool: the peer's may be cut);
   * peers that only dead-letter through the broker leave it out.
   */
  parked?(db: PgDatabase): Promise<{ messageId: string; attempts: number; reason: string }[]>;
  /** Stops consuming; resolves when in-flight messages have settled (or were abandoned). */
  stop(): Promise<void>;
}

export interface PeerConsumer {
  id: PeerId;
  transport: 'sqs' | 'rabbitmq';
  /** The npm packages it is (their versions are read from node_modules for the reports). */
  packages: string[];
  /** How it is set up, citing the section of the peer's docs that was followed. */
  setup: string;
  /** What it promises about duplicates and losses, in its own docs' words where possible. */
  guarantee: string;
  /** Creates its queues (and stores) in `ctx.namespace`, starts consuming. */
  start(ctx: PeerContext): Promise<RunningPeer>;
}
