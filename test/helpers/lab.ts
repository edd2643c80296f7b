import { expect, inject, it } from 'vitest';
import type { Configuration } from '../../lab/configurations.js';
import { runScenario } from '../../lab/runner.js';
import { notApplicableTo, type Scenario } from '../../lab/scenario.js';
import { CORE_SCENARIOS } from '../../lab/scenarios/index.js';
import { type LabServices, SCALED_SETTINGS } from '../../lab/settings.js';

/** The lab's services from the test run's global setup (SQS: the embedded fauxqs server). */
export function labServices(): LabServices {
  const services = inject('services');
  const sqs = services.sqs.find((s) => s.name === 'fauxqs' || s.name === 'external');
  if (!sqs) throw new Error('no SQS server for the lab scenarios');
  return {
    databaseUrl: services.databaseUrl,
    amqpUrl: services.amqpUrl,
    managementUrl: services.managementUrl,
    sqsEndpoint: sqs.endpoint,
  };
}

/**
 * A scenario makes several waits of up to `waitMs` (40 s) each; the test's own limit sits above a
 * slow run on a loaded machine so that a failing wait, not the test timeout, reports what hung.
 */
export const LAB_TEST_TIMEOUT_MS = 180_000;

/**
 * One test per scenario × configuration, asserting the scenario's invariant exactly as `npm start`
 * checks it; a scenario that does not apply must say why and what happens instead.
 */
export function labScenarioSuite(
  configurations: Configuration[],
  scenarios: Scenario[] = CORE_SCENARIOS,
): void {
  const services = labServices();
  for (const configuration of configurations) {
    for (const scenario of scenarios) {
      const na = notApplicableTo(scenario, configuration);
      if (na) {
        it(`${scenario.id} × ${configuration.id}: not applicable, and says why`, () => {
          expect(na.reason.length).toBeGreaterThan(10);
          expect(na.instead.length).toBeGreaterThan(10);
        });
        continue;
      }
      it(
        `${scenario.id} × ${configuration.id}: ${scenario.invariant}`,
        async () => {
          const r = await runScenario(scenario, configuration, SCALED_SETTINGS, services);
          expect(r.error).toBeUndefined();
          expect(r.checks.filter((c) => !c.ok).map((c) => c.text)).toEqual([]);
          expect(r.checks.length).toBeGreaterThan(0);
          expect(r.invariantHeld).toBe(true);
        },
        LAB_TEST_TIMEOUT_MS,
      );
    }
  }
}
