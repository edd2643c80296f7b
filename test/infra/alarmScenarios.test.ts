import { beforeAll, describe, expect, it } from 'vitest';
import { evaluateAlarms, type MetricKey, type Scenario } from '../helpers/alarmEvaluator.js';
import { synthPipelines } from '../helpers/templates.js';

/**
 * The alarms of both templates, evaluated over scenarios of datapoints (test/helpers/
 * alarmEvaluator.ts): an incident raises the notifications that name it, normal traffic none.
 * Each scenario states a value (or none) for every metric an alarm watches: a new alarm on a new
 * metric fails here until a scenario says what that metric does.
 */
const MINUTES = 30;
/** The broker outage: minutes 10 to 19. */
const OUTAGE = { from: 10, to: 20 };

const times = (n: number, v: number) => Array.from({ length: n }, () => v);
const unknown = (metric: MetricKey): never => {
  throw new Error(`scenario: no value for ${JSON.stringify(metric)}`);
};

/** Ready messages of each RabbitMQ queue the relay reports (the retry delay queues: none). */
function brokerDepth(queue: string | undefined, busy: boolean): number {
  const depths: Record<string, number> = {
    'inventory.orders': busy ? 5 : 0,
    'inventory.orders.parking': 0,
    'audit.orders': 2_000,
    'orders.inventory-results': busy ? 3 : 0,
    'orders.inventory-results.parking': 0,
  };
  if (queue?.startsWith('inventory.orders.retry')) return 0;
  if (queue === undefined || !(queue in depths)) throw new Error(`scenario: queue ${queue}`);
  return depths[queue] as number;
}

/**
 * Orders flowing through the kick path: each producer container kicks the relay every second,
 * beyond its reserved concurrency when one is set (Lambda's `Throttles` and dropped asynchronous
 * events every period, on purpose); six relay runs a minute report, backlogs stay small.
 */
const traffic: Scenario = (metric) => {
  const { namespace, metricName, dimensions: d } = metric;
  const runs = 6;
  if (namespace === 'ReliableMessaging') {
    switch (metricName) {
      case 'RelayHeartbeat':
        return times(runs, 1);
      case 'RelayRoundErrors':
        return times(runs, 0);
      case 'OutboxBacklog':
        return [4, 2, 6, 1, 3, 0];
      case 'OutboxOldestUnpublishedAgeSeconds':
        return [1, 2, 1, 0, 1, 0];
      case 'OutboxNeedsAttention':
        return times(runs, 0);
      case 'QueueDepth':
      case 'QueueReady':
        return [brokerDepth(d.Queue, true)];
      case 'RouteMissing':
      case 'HeldForDeadLettering':
        return [0];
      case 'QueueMetricsAvailable':
        return times(runs, 1);
      case 'ParkRefused': // the consumers': every park taken
        return [0];
    }
  }
  if (namespace === 'AWS/Lambda') {
    const relay = d.FunctionName?.startsWith('outboxrelay') ?? false;
    switch (metricName) {
      case 'Errors':
        return [0];
      case 'Throttles':
      case 'AsyncEventsDropped':
        return [relay ? 40 : 0];
    }
  }
  if (namespace === 'AWS/SQS') {
    const queue = d.QueueName ?? '';
    const parking = /^(Results)?Parking/.test(queue);
    switch (metricName) {
      case 'ApproximateNumberOfMessagesVisible':
        return [parking ? 0 : 4];
      case 'ApproximateAgeOfOldestMessage':
        return [parking ? 0 : 2];
    }
  }
  return unknown(metric);
};

/**
 * A quiet RabbitMQ deployment whose broker cannot be reached for 10 minutes: the relay's ticks go
 * on (heartbeat every minute), their look at the broker fails (`QueueMetricsAvailable` 0, no
 * depths, no `RouteMissing`); nothing else runs.
 */
