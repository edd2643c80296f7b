import { describe, expect, it } from 'vitest';
import { DEFAULT_RETENTION, DEFAULT_RETRY_BUDGET } from '../../shared/index.js';
import { RABBITMQ_NAMES, RETRY_NAMES } from '../../shared/pipeline/names.js';
import { PIPELINE_TOPOLOGY } from '../../shared/pipeline/topology.js';
import { declaredTopology } from '../../shared/transport/rabbitmq/index.js';
import { policyForBroker, UNLIMITED_DELIVERIES } from '../../shared/transport/rabbitmq/topology.js';

const { topology, policies } = declaredTopology(
  PIPELINE_TOPOLOGY,
  DEFAULT_RETRY_BUDGET,
  DEFAULT_RETENTION,
);
const limitOf = (name: string) =>
  policies.find((p) => p.name === name)?.definition['delivery-limit'];

describe('RabbitMQ policies across broker versions', () => {
  it('every declared quorum queue has exactly one policy, and it states a delivery limit', () => {
    for (const q of topology.queues) {
      const own = policies.filter((p) => new RegExp(p.pattern).test(q.name));
      expect(
        own.map((p) => p.name),
        q.name,
      ).toEqual([q.name]);
      expect(own[0]?.definition['delivery-limit'], q.name).toEqual(expect.any(Number));
    }
  });

  it('never lets a delivery count drop or move a parked message or a retry copy', () => {
    expect(limitOf(RETRY_NAMES.parkingQueue)).toBe(UNLIMITED_DELIVERIES);
    expect(limitOf(RABBITMQ_NAMES.resultsParkingQueue)).toBe(UNLIMITED_DELIVERIES);
    for (const q of topology.queues.filter((q) => q.name.startsWith(RETRY_NAMES.retryExchange))) {
      expect(limitOf(q.name), q.name).toBe(UNLIMITED_DELIVERIES);
    }
    // finite only where a dead-letter exchange takes what goes over it, or for the tap
    expect(limitOf(RABBITMQ_NAMES.inventoryQueue)).toBe(10);
    expect(limitOf(RABBITMQ_NAMES.inventoryResultsQueue)).toBe(50);
    expect(limitOf(RABBITMQ_NAMES.auditQueue)).toBe(20);
  });

  it.each([
    ['3.10.8', 'queues', false],
    ['3.11.0', 'queues', false],
    ['3.12.0', 'quorum_queues', false],
    ['3.13.7', 'quorum_queues', false],
    ['4.0.5', 'quorum_queues', true],
    ['4.2.1', 'quorum_queues', true],
  ])('on %s: apply-to %s, unlimited as -1: %s', (version, applyTo, minusOne) => {
    const parking = policies.find((p) => p.name === RETRY_NAMES.parkingQueue);
    const inventory = policies.find((p) => p.name === RABBITMQ_NAMES.inventoryQueue);
    if (!parking || !inventory) throw new Error('policies missing');
    const p = policyForBroker(parking, version);
    expect(p['apply-to']).toBe(applyTo);
    // 3.x has no default limit and refuses -1 ("-1 is not a valid delivery limit", 3.10.8)
    expect('delivery-limit' in p.definition).toBe(minusOne);
    if (minusOne) expect(p.definition['delivery-limit']).toBe(-1);
    expect(policyForBroker(inventory, version).definition['delivery-limit']).toBe(10);
    // the policy itself is left as built
    expect(parking.definition['delivery-limit']).toBe(UNLIMITED_DELIVERIES);
  });
});
