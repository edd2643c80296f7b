import { z } from 'zod';
import { DEFAULT_REDRIVE_LIMIT } from '../../config/env.js';
import { ConsumerDriver } from '../../consumer/driver.js';
import { matches, overRedriveLimit, pacer } from '../../consumer/parking.js';
import { type Envelope, encodeEnvelope } from '../../envelope/envelope.js';
import type {
  Backend,
  Capabilities,
  ConsumeOptions,
  Delivery,
  Diagnosis,
  InboundMessage,
  Inspection,
  MessageHandler,
  ParkedEntry,
  ParkingLot,
  PrepareReport,
  Publisher,
  PublishOutcome,
  Redrive,
  RedriveSkip,
  RetryRequest,
  RunningConsumer,
  Settle,
  Settled,
  Stream,
  Topology,
} from '../../port/types.js';
import { subscriptionOf } from '../../port/types.js';
import { backendBaseSchema, type TransportModule } from '../module.js';

/** A message as the in-memory broker holds it. */
interface Stored {
  id: string;
  body: Buffer;
  type: string;
  schemaVersion: string;
  correlationId: string;
  attempt: number;
  firstFailureAt?: string | undefined;
  enqueuedAt: number;
  redelivered: boolean;
  redrive?: Redrive | undefined;
}

interface MemoryDelivery extends Delivery {
  stored: Stored;
}

export interface MemoryBackendConfig {
  /**
   * The streams and subscriptions: its streams exist once `prepare` ran, and the consumer reads
   * the stream of its first subscription (the only one it consumes).
   */
  topology?: Topology;
  /** Streams, where no topology is given; the first is the one the consumer reads. Default `outbox`. */
  streams?: readonly Stream[];
  /** Who parks, for diagnoses. */
  consumer?: string;
  /** Messages handed to the handler at once. Default 10. */
  batchSize?: number;
  /** Pause after a give-back before the next delivery (ms), doubling up to 1 s. Default 10. */
  giveBackBackoffMs?: number;
  /** Redrives per message allowed (`REDRIVE_LIMIT`). Default {@link DEFAULT_REDRIVE_LIMIT}. */
  redriveLimit?: number;
}

const CAPABILITIES: Capabilities = {
  orderedPerKey: true,
  perMessageDelay: true,
  partialBatchResponse: true,
  redeliveryFlag: true,
  spontaneousDuplicates: false,
  brokerParking: false,
  publishDeduplication: false,
  consumeModes: ['worker'],
};

const inbound = (m: Stored): InboundMessage => ({
  messageId: m.id,
  body: m.body,
  attempt: m.attempt,
  redelivered: m.redelivered,
  firstFailureAt: m.firstFailureAt,
  type: m.type,
  schemaVersion: m.schemaVersion,
  correlationId: m.correlationId,
  ...(m.redrive ? { redrive: m.redrive } : {}),
});

/**
 * The in-memory backend, both sides, no I/O: the reference implementation of the transport
 * port's semantics (as Watermill's GoChannel), for the contract suite's fast run and for unit
 * tests of code above the port. At-least-once: a delivery given back comes again with
 * `redelivered`; retry later waits the requested delay (per message); park keeps the message with
 * its diagnosis until a redrive brings it back with the same id and its attempts reset. One queue
 * per stream; the consumer reads the first stream, in publish order.
 */
export class MemoryBackend implements Backend {
  readonly transport = 'memory';
  readonly capabilities = CAPABILITIES;
  private readonly queues = new Map<Stream, Stored[]>();
  private readonly inFlight = new Set<Stored>();
  private readonly parked: { stored: Stored; diagnosis: Diagnosis }[] = [];
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly streams: readonly Stream[];
  private readonly consumers: MemoryConsumer[] = [];
  private wake: (() => void) | undefined;

  constructor(readonly config: MemoryBackendConfig = {}) {
    const topology = config.topology;
    if (topology) {
      const consumed = subscriptionOf(topology).subscription.stream;
      this.streams = [consumed, ...Object.keys(topology.streams).filter((s) => s !== consumed)];
    } else this.streams = config.streams ?? ['outbox'];
  }