const brokerOutage: Scenario = (metric, minute) => {
  const { namespace, metricName, dimensions: d } = metric;
  const down = minute >= OUTAGE.from && minute < OUTAGE.to;
  if (namespace === 'ReliableMessaging') {
    switch (metricName) {
      case 'RelayHeartbeat':
        return [1];
      case 'RelayRoundErrors':
        return [0];
      case 'OutboxBacklog':
      case 'OutboxOldestUnpublishedAgeSeconds':
      case 'OutboxNeedsAttention':
        return undefined; // a tick leaves the database alone
      case 'QueueDepth':
      case 'QueueReady':
        return down ? undefined : [brokerDepth(d.Queue, false)];
      case 'RouteMissing':
      case 'HeldForDeadLettering':
        return down ? undefined : [0];
      case 'QueueMetricsAvailable':
        return [down ? 0 : 1];
      case 'ParkRefused': // no consumer runs
        return undefined;
    }
  }
  if (namespace === 'AWS/Lambda') {
    const relay = d.FunctionName?.startsWith('outboxrelay') ?? false;
    if (metricName === 'Errors' || metricName === 'Throttles') return relay ? [0] : undefined;
  }
  return unknown(metric);
};

/** Normal traffic, and one message parked at minute 10 (it stays). */
const parkedDuringTraffic: Scenario = (metric, minute) => {
  const { namespace, metricName, dimensions: d } = metric;
  const parked = minute >= 10 ? 1 : 0;
  if (
    namespace === 'AWS/SQS' &&
    metricName === 'ApproximateNumberOfMessagesVisible' &&
    /^Parking/.test(d.QueueName ?? '')
  ) {
    return [parked];
  }
  if (
    namespace === 'ReliableMessaging' &&
    (metricName === 'QueueDepth' || metricName === 'QueueReady') &&
    d.Queue === 'inventory.orders.parking'
  ) {
    return [parked];
  }
  return traffic(metric, minute);
};

/** Normal traffic until the relay stops at minute 10 (nothing of it reports any more). */
const relayStops: Scenario = (metric, minute) => {
  const fromRelay =
    metric.namespace === 'ReliableMessaging' ||
    (metric.namespace === 'AWS/Lambda' &&
      metric.dimensions.FunctionName?.startsWith('outboxrelay'));
  if (fromRelay && minute >= 10) return undefined;
  return traffic(metric, minute);
};

/** The alarm ids that notified, without CDK's `Alarms` prefix and hash suffix, sorted. */
const notified = (fired: Map<string, number[]>) =>
  [...fired.entries()]
    .map(
      ([id, minutes]) =>
        `${id.replace(/^Alarms/, '').replace(/[0-9A-F]{8}$/, '')} ×${minutes.length}`,
    )
    .sort();

let t: ReturnType<typeof synthPipelines>;
beforeAll(() => {
  t = synthPipelines();
});

describe('CloudWatch alarms over scenarios: one notification per incident, none for normal traffic', () => {
  it('RabbitMQ: a 10-minute broker outage raises exactly one notification, QueueMetricsUnavailable', () => {
    expect(notified(evaluateAlarms(t.rabbit, brokerOutage, MINUTES))).toEqual([
      'QueueMetricsUnavailable ×1',
    ]);
  });

  it('normal traffic through the kick path (relay throttled and its events dropped every period) raises none, on both stacks', () => {
    expect(notified(evaluateAlarms(t.sqs, traffic, MINUTES))).toEqual([]);
    expect(notified(evaluateAlarms(t.rabbit, traffic, MINUTES))).toEqual([]);
  });

  it('a message parked during traffic raises ParkedMessages and NewParkedMessages, once each (both stacks)', () => {
    for (const template of [t.sqs, t.rabbit]) {
      expect(notified(evaluateAlarms(template, parkedDuringTraffic, MINUTES))).toEqual([
        'NewParkedMessages ×1',
        'ParkedMessages ×1',
      ]);
    }
  });

  it('a relay that stops raises its heartbeat alarms only, not every alarm on what it reported (both stacks)', () => {
    for (const template of [t.sqs, t.rabbit]) {
      expect(notified(evaluateAlarms(template, relayStops, MINUTES))).toEqual([
        'InventoryRelayHeartbeat ×1',
        'RelayHeartbeat ×1',
      ]);
    }
  });
});
