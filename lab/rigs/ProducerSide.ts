import { startHttpApi } from '../../devkit/emulators/httpApi.js';
import { publishRaw, type RawMessage } from '../../devkit/rawMessages.js';
import { createPlaceOrderHandler } from '../../functions/place-order/handler.js';
import type { Envelope } from '../../shared/envelope/envelope.js';
import { OrderService } from '../../shared/orders/OrderService.js';
import { type DrainResult, OutboxRelay } from '../../shared/outbox/OutboxRelay.js';
import { OutboxStore } from '../../shared/outbox/OutboxStore.js';
import type { Publisher } from '../../shared/port/types.js';
import { log } from './log.js';
import type { Rig } from './rig.js';
import { RELAY_OPTIONS } from './types.js';

/** The producer side of a run: the orders API, the outbox, the relay and the publisher. */
export class ProducerSide {
  /**
   * Copies the broker dropped as duplicates of a message it held (its deduplication window), by
   * event id: they never reach the consumer, so nobody waits for them.
   */
  readonly droppedCopies = new Map<string, number>();
  private apiUrl: string | undefined;

  constructor(private readonly rig: Rig) {}

  /**
   * The orders HTTP API (place-order handler behind the local API Gateway emulation; from the
   * bundles, the place-order bundle behind the template's routes).
   */
  private async api(): Promise<string> {
    if (this.apiUrl) return this.apiUrl;
    const { pipeline } = this.rig;
    if (pipeline) {
      // as deployed: the place-order bundle behind its routes, kicking the relay after COMMIT
      this.apiUrl = (await pipeline.deployment.startHttpApi()).url;
      return this.apiUrl;
    }
    const api = await startHttpApi(
      createPlaceOrderHandler({
        orders: new OrderService({ db: this.rig.ordersDb }),
        logger: log(),
      }),
      { port: 0 },
    );
    this.rig.onClose(() => api.close());
    this.apiUrl = api.url;
    return api.url;
  }

  private async post(path: string, body?: unknown): Promise<Record<string, unknown>> {
    const res = await fetch(`${await this.api()}${path}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-correlation-id': `lab-${this.rig.scratch.name}`,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = (await res.json()) as Record<string, unknown>;
    if (res.status >= 300) throw new Error(`POST ${path} → ${res.status} ${JSON.stringify(json)}`);
    return json;
  }

  /** `POST /orders`: the order row and its outbox row in one COMMIT. */
  async placeOrder(sku: string, quantity: number): Promise<{ orderId: string; eventId: string }> {
    const r = await this.post('/orders', { sku, quantity });
    const placed = { orderId: r.orderId as string, eventId: r.eventId as string };
    this.rig.run.accept({
      id: placed.eventId,
      type: 'order.created',
      aggregate: { type: 'order', id: placed.orderId, version: 1 },
    });
    return placed;
  }

  /** `POST /orders/{id}/cancel`: `order.cancelled`, version 2. */
  async cancelOrder(orderId: string): Promise<{ eventId: string }> {
    const r = await this.post(`/orders/${orderId}/cancel`);
    if (typeof r.eventId === 'string')
      this.rig.run.accept({
        id: r.eventId as string,
        type: 'order.cancelled',
        aggregate: { type: 'order', id: orderId, version: 2 },
      });
    return { eventId: r.eventId as string };
  }

  /** The unpublished envelopes in the outbox (oldest first), as the relay will publish them. */
  outboxEnvelopes(): Promise<Envelope[]> {
    return this.rig.ordersDb.transaction(async (tx) =>
      (await new OutboxStore('outbox').claim(tx, 100_000)).map((r) => r.envelope),
    );
  }

  async unpublished(): Promise<number> {
    const { rows } = await this.rig.ordersDb.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM outbox WHERE published_at IS NULL',
    );
    return rows[0]?.n ?? 0;
  }

  /** The outbox relay on this transport (small row backoff, so a fixed route is seen quickly). */
  relay(publisher: Publisher = this.publisher()): OutboxRelay {
    return new OutboxRelay(
      { db: this.rig.ordersDb, publisher, logger: log() },
      { table: 'outbox', ...RELAY_OPTIONS },
    );
  }

  /** Runs the relay until the outbox is empty (from the bundles: waits for the scheduled one). */
  async drainOutbox(publisher?: Publisher): Promise<void> {
    const drained = async () => {
      await this.rig.run.waitFor(async () => (await this.unpublished()) === 0, 'outbox drained');
    };
    if (this.rig.pipeline) return drained();
    const loop = this.relayLoop(this.relay(publisher));
    try {
      await drained();
    } finally {
      await loop.stop();
    }
  }

  /**
   * Runs `relay` without pause (rounds 25 ms apart when idle) for at most `budgetMs` (default the
   * run's wait budget), until `stop`, which resolves with what it did once the round in flight ends.
   */
  relayLoop(
    relay: OutboxRelay = this.relay(),
    budgetMs = this.rig.settings.waitMs,
  ): { stop(): Promise<DrainResult> } {
    const abort = new AbortController();
    const draining = relay.drain({ budgetMs, idleWaitMs: 25, signal: abort.signal });
    return {
      stop: () => {
        abort.abort();
        return draining;
      },
    };
  }

  /** The publisher the relay uses: order events to the consumer's queue (dropped copies counted). */
  publisher(): Publisher {
    if (this.rig.peer) return this.rig.peer.publisher();
    const publisher = this.rig.backend.publisher('outbox');
    return {
      publish: async (envelopes) => {
        const outcomes = await publisher.publish(envelopes);
        for (const o of outcomes) {
          if (o.ok && o.duplicate)
            this.droppedCopies.set(o.id, (this.droppedCopies.get(o.id) ?? 0) + 1);
        }
        return outcomes;
      },
      ready: (timeoutMs) => publisher.ready(timeoutMs),
      close: () => publisher.close(),
      ...(publisher.takeRouteLosses
        ? { takeRouteLosses: () => publisher.takeRouteLosses?.() ?? [] }
        : {}),
      ...(publisher.returnRouteLosses
        ? { returnRouteLosses: (losses) => publisher.returnRouteLosses?.(losses) }
        : {}),
    };
  }

  /** Publishes envelopes as the relay does (confirmed); throws if one is not confirmed. */
  async publish(...envelopes: Envelope[]): Promise<void> {
    for (const e of envelopes) if (!this.rig.run.accepted.has(e.id)) this.rig.run.accept(e);
    const outcomes = await this.publisher().publish(envelopes);
    const failed = outcomes.find((o) => !o.ok);
    if (failed && !failed.ok) throw new Error(`publish failed: ${failed.reason} ${failed.error}`);
  }

  /** Puts messages on the transport as they are (poison messages). */
  publishRaw(messages: RawMessage[]): Promise<void> {
    if (this.rig.peer) return this.rig.peer.send(messages);
    return publishRaw(this.rig.backend, messages);
  }
}