  async prepare(): Promise<PrepareReport> {
    for (const s of this.streams) if (!this.queues.has(s)) this.queues.set(s, []);
    return { queues: this.streams.length, policies: 0, server: 'in-memory' };
  }

  async ready(): Promise<void> {}

  private get source(): Stored[] {
    return this.queues.get(this.streams[0] as Stream) ?? [];
  }

  /** A publisher to a stream; a stream that was never prepared is a missing destination. */
  publisher(stream: Stream = this.streams[0] as Stream): Publisher {
    return {
      ready: async () => {},
      close: async () => {},
      publish: async (envelopes: readonly Envelope[]): Promise<PublishOutcome[]> => {
        const queue = this.queues.get(stream);
        return envelopes.map((e) => {
          if (!queue) {
            return { id: e.id, ok: false, reason: 'unroutable', error: `no stream "${stream}"` };
          }
          queue.push({
            id: e.id,
            body: encodeEnvelope(e),
            type: e.type,
            schemaVersion: e.schema_version,
            correlationId: e.correlation_id,
            attempt: 0,
            enqueuedAt: Date.now(),
            redelivered: false,
          });
          this.signal();
          return { id: e.id, ok: true };
        });
      },
    };
  }

  private signal(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  /** Resolves when a message may be ready (or after `ms`). */
  waitForWork(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(t);
        resolve();
      };
    });
  }

  /** Takes up to `n` ready messages of the consumer's stream, in order. */
  take(n: number): Stored[] {
    const batch = this.source.splice(0, n);
    for (const m of batch) this.inFlight.add(m);
    return batch;
  }

  private later(ms: number, fn: () => void): void {
    const t = setTimeout(() => {
      this.timers.delete(t);
      fn();
    }, ms);
    this.timers.add(t);
  }

  /** The settle contract on the in-memory queue. */
  readonly settle: Settle<MemoryDelivery> = {
    ackMode: 'message',
    ack: async (d) => {
      this.inFlight.delete(d.stored);
    },
    retryLater: async (d, retry: RetryRequest): Promise<Settled> => {
      const copy: Stored = {
        ...d.stored,
        attempt: retry.attempt,
        firstFailureAt: retry.firstFailureAt,
        redelivered: false,
      };
      this.later(retry.delayMs, () => {
        this.source.push({ ...copy, enqueuedAt: Date.now() });
        this.signal();
      });
      return { state: 'ack', detail: `in ${retry.delayMs} ms` };
    },
    park: async (d, diagnosis: Diagnosis): Promise<Settled> => {
      this.parked.push({ stored: d.stored, diagnosis });
      return { state: 'ack' };
    },
    giveBack: async (deliveries) => {
      const back = deliveries.map((d) => {
        this.inFlight.delete(d.stored);
        return { ...d.stored, redelivered: true };
      });
      this.source.unshift(...back);
      for (const c of this.consumers) c.backOff();
    },
  };

  /** A consumer of the default subscription (the first stream) in this process: the only one. */
  async consume(handler: MessageHandler, options: ConsumeOptions = {}): Promise<RunningConsumer> {
    const only = this.config.topology ? subscriptionOf(this.config.topology).name : undefined;
    if (options.queue !== undefined && options.queue !== only) {
      throw new Error(
        `the in-memory backend consumes one subscription (${only ?? 'its first stream'})`,
      );
    }
    const driver = new ConsumerDriver<MemoryDelivery>(
      { handler, settle: this.settle, journal: options.journal },
      { consumer: this.config.consumer ?? 'memory' },
    );
    const consumer = new MemoryConsumer(this, driver, {
      batchSize: options.maxBatch ?? this.config.batchSize ?? 10,
      backoffMs: this.config.giveBackBackoffMs ?? 10,
    });
    this.consumers.push(consumer);
    consumer.start();
    return consumer;
  }

  parkingLot(): ParkingLot {
    return {
      list: async (limit = 100): Promise<ParkedEntry[]> =>
        this.parked.slice(0, limit).map((p) => ({ diagnosis: p.diagnosis, via: 'consumer' })),
      redrive: async (selection, options = {}) => {
        const pace = pacer(options.rate);
        const result = {
          scanned: this.parked.length,
          matched: 0,
          moved: [] as string[],
          dryRun: options.dryRun ?? false,
          skipped: [] as RedriveSkip[],
        };
        const limit = this.config.redriveLimit ?? DEFAULT_REDRIVE_LIMIT;
        for (const p of [...this.parked]) {
          const entry: ParkedEntry = { diagnosis: p.diagnosis, via: 'consumer' };
          if (!matches(entry, selection)) continue;
          result.matched++;
          const skip = overRedriveLimit(entry, limit, options);
          if (skip) {
            result.skipped.push(skip); // stays parked, its diagnosis untouched
            continue;
          }
          if (options.dryRun) continue;
          await pace();
          this.parked.splice(this.parked.indexOf(p), 1);
          this.source.push({
            ...p.stored,
            attempt: 0,
            firstFailureAt: undefined,
            redelivered: false,
            enqueuedAt: Date.now(),
            // a fresh retry window, counted
            redrive: {
              count: (p.stored.redrive?.count ?? 0) + 1,
              lastAt: new Date().toISOString(),
            },
          });
          this.signal();
          result.moved.push(p.stored.id);
          options.onMoved?.(p.stored.id);
        }
        return result;
      },
    };
  }

  async inspect(): Promise<Inspection> {
    const oldest = this.source[0]?.enqueuedAt;
    return {
      ready: this.source.length,
      inFlight: this.inFlight.size,
      retrying: this.timers.size,
      parked: this.parked.length,
      heldForDeadLettering: 0,
      oldestAgeMs: oldest === undefined ? undefined : Date.now() - oldest,
    };
  }

  async close(): Promise<void> {
    for (const c of this.consumers) await c.stop();
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }
}

