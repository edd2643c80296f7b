import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { runSoak, type SoakTransportName } from '../../soak/soak.js';
import { summary } from '../../soak/summary.js';
import { DEV_TEMPLATES_TIMEOUT_MS, devTemplates } from '../helpers/child.js';
import { AMQP_URL, DATABASE_URL, RABBITMQ_MANAGEMENT_URL } from '../helpers/services.js';

/**
 * The chaos soak (`npm run soak`), tiny: 200 orders per transport while the relay, the consumer
 * and the API are SIGKILLed, database connections terminated and the broker taken down; on
 * RabbitMQ also with the reserve function behind the Amazon MQ trigger emulation, whose database
 * sessions are terminated mid-batch. On
 * RabbitMQ the outage is a TCP proxy cut, never `rabbitmqctl stop_app`: the broker is shared with
 * every other test file running in parallel. On SQS the soak's own fauxqs server (persistent
 * state) is killed and restarted. Once more on RabbitMQ with every role through one Data API
 * endpoint the soak hosts, whose cluster pauses and resumes while orders flow and in a quiet spell.
 * Own database, virtual host and server; it waits on conditions.
 */
describe('chaos soak, smoke size', () => {
  const logDir = mkdtempSync(join(tmpdir(), 'rm-soak-smoke-'));
  afterAll(() => rmSync(logDir, { recursive: true, force: true }));
  // its roles are `npm run dev` processes, which read their settings from the templates
  beforeAll(() => devTemplates('rabbitmq', 'sqs'), DEV_TEMPLATES_TIMEOUT_MS);

  const services = {
    databaseUrl: DATABASE_URL,
    amqpUrl: AMQP_URL,
    managementUrl: RABBITMQ_MANAGEMENT_URL,
  };

  // two lanes side by side (the Data API run takes about as long as the other three), each in order
  const lanes: (readonly [SoakTransportName, string, string, 'pg' | 'data-api'])[][] = [
    [
      ['rabbitmq', 'worker', 'broker-outage:rabbitmq-proxy', 'pg'],
      ['rabbitmq', 'amazonmq', 'broker-outage:rabbitmq-proxy', 'pg'],
      ['sqs', 'trigger', 'broker-outage:sqs-server-restart', 'pg'],
    ],
    [['rabbitmq', 'worker', 'broker-outage:rabbitmq-proxy', 'data-api']],
  ];
  for (const [lane, runs] of lanes.entries())
    describe(`lane ${lane + 1}`, { concurrent: true }, () => {
      it.each(runs)(
        '%s (%s, %s, database through %s): 200 orders under faults → every order decided or parked, nothing twice, stock exact, outbox published',
        { concurrent: false, timeout: 180_000 },
        async (transport, consumer, outage, db) => {
          const lines: string[] = [];
          // a run that times out says how far it got
          onTestFailed(() => console.error(`soak progress:\n${lines.join('\n')}`));
          const report = await runSoak({
            transport,
            ...(consumer === 'amazonmq' ? { consumer } : {}),
            // through one Data API endpoint whose cluster pauses twice while orders flow and once in
            // a quiet spell; a resume takes 2 s (AWS: up to 15)
            ...(db === 'data-api' ? { db, dbPauses: 2, resumeMs: 2_000 } : {}),
            orders: 200,
            poison: 2,
            durationMs: 10_000,
            seed: 20_261_129,
            brokerFault: 'proxy',
            brokerOutages: 1,
            badRows: 2,
            faultGapMs: [800, 2_000],
            drainTimeoutMs: 60_000,
            clients: 4,
            services,
            logDir,
            keep: false,
            progress: (line) => lines.push(line),
          });
          const text = `${summary(report)}\n${lines.join('\n')}`;
          expect(report.violations, text).toEqual([]);
          expect(report.ok).toBe(true);
          expect(report.outcomes.undecided, text).toBe(0);
          expect(report.outcomes.parked.poison).toBe(2);
          expect(
            report.outcomes.reserved +
              report.outcomes.rejected.out_of_stock +
              report.outcomes.rejected.unknown_sku +
              report.outcomes.parked.valid,
          ).toBe(198);
          expect(report.duplicates.doubleEffects).toBe(0);
          expect(report.faults[outage], text).toBe(1);
          // the bad outbox rows written among the orders: set aside with their reason, the rest flowed
          expect(report.faults['bad-outbox-row'], text).toBe(2);
          expect(report.outbox, text).toMatchObject({ badRows: 2, setAside: 2 });
          if (transport === 'sqs') {
            // the SQS fault layer: each behaviour armed once over the fault phase, some acted
            for (const kind of [
              'sqs-duplicate',
              'sqs-reorder',
              'sqs-partial-batch',
              'sqs-throttle',
              'sqs-lose-delete-response',
              'sqs-stale-receipt',
            ]) {
              expect(report.faults[kind], `${kind}\n${text}`).toBe(1);
            }
            const acted = Object.entries(report.faults)
              .filter(([k]) => k.startsWith('sqs-layer-acted:'))
              .reduce((a, [, n]) => a + n, 0);
            expect(acted, text).toBeGreaterThan(0);
          }
          const injected = Object.entries(report.faults)
            .filter(
              ([k]) => !['db-connections-terminated', 'db-resumes', 'db-calls-refused'].includes(k),
            )
            .reduce((a, [, n]) => a + n, 0);
          expect(injected, text).toBeGreaterThanOrEqual(4);
          if (db === 'data-api') {
            // the cluster paused while orders flowed and in the quiet spell, and resumed: calls were
            // refused meanwhile (the API's answered 503 and retried, the other roles waited)
            expect(report.faults['db-pause'], text).toBeGreaterThanOrEqual(1);
            expect(report.faults['db-pause:quiet'], text).toBe(1);
            expect(report.faults['db-resumes'], text).toBeGreaterThanOrEqual(2);
            expect(report.faults['db-calls-refused'], text).toBeGreaterThan(0);
            expect(report.settings.db).toBe('data-api');
          }
          if (consumer === 'amazonmq') {
            // the consumer's database sessions were terminated while the trigger emulation consumed
            expect(report.faults['db-terminate-consumer'], text).toBe(3);
            // …at least one of them inside a batch's transaction (the fault the ladder answers)
            expect(
              report.faults['db-terminate-consumer:mid-transaction'],
              text,
            ).toBeGreaterThanOrEqual(1);
            expect(report.settings.consumer).toBe('Amazon MQ trigger emulation');
          }
        },
      );
    });
});
