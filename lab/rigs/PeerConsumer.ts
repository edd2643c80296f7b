import type { RawMessage } from '../../devkit/rawMessages.js';
import {
  ensurePeerSchema,
  journalStep,
  parseOrderCreated,
  reserveEffect,
  reserveEffectIn,
} from '../../peers/effect.js';
import { CONSUMER_PEERS } from '../../peers/index.js';
import { REDIS_URL } from '../../peers/redis.js';
import type { PeerDelivery, RunningPeer } from '../../peers/types.js';
import { fault } from '../../shared/config/faults.js';
import { Journal } from '../../shared/consumer/journal.js';
import type { PgDatabase } from '../../shared/db/pg/PgDatabase.js';
import type { Envelope } from '../../shared/envelope/envelope.js';
import type { Publisher, PublishOutcome } from '../../shared/port/types.js';
import type { Configuration } from '../configurations.js';
import type { ParkedSummary } from '../types.js';
import { type PeerQueue, peerQueue } from './peer.js';
import type { Rig } from './rig.js';
import type { ConsumerOptions } from './types.js';

type PeerId = NonNullable<Configuration['peer']>;

/**
 * A peer configuration's consumer: the peer library on the run's namespace (its own queues and
 * stores), running the handler its user would write (peers/effect.ts) on the run's database
 * (or the given one), fed by our relay (a publisher to the peer's own queue) and observed from
 * the outside (its queue and dead-letter queue: peer.ts). The fault point `reserve.after-commit`
 * fires after the handler's COMMIT, as it does in ours; a peer that runs the effect in its own
 * transaction (its inbox) meets it before that transaction commits.
 */
export class PeerConsumer {
  private running: RunningPeer | undefined;
  private queue: PeerQueue | undefined;
  /** Peer handler calls in progress (a delivery being handled is not settled). */
  private inFlight = 0;
  /**
   * The ids of the bodies sent raw (poison messages): a peer that moves one to its dead-letter
   * queue without its attributes leaves only the body to know it by.
   */
  private readonly sentIds = new Map<string, string>();

  constructor(
    private readonly id: PeerId,
    private readonly rig: Rig,
  ) {}

  /** A peer's handler writes its effects beside ours. */
  prepare(): Promise<void> {
    return ensurePeerSchema(this.rig.inventoryDb);
  }

  async start(options: ConsumerOptions): Promise<void> {
    const peer = CONSUMER_PEERS.find((x) => x.id === this.id);
    if (!peer) throw new Error(`unknown peer ${this.id}`);
    const broker = this.rig.peerBroker();
    this.rig.onClose(() => this.close());
    const db = (options.db ?? this.rig.inventoryDb) as PgDatabase;
    const journal = new Journal();
    journal.addSink((e) => this.rig.run.journal.record(e));
    this.running = await peer.start({
      namespace: `${this.rig.scratch.sqsPrefix}${this.id.replace('peer-', '')}-`,
      db,
      databaseUrl: this.rig.database.urlOf(db),
      ...(broker.sqs ? { sqs: broker.sqs } : {}),
      ...(broker.amqpUrl ? { amqpUrl: broker.amqpUrl } : {}),
      redisUrl: REDIS_URL,
      concurrency: options.concurrency ?? 1,
      batchSize: 10,
      maxDeliveries: this.rig.budget.maxAttempts + 1,
      visibilityTimeoutSeconds: this.rig.settings.visibilityTimeoutSeconds,
      functionTimeoutMs: this.rig.settings.functionTimeoutMs,
      journal,
      ...this.handlers(db),
    });
    this.queue = peerQueue(this.running.input, {
      sqs: broker.sqs?.client,
      amqpUrl: broker.amqpUrl,
    });
  }

  private async close(): Promise<void> {
    await this.running?.stop().catch(() => {});
    await this.queue?.close();
  }