/** Delivers batches of the in-memory queue to the driver, one batch at a time. */
class MemoryConsumer implements RunningConsumer {
  readonly stats = { batches: 0, messages: 0, givenBack: 0 };
  private stopping = false;
  private loop: Promise<void> | undefined;
  private pauseMs = 0;

  constructor(
    private readonly backend: MemoryBackend,
    private readonly driver: ConsumerDriver<MemoryDelivery>,
    private readonly options: { batchSize: number; backoffMs: number },
  ) {}

  backOff(): void {
    this.stats.givenBack++;
    this.pauseMs = Math.min(1_000, this.pauseMs ? this.pauseMs * 2 : this.options.backoffMs);
  }

  start(): void {
    this.loop = (async () => {
      while (!this.stopping) {
        const batch = this.backend.take(this.options.batchSize);
        if (batch.length === 0) {
          await this.backend.waitForWork(100);
          continue;
        }
        this.stats.batches++;
        this.stats.messages += batch.length;
        const given = this.stats.givenBack;
        await this.driver
          .deliver(batch.map((stored) => ({ stored, message: inbound(stored) })))
          .catch(() => {});
        if (this.stats.givenBack === given) this.pauseMs = 0;
        else await new Promise((r) => setTimeout(r, this.pauseMs));
      }
    })();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await this.loop;
  }
}

/** The in-memory backend. */
export function memoryBackend(config: MemoryBackendConfig = {}): MemoryBackend {
  return new MemoryBackend(config);
}

/** What `MemoryBackendConfig` must hold (the base settings are accepted and unused but `consumer`). */
const configSchema = backendBaseSchema.partial().extend({
  streams: z.array(z.string().min(1)).min(1).optional(),
  batchSize: z.number().int().positive().optional(),
  giveBackBackoffMs: z.number().int().nonnegative().optional(),
  redriveLimit: z.number().int().nonnegative().optional(),
});

/** The in-memory backend as a module: the reference implementation, no I/O, one process. */
export const memoryModule: TransportModule<MemoryBackendConfig, MemoryBackend> = {
  name: 'memory',
  description: 'in-memory reference backend: no broker, one process (tests and the contract suite)',
  capabilities: CAPABILITIES,
  configSchema,
  fromEnv: (_env, base) => ({
    consumer: base.consumer,
    topology: base.topology,
    ...(base.retention.redriveLimit !== undefined
      ? { redriveLimit: base.retention.redriveLimit }
      : {}),
  }),
  create: memoryBackend,
};
