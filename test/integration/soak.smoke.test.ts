import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runSoak } from '../../soak/soak.js';
import { summary } from '../../soak/summary.js';
import { AMQP_URL, DATABASE_URL, RABBITMQ_MANAGEMENT_URL } from '../helpers/services.js';

/**
 * The chaos soak (`npm run soak`), tiny: 200 orders per transport while the relay, the consumer
 * and the API are SIGKILLed, database connections terminated and the broker taken down. On
 * RabbitMQ the outage is a TCP proxy cut, never `rabbitmqctl stop_app`: the broker is shared with
 * every other test file running in parallel. On SQS the soak's own fauxqs server (persistent
 * state) is killed and restarted. Own database, virtual host and server; it waits on conditions.
 */
describe('chaos soak, smoke size', () => {
  const logDir = mkdtempSync(join(tmpdir(), 'rm-soak-smoke-'));
  afterAll(() => rmSync(logDir, { recursive: true, force: true }));

  const services = {
    databaseUrl: DATABASE_URL,
    amqpUrl: AMQP_URL,
    managementUrl: RABBITMQ_MANAGEMENT_URL,
  };

  it.each([
    ['rabbitmq', 'broker-outage:rabbitmq-proxy'],
    ['sqs', 'broker-outage:sqs-server-restart'],
  ] as const)(
    '%s: 200 orders under faults → every order decided or parked, nothing twice, stock exact, outbox published',
    async (transport, outage) => {
      const lines: string[] = [];
      const report = await runSoak({
        transport,
        orders: 200,
        poison: 2,
        durationMs: 10_000,
        seed: 20_261_129,
        brokerFault: 'proxy',
        brokerOutages: 1,
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
      const injected = Object.entries(report.faults)
        .filter(([k]) => k !== 'db-connections-terminated')
        .reduce((a, [, n]) => a + n, 0);
      expect(injected, text).toBeGreaterThanOrEqual(4);
    },
    120_000,
  );
});
