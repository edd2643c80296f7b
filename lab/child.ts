import type { ConsumerSettings } from '../devkit/consumers.js';
import { startConsumer } from '../devkit/consumers.js';
import type { RetryBudget } from '../shared/config/budget.js';
import { Journal } from '../shared/consumer/journal.js';
import { PgDatabase } from '../shared/db/pg/PgDatabase.js';
import { INVENTORY_PARK_NOTICES } from '../shared/inventory/quarantine.js';
import { ReserveInventory } from '../shared/inventory/ReserveInventory.js';
import { createLogger } from '../shared/logger.js';
import { OutboxRelay, type OutboxRelayOptions } from '../shared/outbox/OutboxRelay.js';
import { backendFromConfig, type TransportName } from '../shared/transport/index.js';

/**
 * A lab run's consumer or relay as a process of its own (`node --import tsx lab/child.ts`), so
 * that a scenario can SIGKILL it, SIGSTOP it past its lease and SIGCONT it: the crashes of real
 * processes, not in-process throws. The same code as the in-process rig (devkit's consumer
 * emulation around `ReserveInventory`; `OutboxRelay`), on the run's database, virtual host or
 * queue prefix, with the rig's settings (`LAB_CHILD`, JSON: {@link LabChildSpec}). It writes one
 * JSON line per event on stdout: the journal (`message: "journal"`, as the functions log it),
 * `ready`, failed invocations and relay rounds; the rig reads them (lab/rigs/processes.ts).
 */
export interface LabChildSpec {
  role: 'consumer' | 'relay';
  transport: TransportName;
  databaseUrl: string;
  /** The backend's configuration, as the rig built its own (no logger). */
  backend: Record<string, unknown> & { budget: RetryBudget };
  consumer?: Omit<ConsumerSettings, 'journal' | 'logger' | 'onInvocationError'>;
  relay?: Omit<OutboxRelayOptions, 'table'>;
}

const line = (o: Record<string, unknown>) => process.stdout.write(`${JSON.stringify(o)}\n`);
const event = (name: string, fields: Record<string, unknown> = {}) =>
  line({ message: 'lab-child', event: name, pid: process.pid, ...fields });

const spec = JSON.parse(process.env.LAB_CHILD ?? 'null') as LabChildSpec | null;
if (!spec) {
  console.error('lab/child.ts: LAB_CHILD (JSON) is not set');
  process.exit(2);
}
const logger = createLogger(`lab-${spec.role}`);
// the transport's schema checks the configuration
const backend = backendFromConfig(spec.transport, { ...spec.backend, logger });
const db = new PgDatabase({
  connectionString: spec.databaseUrl,
  max: 4,
  applicationName: `lab-${spec.role}`,
});
const stops: (() => Promise<unknown>)[] = [];

if (spec.role === 'consumer') {
  const journal = new Journal();
  journal.addSink((entry) => line({ message: 'journal', journal: entry }));
  const useCase = new ReserveInventory({ db, journal, logger }, { budget: spec.backend.budget });
  const consumer = await startConsumer(backend, (m) => useCase.process(m), {
    notices: INVENTORY_PARK_NOTICES,
    ...spec.consumer,
    journal,
    logger,
    onInvocationError: (err) => event('invocation-failed', { error: err.message }),
  });
  stops.push(() => consumer.stop());
} else {
  const relay = new OutboxRelay(
    { db, publisher: backend.publisher('outbox'), logger },
    { table: 'outbox', batchSize: 100, maxAttempts: 10, ...spec.relay },
  );
  const abort = new AbortController();
  const draining = (async () => {
    while (!abort.signal.aborted) {
      try {
        const round = await relay.runOnce();
        if (round.claimed > 0 || round.published > 0) event('round', { ...round });
        if (round.claimed === 0) await new Promise((r) => setTimeout(r, 25));
      } catch (err) {
        event('round-failed', { error: (err as Error).message });
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  })();
  stops.push(async () => {
    abort.abort();
    await draining;
  });
}
event('ready', { role: spec.role });

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => {
    void (async () => {
      for (const stop of stops.reverse()) await stop().catch(() => {});
      await backend.close().catch(() => {});
      await db.close().catch(() => {});
      process.exit(0);
    })();
  });
}
