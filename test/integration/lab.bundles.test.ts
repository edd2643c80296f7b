import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startMotoServer } from '../../devkit/emulators/motoServer.js';
import { bundleSettings, LabAssemblies, pipelineOverrides } from '../../lab/bundles.js';
import { CONFIGURATIONS } from '../../lab/configurations.js';
import { runAll } from '../../lab/runner.js';
import { SCENARIOS } from '../../lab/scenarios/index.js';
import { type LabServices, SCALED_SETTINGS } from '../../lab/settings.js';
import { labServices } from '../helpers/lab.js';

/**
 * `npm start -- --bundles`: the same scenario, its consumer and relay run from the deployed
 * bundles (stacks synthesized with the run's settings), holds its invariant, and the report says
 * which code ran; a scenario that needs the consumer's own process says why it does not apply.
 */
describe('the lab, its consumers and relay run from the deployed bundles', () => {
  const settings = bundleSettings(SCALED_SETTINGS);
  const configurations = [CONFIGURATIONS['rabbitmq-amazonmq'], CONFIGURATIONS['sqs-visibility']];
  const scenarios = SCENARIOS.filter((s) => ['happy-path', 'crash-after-commit'].includes(s.id));
  let services: LabServices;
  let stopMoto: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    const moto = inject('services').sqs.find((s) => s.name === 'moto');
    let secretsEndpoint = moto?.endpoint;
    if (!secretsEndpoint) {
      const own = await startMotoServer();
      stopMoto = own.stop;
      secretsEndpoint = own.endpoint;
    }
    services = { ...labServices(), secretsEndpoint, assemblies: new LabAssemblies() };
    // synthesized (or found cached) before the runs, as `npm start -- --bundles` does
    for (const c of configurations) {
      await services.assemblies?.get(c.transport, pipelineOverrides(settings, c, settings.budget));
    }
  }, 400_000);

  afterAll(async () => {
    await stopMoto?.();
  });

  it('holds the happy path on the Amazon MQ and SQS triggers; the report names the code', async () => {
    const report = await runAll({ scenarios, configurations, settings, services, concurrency: 2 });
    expect(report.code).toBe('bundles');
    expect(report.settings).toContain('the deployed bundles');
    const happy = report.scenarios.find((s) => s.id === 'happy-path');
    expect(happy?.results.map((r) => [r.configuration, r.invariantHeld, r.error])).toEqual([
      ['rabbitmq-amazonmq', true, undefined],
      ['sqs-visibility', true, undefined],
    ]);
    const crash = report.scenarios.find((s) => s.id === 'crash-after-commit');
    expect(
      crash?.results.every((r) => !r.applicable && /process of its own/.test(r.reason ?? '')),
    ).toBe(true);
  }, 180_000);
});
