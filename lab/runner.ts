import { cpus } from 'node:os';
import { CONSUMER_PEERS } from '../peers/index.js';
import { packageVersion } from '../peers/versions.js';
import { accountRun, NO_ACCOUNTING } from './accounting.js';
import { notApplicableWithBundles } from './bundles.js';
import type { Configuration } from './configurations.js';
import { measure, timeline } from './measure.js';
import { createRig, type Rig } from './rigs/index.js';
import { notApplicableTo, type Scenario } from './scenario.js';
import type { LabServices, LabSettings } from './settings.js';
import type { LabReport, PeerSummary, RunResult, ScenarioReport } from './types.js';

const EMPTY = {
  deliveries: 0,
  effects: 0,
  parked: 0,
  retries: 0,
  duplicatesAbsorbed: 0,
  retryDelaysMs: [],
  redeliveries: 0,
  failedInvocations: 0,
  parkedMessages: [],
  accounting: NO_ACCOUNTING,
  checks: [],
  timeline: [],
};

const errorText = (err: unknown) =>
  ((err as Error)?.message ?? String(err)).split('\n')[0]?.slice(0, 300) ?? 'error';

/**
 * Runs one scenario on one configuration: builds its rig (own database, vhost or queues), runs the
 * script inside the rig's fault scope, measures what happened, checks the invariant, and tears
 * everything down. Never throws: a failure is a result with `invariantHeld: false`.
 */
export async function runScenario(
  scenario: Scenario,
  configuration: Configuration,
  settings: LabSettings,
  services: LabServices,
): Promise<RunResult> {
  const started = Date.now();
  const na =
    (configuration.peer ? (scenario.forPeers ?? scenario.forPeer?.(configuration)) : undefined) ??
    notApplicableTo(scenario, configuration) ??
    (settings.code === 'bundles' ? notApplicableWithBundles(scenario, configuration) : undefined);
  if (na) {
    return {
      configuration: configuration.id,
      applicable: false,
      invariantHeld: true,
      timeToFinalMs: null,
      note: `not applicable: ${na.reason}. Instead: ${na.instead}`,
      reason: na.reason,
      instead: na.instead,
      wallMs: 0,
      ...EMPTY,
    };
  }
  let rig: Rig;
  try {
    rig = await createRig(
      configuration,
      settings,
      services,
      `${scenario.id}_${configuration.id}`,
      scenario.rig,
    );
  } catch (err) {
    return failedRun(configuration.id, 'setup', err, started);
  }
  try {
    let error: string | undefined;
    let finalAt: number | null = null;
    rig.run.begin();
    try {
      await rig.faults.run(() => scenario.run(rig));
      finalAt = Date.now();
    } catch (err) {
      error = errorText(err);
    }
    const m = await measure(rig);
    const accounting = await accountRun(rig, m);
    const checks = error ? [] : await scenario.check(rig, m);
    let note: string;
    try {
      note = scenario.note(rig, m);
    } catch (err) {
      note = `(note failed: ${errorText(err)})`;
    }
    return {
      configuration: configuration.id,
      applicable: true,
      invariantHeld: !error && checks.every((c) => c.ok),
      deliveries: m.deliveries,
      effects: m.effects,
      parked: m.parked.length,
      retries: m.retries,
      timeToFinalMs: finalAt === null ? null : finalAt - rig.run.t0,
      note,
      duplicatesAbsorbed: m.duplicatesAbsorbed,
      retryDelaysMs: m.retryDelaysMs,
      redeliveries: m.redeliveries,
      failedInvocations: m.failedInvocations,
      parkedMessages: m.parked,
      accounting,
      checks,
      ...(error ? { error } : {}),
      timeline: timeline(rig, m, finalAt),
      wallMs: Date.now() - started,
    };
  } catch (err) {
    return failedRun(configuration.id, 'measure', err, started);
  } finally {
    await rig.close();
  }
}

export interface RunAllOptions {
  scenarios: Scenario[];
  configurations: Configuration[];
  settings: LabSettings;
  services: LabServices;
  /** Runs at once (default: 4 per core). */
  concurrency?: number;
  onResult?: (scenario: Scenario, result: RunResult, done: number, total: number) => void;
}

