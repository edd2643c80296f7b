import type { TcpProxy } from '../../devkit/TcpProxy.js';
import type { RetryBudget } from '../../shared/config/budget.js';
import type { SqlDatabase } from '../../shared/db/types.js';
import type { Publisher } from '../../shared/port/types.js';

export interface RigOptions {
  /** Overrides of the retry budget for this scenario (e.g. `maxAttempts: 0`: park at once). */
  budget?: Partial<RetryBudget>;
}

/** An event the producer side accepted (Jepsen: an acknowledged write). */
export interface AcceptedEvent {
  eventId: string;
  type: string;
  /** The order it belongs to (the ordering key). */
  aggregateId: string;
  version: number;
  at: number;
}

/** What a child process connects through instead of the run's own endpoints. */
export interface ChildOverrides {
  /** Settings of the child's backend over the run's (a proxy's URL, a short heartbeat). */
  backend?: Record<string, unknown>;
  databaseUrl?: string;
}

/** The lease a frozen consumer process outlives, and what its child is given for it. */
export interface ConsumerLease {
  child: ChildOverrides;
  /** In words, for the report (`its visibility timeout (6 s)`). */
  text: string;
  ms: number;
}

/** A child's broker connection through a proxy the scenario controls (cut, hold the answers). */
export interface ProxiedBroker {
  child: ChildOverrides;
  proxy: TcpProxy;
}

/** Part of the next publish round made to fail (`publish-partially-failed`). */
export interface PartialPublish {
  /** The publisher the round goes through (default: the rig's). */
  publisher?: Publisher | undefined;
  /** The mark on the timeline. */
  mark: string;
  /** Makes the failed part publishable again. */
  restore(): Promise<void>;
  /** One line on what the broker answered the round, for the note. */
  note(round: { published: number; failed: number; claimed: number }): string;
}

/** How the peer libraries reach this run's broker. */
export interface PeerBroker {
  sqs?: { client: import('@aws-sdk/client-sqs').SQSClient; endpoint: string; region: string };
  amqpUrl?: string;
}

export interface ConsumerOptions {
  /** The database the consumer uses (default: the run's own, direct). */
  db?: SqlDatabase;
  /** Consumers (worker channels) or invocations at once (SQS trigger). */
  concurrency?: number;
}

/** The lab's relay: a small row backoff, so a fixed route is seen quickly. */
export const RELAY_OPTIONS = {
  batchSize: 100,
  maxAttempts: 10,
  retryBaseMs: 100,
  retryMaxMs: 400,
  readyTimeoutMs: 300,
};
