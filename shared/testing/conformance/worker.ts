import { setTimeout as sleep } from 'node:timers/promises';
import { PgDatabase } from '../../db/pg/PgDatabase.js';
import { backendFromConfig, isTransportName } from '../../transport/index.js';
import type { WorkerLine, WorkerSpec } from './process.js';
import { instrument, journalInto, type Recorder } from './recorder.js';
import { loadSubject } from './subject.js';
import { KIT_TRANSPORTS, startConsumer } from './transports.js';

/**
 * A consumer of the conformance kit in a process of its own (the `killed-process` scenario): the
 * subject's handler on the scenario's database and broker namespace, every observation written to
 * stdout as one JSON line. SIGTERM stops it gracefully; the scenario SIGKILLs it.
 */
const write = (line: WorkerLine) => process.stdout.write(`${JSON.stringify(line)}\n`);

async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2] ?? '{}') as WorkerSpec;
  if (!isTransportName(spec.transport)) throw new Error(`unknown transport "${spec.transport}"`);
  const recorder: Recorder = {
    record: (o) =>
      write({ observation: { ...o, at: o.at ?? Date.now(), process: o.process ?? spec.label } }),
  };
  const subject = await loadSubject(spec.subject);
  const db = new PgDatabase({ connectionString: spec.databaseUrl, max: 2 });
  const backend = backendFromConfig(spec.transport, spec.config);
  const pause = spec.pauseAfterHandlerMs;
  const handler = instrument(subject.handler({ db, budget: spec.budget }), {
    recorder,
    afterHandler: pause > 0 ? () => sleep(pause).then(() => {}) : undefined,
  });
  const consumer = await startConsumer(backend, KIT_TRANSPORTS[spec.transport], handler, {
    journal: journalInto(recorder, spec.label),
    maxBatch: spec.maxBatch,
  });
  process.once('SIGTERM', () => {
    void (async () => {
      await consumer.stop().catch(() => {});
      await backend.close().catch(() => {});
      await db.close().catch(() => {});
      process.exit(0);
    })();
  });
  write({ ready: true });
}

main().catch((err: unknown) => {
  write({ error: err instanceof Error ? err.message : String(err) });
  process.exit(1);
});
