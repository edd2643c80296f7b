import { randomUUID } from 'node:crypto';
import { parentPort, workerData } from 'node:worker_threads';
import { TEST_RETRY_BUDGET } from '../shared/config/budget.js';
import { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import { encodeEnvelope, newEnvelope } from '../shared/envelope/envelope.js';
import { ReserveInventory } from '../shared/inventory/ReserveInventory.js';
import type { InboundMessage } from '../shared/port/types.js';

/**
 * The reserve side of the `pinned-xmin` phase (bench/pinnedHorizon.ts), in a thread of its own as
 * the consumer is a process of its own when deployed: the relay's rounds (500 envelopes parsed,
 * encoded and published at a time) would otherwise hold up every await of the reserve calls.
 * One `ReserveInventory.process` call of one message at a time, in a closed loop, on its own pool.
 */
export interface ReserveWorkerData {
  databaseUrl: string;
  skus: number;
}

export type ReserveCommand =
  | { type: 'run'; startedAt: number; endAt: number }
  | { type: 'stop' }
  | { type: 'probe'; calls: number }
  | { type: 'close' };

export interface ReserveRun {
  type: 'ran';
  /** Calls acknowledged within the window [startedAt, endAt] (epoch ms). */
  reserves: number;
  callMs: number[];
  errors: number;
}

export type ReserveReply = ReserveRun | { type: 'probed'; callMs: number[] } | { type: 'closed' };

const { databaseUrl, skus } = workerData as ReserveWorkerData;
const db = new PgDatabase({
  connectionString: databaseUrl,
  max: 2,
  applicationName: 'bench-reserve',
});
const useCase = new ReserveInventory({ db }, { budget: TEST_RETRY_BUDGET });
const port = parentPort;
if (!port) throw new Error('bench/pinnedReserveWorker.ts runs as a worker thread');

let n = 0;
function message(): InboundMessage {
  const orderId = randomUUID();
  const e = newEnvelope({
    type: 'order.created',
    aggregate: { type: 'order', id: orderId, version: 1 },
    data: { orderId, sku: `SKU-${n++ % skus}`, quantity: 1 },
    correlationId: orderId,
    producer: 'order-service',
  });
  return { messageId: e.id, type: e.type, body: encodeEnvelope(e), attempt: 0, redelivered: false };
}

/** One call; its duration (ms), or undefined when it was not acknowledged. */
async function call(): Promise<number | undefined> {
  const m = message();
  const started = performance.now();
  const [outcome] = await useCase.process([m]);
  return outcome?.kind === 'ack' ? performance.now() - started : undefined;
}

let stopping = false;
let running: Promise<ReserveRun> | undefined;

async function run(c: Extract<ReserveCommand, { type: 'run' }>): Promise<ReserveRun> {
  const out: ReserveRun = {
    type: 'ran',
    reserves: 0,
    callMs: [],
    errors: 0,
  };
  while (!stopping) {
    const ms = await call().catch(() => undefined);
    const at = Date.now();
    if (ms === undefined) {
      out.errors++;
      continue;
    }
    if (at < c.startedAt || at > c.endAt) continue;
    out.reserves++;
    out.callMs.push(ms);
  }
  return out;
}

port.on('message', async (c: ReserveCommand) => {
  const reply = (r: ReserveReply) => port.postMessage(r);
  if (c.type === 'run') {
    stopping = false;
    running = run(c);
  } else if (c.type === 'stop') {
    stopping = true;
    const r = await running;
    running = undefined;
    if (r) reply(r);
  } else if (c.type === 'probe') {
    const callMs: number[] = [];
    for (let i = 0; i < c.calls; i++) {
      const ms = await call();
      if (ms !== undefined) callMs.push(ms);
    }
    reply({ type: 'probed', callMs });
  } else if (c.type === 'close') {
    await db.close();
    reply({ type: 'closed' });
  }
});