/** Runs every scenario × configuration, several at once (each run is isolated). */
export async function runAll(options: RunAllOptions): Promise<LabReport> {
  const started = Date.now();
  const jobsOf = (scenarios: Scenario[]) =>
    scenarios.flatMap((s) =>
      options.configurations.map((c) => ({ scenario: s, configuration: c })),
    );
  // the parallel runs first; then each scenario that runs alone, its configurations at once
  const phases = [
    jobsOf(options.scenarios.filter((s) => !s.alone)),
    ...options.scenarios.filter((s) => s.alone).map((s) => jobsOf([s])),
  ].filter((jobs) => jobs.length > 0);
  const total = phases.reduce((n, jobs) => n + jobs.length, 0);
  const results = new Map<string, RunResult>();
  const key = (s: string, c: string) => `${s}\u0000${c}`;
  let done = 0;
  const concurrency = options.concurrency ?? Math.max(2, cpus().length * 4);
  for (const jobs of phases) {
    let next = 0;
    const worker = async () => {
      while (next < jobs.length) {
        const job = jobs[next++] as (typeof jobs)[number];
        const r = await runScenario(
          job.scenario,
          job.configuration,
          options.settings,
          options.services,
        );
        results.set(key(job.scenario.id, job.configuration.id), r);
        options.onResult?.(job.scenario, r, ++done, total);
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, jobs.length) }, worker));
  }
  const scenarios: ScenarioReport[] = options.scenarios.map((s) => ({
    id: s.id,
    title: s.title,
    stimulus: s.stimulus,
    invariant: s.invariant,
    results: options.configurations.map((c) => results.get(key(s.id, c.id)) as RunResult),
  }));
  return {
    startedAt: new Date(started).toISOString(),
    durationMs: Date.now() - started,
    settings: describeSettings(options.settings),
    code: options.settings.code ?? 'sources',
    machine: `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}`,
    versions: {},
    allHeld: scenarios.every((s) =>
      s.results.every((r) => r.invariantHeld || isPeer(options.configurations, r)),
    ),
    ...(options.configurations.some((c) => c.peer)
      ? { peers: peerSummaries(options.configurations, scenarios) }
      : {}),
    scenarios,
  };
}

const isPeer = (configurations: Configuration[], r: RunResult) =>
  configurations.some((c) => c.id === r.configuration && c.peer !== undefined);

function peerSummaries(
  configurations: Configuration[],
  scenarios: ScenarioReport[],
): PeerSummary[] {
  return configurations.flatMap((c) => {
    const peer = CONSUMER_PEERS.find((p) => p.id === c.peer);
    if (!peer) return [];
    const results = scenarios.flatMap((s) =>
      s.results.filter((r) => r.configuration === c.id && r.applicable),
    );
    return [
      {
        id: peer.id,
        transport: peer.transport,
        versions: Object.fromEntries(peer.packages.map((p) => [p, packageVersion(p)])),
        setup: peer.setup,
        guarantee: peer.guarantee,
        ran: results.length,
        held: results.filter((r) => r.invariantHeld).length,
      },
    ];
  });
}

export function describeSettings(s: LabSettings): string {
  const code =
    s.code === 'bundles'
      ? `consumers and relay: the deployed bundles (cdk synth with these settings, Lambda-shaped Node 24 processes; function timeout ${s.functionTimeoutMs / 1000} s)`
      : "consumers and relay: the sources, in the lab's process";
  return `${s.name}: retry ladder ${s.budget.ladderMs.join('/')} ms, ${s.budget.maxAttempts} retries, max age ${s.budget.maxAgeMs / 1000} s; SQS visibility timeout ${s.visibilityTimeoutSeconds} s; RabbitMQ delivery limit ${s.deliveryLimit}; ${code}`;
}

/**
 * A run that could not be set up or measured: its invariant counts as failed. Its error starts with
 * the stage (`setup: `, `measure: `): the reports show no numbers for it (report/cells.ts `unmeasured`).
 */
function failedRun(
  configuration: RunResult['configuration'],
  stage: 'setup' | 'measure',
  err: unknown,
  started: number,
): RunResult {
  return {
    configuration,
    applicable: true,
    invariantHeld: false,
    timeToFinalMs: null,
    note: stage === 'setup' ? 'setup failed' : 'measurement failed',
    error: `${stage}: ${errorText(err)}`,
    wallMs: Date.now() - started,
    ...EMPTY,
  };
}
