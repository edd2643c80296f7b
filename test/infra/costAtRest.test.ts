import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  AT_REST_CONFIGURATIONS,
  type AtRestMonth,
  atRestRow,
  countsOf,
  HOURS_PER_MONTH,
  monthAtRest,
} from '../../bench/atRest.js';
import { PRICES } from '../../bench/prices.js';
import { BROKER_PRESETS } from '../../infra/config.js';
import { DB_SIDES } from '../../shared/pipeline/appRole.js';

/**
 * The month at rest (bench/atRest.ts) counts what the synthesized templates bill for, and
 * docs/performance.md shows those counts: a new secret, key, alarm, NAT gateway or broker changes
 * the figure, and this test fails until the table is written again
 * (`npm run bench -- --suite cost-at-rest`).
 */
let months: AtRestMonth[] = [];
const byId = (id: AtRestMonth['configuration']) =>
  months.find((m) => m.configuration === id) as AtRestMonth;
const line = (m: AtRestMonth, item: string) => m.lines.find((l) => l.item === item);

beforeAll(async () => {
  months = [];
  for (const c of AT_REST_CONFIGURATIONS) months.push(monthAtRest(c, await countsOf(c)));
}, 180_000);

describe('a month at rest, counted from the templates', () => {
  it('counts every secret: the master and one login per side; the broker’s two users on RabbitMQ', () => {
    const data = 1 + DB_SIDES.length;
    expect(byId('sqs').counts.secrets).toBe(data);
    expect(byId('rabbitmq').counts.secrets).toBe(data + 2);
    expect(byId('rabbitmq-production').counts.secrets).toBe(data + 2);
    expect(line(byId('rabbitmq'), 'Secrets Manager secrets')?.usdPerMonth).toBeCloseTo(
      (data + 2) * 0.4,
      6,
    );
  });

  it('counts the alarms by the metrics they evaluate (a metric-math alarm: the metrics it reads) and the alarm topic’s key', () => {
    for (const m of months) {
      // every alarm evaluates one metric (the new-arrivals alarms: DIFF over one depth)
      expect(m.counts.alarmMetrics).toBe(m.counts.alarms);
      expect(m.counts.alarms).toBeGreaterThan(20);
      expect(m.counts.highResolutionAlarms).toBe(0);
      expect(m.counts.kmsKeys).toBe(1);
    }
  });

  it('bills the broker by instance type and deployment mode, and the NAT gateway and its address on RabbitMQ only', () => {
    expect(byId('sqs').counts.brokers).toEqual([]);
    expect(byId('rabbitmq').counts.brokers).toEqual([
      {
        instanceType: BROKER_PRESETS.test.instanceType,
        deploymentMode: 'SINGLE_INSTANCE',
        instances: 1,
      },
    ]);
    expect(byId('rabbitmq-production').counts.brokers).toEqual([
      {
        instanceType: BROKER_PRESETS.production.instanceType,
        deploymentMode: 'CLUSTER_MULTI_AZ',
        instances: 3,
      },
    ]);
    const broker = line(byId('rabbitmq-production'), 'Amazon MQ broker instance-hours');
    expect(broker?.usdPerMonth).toBeCloseTo(
      3 * HOURS_PER_MONTH * (PRICES.amazonMqM7gLargeHour.usd as number),
      6,
    );
    for (const id of ['rabbitmq', 'rabbitmq-production'] as const) {
      expect(byId(id).counts.natGateways).toBe(1);
      expect(byId(id).counts.elasticIps).toBe(1);
    }
    expect(byId('sqs').counts.natGateways).toBe(0);
    expect(line(byId('sqs'), 'NAT gateway hours')?.usdPerMonth).toBe(0);
  });

  it('reads the schedules and Aurora’s settings the usage is multiplied by', () => {
    for (const m of months) {
      expect(m.counts.relay).toMatchObject({ tickRateMs: 60_000, sweepIntervalMs: 3_600_000 });
      expect(m.counts.maintenance.rateMs).toBe(86_400_000);
      expect(m.counts.aurora).toEqual([
        { backupRetentionDays: 14, minAcu: 0, secondsUntilAutoPause: 300 },
      ]);
    }
  });

  it('docs/performance.md shows the templates’ counts and dollars (re-run `npm run bench -- --suite cost-at-rest` when this fails)', () => {
    const doc = readFileSync('docs/performance.md', 'utf8');
    const section = doc.split('## What a deployment costs at rest')[1]?.split('\n## ')[0] ?? '';
    const rows = new Map(
      section
        .split('\n')
        .filter((l) => l.startsWith('| '))
        .map((l) => {
          const cells = l
            .slice(1, -1)
            .split('|')
            .map((c) => c.trim());
          return [cells[0], cells] as const;
        }),
    );
    const items = [
      ...new Set(
        months.flatMap((m) => m.lines.filter((l) => l.basis === 'template').map((l) => l.item)),
      ),
    ];
    expect(items.length).toBeGreaterThan(5);
    for (const item of items) expect(rows.get(item), item).toEqual(atRestRow(months, item));
  });
});
