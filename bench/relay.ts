import amqp from 'amqplib';
import type { Env } from '../shared/config/env.js';
import { type Envelope, encodeEnvelope } from '../shared/envelope/envelope.js';
import { RABBITMQ_NAMES } from '../shared/pipeline/names.js';
import { SCHEMA_VERSION_HEADER } from '../shared/transport/rabbitmq/constants.js';
import {
  BENCH_BACKEND,
  insertOutbox,
  orderEvents,
  orderQueuesPurger,
  timedDrain,
  withBenchEnvironment,
} from './environment.js';
import { progress } from './progress.js';
import { type BenchFigure, figure, median } from './report.js';

export interface RelayBenchOptions {
  messages: number;
  runs: number;
  batchSize: number;
  concurrency: number;
  window: number;
}

/**
 * Raw baseline: amqplib on a confirm channel, publishing the same messages with the same
 * properties to the same exchange and queues, `window` confirms outstanding, no database.
 */
async function rawPublish(amqpUrl: string, envelopes: Envelope[], window: number): Promise<number> {
  const conn = await amqp.connect(amqpUrl);
  const ch = await conn.createConfirmChannel();
  const started = performance.now();
  let inFlight = 0;
  let wake: (() => void) | undefined;
  let failed = 0;
  const done = () => {
    inFlight--;
    const w = wake;
    wake = undefined;
    w?.();
  };
  for (const e of envelopes) {
    while (inFlight >= window) await new Promise<void>((r) => (wake = r));
    inFlight++;
    ch.publish(
      RABBITMQ_NAMES.ordersExchange,
      e.type,
      encodeEnvelope(e),
      {
        persistent: true,
        mandatory: true,
        contentType: 'application/json',
        messageId: e.id,
        type: e.type,
        correlationId: e.correlation_id,
        headers: { [SCHEMA_VERSION_HEADER]: e.schema_version },
      },
      (err: unknown) => {
        if (err) failed++;
        done();
      },
    );
  }
  await ch.waitForConfirms();
  const seconds = (performance.now() - started) / 1000;
  await conn.close();
  if (failed) throw new Error(`raw publish: ${failed} messages failed`);
  return envelopes.length / seconds;
}

export async function benchRelayRabbit(
  env: Env,
  o: RelayBenchOptions,
): Promise<Record<string, BenchFigure>> {
  return withBenchEnvironment(
    env,
    'relay',
    async (scratch) => {
      const db = scratch.database.db;
      const amqpUrl = scratch.vhost?.amqpUrl as string;
      const purge = await orderQueuesPurger(scratch);
      const raw: number[] = [];
      const relay: number[] = [];
      for (let run = 1; run <= o.runs; run++) {
        const envelopes = orderEvents(o.messages, 100);
        await purge();
        raw.push(await rawPublish(amqpUrl, envelopes, o.window));
        await purge();
        await db.query('TRUNCATE outbox');
        await insertOutbox(db, envelopes);
        await db.query('VACUUM ANALYZE outbox');
        const backend = scratch.backend('rabbitmq', BENCH_BACKEND, {
          connectionName: 'bench-relay',
          publish: { window: o.window },
        });
        const publisher = backend.publisher('outbox');
        await publisher.ready();
        relay.push(await timedDrain(db, publisher, o, envelopes.length));
        await backend.close();
        progress(
          `  run ${run}/${o.runs}: raw publish ${Math.round(raw.at(-1) as number)} msg/s, relay ${Math.round(relay.at(-1) as number)} events/s`,
        );
      }
      await purge();
      return {
        'relay.rabbitmq': figure(Math.round(median(relay)), 'events/s', Math.round(median(raw)), {
          baselineName: 'raw amqplib confirm-channel publish, same messages, same window',
          goal: 0.5,
          messages: o.messages,
          runs: o.runs,
          batchSize: o.batchSize,
          concurrency: o.concurrency,
          window: o.window,
          samples: { relay: relay.map(Math.round), baseline: raw.map(Math.round) },
        }),
      };
    },
    { poolSize: o.concurrency + 2 },
  );
}
