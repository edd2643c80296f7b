import { describe, expect, it } from 'vitest';
import {
  AT_REST_CONFIGURATIONS,
  type AtRestUsage,
  emfSeries,
  type InvocationAtRest,
  monthAtRest,
  type TemplateCounts,
} from '../../bench/atRest.js';

/** The month at rest's arithmetic (bench/atRest.ts) on given counts and usage. */
const counts: TemplateCounts = {
  secrets: 6,
  kmsKeys: 1,
  alarms: 2,
  alarmMetrics: 2,
  highResolutionAlarms: 0,
  natGateways: 0,
  elasticIps: 0,
  brokers: [],
  flowLogs: [],
  aurora: [{ backupRetentionDays: 14, minAcu: 0, secondsUntilAutoPause: 300 }],
  sqsEventSourceMappings: 0,
  relay: { tickRateMs: 60_000, sweepIntervalMs: 3_600_000, memoryMb: 1024, inVpc: false },
  maintenance: { rateMs: 86_400_000, memoryMb: 1024 },
};
const run = (over: Partial<InvocationAtRest>): InvocationAtRest => ({
  measured: 1,
  billedMs: 0,
  calls: {},
  sqsUnits: 0,
  natBytes: 0,
  logBytes: 0,
  series: [],
  ...over,
});
const usage: AtRestUsage = {
  transport: 'sqs',
  measuredAt: '2026-12-04T00:00:00.000Z',
  sweep: run({ billedMs: 1_000, calls: { 'rds-data:Execute': 10 }, series: ['a', 'b'] }),
  tick: run({ billedMs: 100, calls: { 'ssm:GetParameter': 1 }, series: ['a'] }),
  maintenance: run({ billedMs: 2_000, calls: { 'rds-data:Execute': 3 }, series: ['c'] }),
};
const month = monthAtRest(AT_REST_CONFIGURATIONS[0], counts, usage);
const line = (item: string) => month.lines.find((l) => l.item.startsWith(item));

describe('a month at rest, computed', () => {
  it('bills a metric series for the hours it is sent in: every hour, the sweep’s 60 hours in 61, maintenance’s 1 in 24', () => {
    expect(line('Custom metrics')?.count).toBeCloseTo(1 + 60 / 61 + 1 / 24, 9);
    expect(line('Custom metrics')?.usdPerMonth).toBeCloseTo((1 + 60 / 61 + 1 / 24) * 0.3, 9);
  });

  it('multiplies each run by its schedule: a tick a minute, a sweep every 61 min, maintenance daily', () => {
    const minutes = 730 * 60;
    const sweeps = minutes / 61;
    const days = 730 / 24;
    expect(line('Lambda requests')?.count).toBeCloseTo(minutes + days, 6);
    expect(line('RDS Data API requests')?.count).toBeCloseTo(sweeps * 10 + days * 3, 6);
    expect(line('Lambda GB-seconds')?.count).toBeCloseTo(
      (minutes - sweeps) * 0.1 + sweeps * 1 + days * 2,
      6,
    );
  });

  it('estimates Aurora awake at 0.5 ACU for each wake: the resume, the run, and the pause delay', () => {
    const wake = (runSeconds: number) => (0.5 * (15 + runSeconds + 300)) / 3600;
    const aurora = line('Aurora compute');
    expect(aurora?.basis).toBe('estimate');
    expect(aurora?.count).toBeCloseTo(((730 * 60) / 61) * wake(1) + (730 / 24) * wake(2), 6);
  });

  it('keeps what it cannot price unpriced, and 0 as 0', () => {
    expect(line('Aurora I/O')?.usdPerMonth).toBeNull();
    expect(month.unpriced).toContain('Aurora I/O at rest');
    expect(line('Aurora backups')?.usdPerMonth).toBe(0);
  });

  it('reads the metric series of EMF lines: each metric of each dimension set with its values', () => {
    const emf = JSON.stringify({
      _aws: {
        Timestamp: 0,
        CloudWatchMetrics: [
          {
            Namespace: 'N',
            Dimensions: [['service', 'Outbox']],
            Metrics: [{ Name: 'RelayHeartbeat' }, { Name: 'RelayRoundErrors' }],
          },
        ],
      },
      service: 'outbox-relay',
      Outbox: 'outbox',
      RelayHeartbeat: 1,
      RelayRoundErrors: 0,
    });
    expect(emfSeries([emf, emf, '{"level":"INFO","message":"relay invocation done"}'])).toEqual([
      'N RelayHeartbeat {service=outbox-relay,Outbox=outbox}',
      'N RelayRoundErrors {service=outbox-relay,Outbox=outbox}',
    ]);
  });
});
