import { describe, expect, it } from 'vitest';
import { CONFIGURATIONS } from '../../lab/configurations.js';
import { runScenario } from '../../lab/runner.js';
import { SCENARIOS } from '../../lab/scenarios/index.js';
import { SCALED_SETTINGS } from '../../lab/settings.js';
import type { PeerId } from '../../peers/types.js';
import { LAB_TEST_TIMEOUT_MS, labServices } from '../helpers/lab.js';

/**
 * The peers through the lab's scenarios (`npm start -- --peers`): a peer's failed invariant is a
 * finding, so these tests pin each verdict as measured (docs/behaviour-comparison.md, "Peers").
 * A new version of a peer that changes one fails here, and the docs' table must change with it.
 * The scenarios pinned are the quick ones that tell the peers apart; the whole catalogue runs
 * with `npm start -- --peers`.
 */
const PINNED: Record<string, Partial<Record<PeerId, boolean>>> = {
  'happy-path': {
    'peer-powertools': true,
    'peer-sqs-consumer': true,
    'peer-mqt-sqs': true,
    'peer-mqt-amqp': true,
    'peer-pg-transactional-outbox': true,
  },
  // the same event twice: deduplicated by Powertools' Redis record, MQT SQS's store, pgto's inbox
  'duplicate-publish': {
    'peer-powertools': true,
    'peer-sqs-consumer': false,
    'peer-mqt-sqs': true,
    'peer-mqt-amqp': false,
    'peer-pg-transactional-outbox': true,
  },
  // committed, then the handler fails: only an inbox in the effect's transaction holds
  'crash-after-commit': {
    'peer-powertools': false,
    'peer-sqs-consumer': false,
    'peer-mqt-sqs': false,
    'peer-mqt-amqp': false,
    'peer-pg-transactional-outbox': true,
  },
  // SQS's own second copy (the fault layer): only a deduplicating consumer absorbs it
  'sqs-spontaneous-duplicate': {
    'peer-powertools': true,
    'peer-sqs-consumer': false,
    'peer-mqt-sqs': true,
  },
  // a delete that "succeeded" and deleted nothing: the message comes back
  'stale-ack': {
    'peer-powertools': true,
    'peer-sqs-consumer': false,
    'peer-mqt-sqs': true,
  },
};

describe.concurrent('the peers through the lab scenarios (verdicts pinned)', () => {
  const services = labServices();
  for (const [scenarioId, verdicts] of Object.entries(PINNED)) {
    const scenario = SCENARIOS.find((s) => s.id === scenarioId);
    if (!scenario) throw new Error(`no scenario ${scenarioId}`);
    for (const [peer, held] of Object.entries(verdicts) as [PeerId, boolean][]) {
      // (a scenario of one transport pins the peers of that transport only)
      it(
        `${scenarioId} × ${peer}: invariant ${held ? 'holds' : 'fails (a finding)'}`,
        async () => {
          const r = await runScenario(scenario, CONFIGURATIONS[peer], SCALED_SETTINGS, services);
          // measured, not an error of the rig: every run reaches its final state
          expect(r.error).toBeUndefined();
          expect(r.applicable).toBe(true);
          expect(r.checks.length).toBeGreaterThan(0);
          expect(
            r.invariantHeld,
            r.checks
              .filter((c) => !c.ok)
              .map((c) => c.text)
              .join('; '),
          ).toBe(held);
        },
        LAB_TEST_TIMEOUT_MS,
      );
    }
  }

  it('every scenario a peer skips says why and what happens instead', () => {
    const skipped = SCENARIOS.filter((s) => s.forPeers);
    expect(skipped.map((s) => s.id).sort()).toEqual(
      [
        'broker-down-relay',
        'consumer-paused-past-lease',
        'out-of-order',
        'publish-partially-failed',
        'relay-killed-mid-window',
        'repeated-kill-under-load',
        'sqs-reordered',
        'parking-unavailable',
        'redrive-after-fix',
        'relay-crash',
        'retry-ack-lost',
        'unroutable',
      ].sort(),
    );
    for (const s of skipped) {
      expect(s.forPeers?.reason.length).toBeGreaterThan(20);
      expect(s.forPeers?.instead.length).toBeGreaterThan(20);
    }
  });
});