  /** The handler its user would write, in the peer's transaction or on its own. */
  private handlers(db: PgDatabase) {
    return {
      handle: (body: string, delivery: PeerDelivery) =>
        this.tracked(async () => {
          await reserveEffect(db, this.id, parseOrderCreated(body));
          this.committed(delivery);
          fault('reserve.after-commit');
        }),
      handleIn: (
        client: Parameters<typeof reserveEffectIn>[0],
        body: string,
        delivery: PeerDelivery,
      ) =>
        this.tracked(async () => {
          await reserveEffectIn(client, this.id, parseOrderCreated(body));
          fault('reserve.after-commit');
          // committed with the peer's own transaction: journaled as the handler returns
          this.committed(delivery);
        }),
    };
  }

  private committed(delivery: PeerDelivery): void {
    journalStep(this.rig.run.journal, 'effect-committed', delivery.messageId, delivery.attempt);
  }

  private async tracked<T>(fn: () => Promise<T>): Promise<T> {
    this.inFlight++;
    try {
      return await fn();
    } finally {
      this.inFlight--;
    }
  }

  private started(): PeerQueue {
    if (!this.queue) throw new Error(`${this.rig.configuration.id}: start the consumer first`);
    return this.queue;
  }

  /** What our relay publishes through: each envelope to the peer's queue, confirmed. */
  publisher(): Publisher {
    const queue = this.started();
    return {
      publish: async (envelopes: readonly Envelope[]): Promise<PublishOutcome[]> => {
        try {
          await queue.publish(envelopes);
          return envelopes.map((e) => ({ id: e.id, ok: true }));
        } catch (err) {
          const error = (err as Error).message;
          return envelopes.map((e) => ({ id: e.id, ok: false, reason: 'connection', error }));
        }
      },
      ready: async () => {},
      close: async () => {},
    };
  }

  /** Sends bodies to the peer's queue and waits until the broker took them. */
  async send(messages: RawMessage[]): Promise<void> {
    const queue = this.started();
    for (const m of messages) {
      if (m.messageId) this.sentIds.set(Buffer.from(m.body).toString(), m.messageId);
    }
    await queue.send(messages);
  }

  /**
   * True when the peer's queue holds nothing (visible, in flight or delayed) and no handler is
   * running: every delivery settled one way or another.
   */
  async idle(): Promise<boolean> {
    if (!this.queue) return true;
    return this.inFlight === 0 && (await this.queue.pending()) === 0;
  }

  /**
   * What the peer parked (nothing before it started): the messages in its dead-letter queue, read
   * without removing them, and the rows it set aside itself. None of the peers records a
   * diagnosis with them: the reason is what the queue says (the receive count), nothing more.
   */
  async parked(limit: number): Promise<ParkedSummary[]> {
    if (!this.running || !this.queue) return [];
    const own = (await this.running.parked?.(this.rig.inventoryDb)) ?? [];
    const setAside = own.map((p) => ({
      messageId: p.messageId,
      reason: p.reason,
      errorClass: 'none recorded',
      error: 'the peer stores no diagnosis with the row it abandoned',
      via: 'its inbox table',
      attempts: p.attempts,
    }));
    return [...setAside, ...(await this.queue.parked(limit, this.sentIds))];
  }

  /**
   * Waits until these events are each committed or parked and the queue idle (twice in a row,
   * 100 ms apart: a copy being moved between queues is briefly in neither).
   */
  async waitSettled(eventIds: string[]): Promise<void> {
    await this.rig.run.waitTwice(
      async () => this.allSettled(eventIds, await this.parked(500)) && (await this.idle()),
      `${eventIds.length} event(s) settled by ${this.rig.configuration.id}`,
      100,
    );
  }

  private allSettled(eventIds: string[], parkedList: ParkedSummary[]): boolean {
    const parked = new Set(parkedList.map((p) => p.messageId));
    const open = eventIds.filter(
      (id) => this.rig.run.linesOf(id, 'effect-committed').length === 0 && !parked.has(id),
    );
    // a peer may park a copy without the id we know it by (a body that is not JSON, moved
    // without its attributes): count those against the events still open
    const unnamed = parkedList.filter((p) => !p.messageId || !eventIds.includes(p.messageId));
    return open.length <= unnamed.length;
  }
}
