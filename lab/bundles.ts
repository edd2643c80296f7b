import type { DeployedAssembly } from '../devkit/lambda/assembly.js';
import { synthesizedAssembly } from '../devkit/lambda/localPipeline.js';
import { localTransport } from '../devkit/transports/index.js';
import type { PipelineOverrides } from '../infra/config.js';
import type { RetryBudget } from '../shared/config/budget.js';
import type { TransportName } from '../shared/transport/index.js';
import type { Configuration } from './configurations.js';
import type { NotApplicable, Scenario } from './scenario.js';
import type { LabSettings } from './settings.js';

/**
 * `npm start -- --bundles`: the lab's consumers and relay run from the deployed bundles (what
 * `cdk synth` wrote, in Lambda-shaped processes: devkit/lambda), wired by the synthesized
 * template, instead of the sources in the lab's own process. The template is synthesized with the
 * run's settings (`cdk synth -c pipeline=…`: budget, timeouts, retry mode), so the bundles and the
 * lab's checks agree; place-order and the broker and database controls stay the lab's.
 */

const WITHOUT_BUNDLES = 'run it without --bundles';
const CHILD_PROCESSES =
  "it kills and freezes the consumer or the relay as the lab's child processes (lab/child.ts), run from the sources; the deployed bundles run behind the local Lambda runtime";
const FAULT_POINT = (what: string) =>
  `its fault point is armed in the lab's own process; ${what} runs in a process of its own`;
const DATABASE_PROXY =
  "it cuts the consumer's own database connection (a proxy of the lab's); a deployed consumer reaches the database through the Data API endpoint it shares with the relay";
const SINGLE_ROUNDS =
  'it runs single relay rounds in the lab; the deployed relay runs on its schedule';

/** Why scenarios that drive something inside the consumer's or the relay's process do not run. */
const NEEDS_THE_PROCESS: Record<string, string> = {
  'crash-after-commit': FAULT_POINT('a deployed bundle'),
  'retry-ack-lost': FAULT_POINT('a deployed bundle'),
  'relay-crash': FAULT_POINT('the deployed relay'),
  'db-outage-short': DATABASE_PROXY,
  'db-outage-long': DATABASE_PROXY,
  unroutable: SINGLE_ROUNDS,
  'publish-partially-failed': SINGLE_ROUNDS,
  'broker-throttled': "it drives the lab's own relay through the throttled window",
  'stale-ack':
    "on RabbitMQ it runs the consumer as the lab's child process behind a proxy it cuts; the deployed consumer connects to the broker itself",
  'consumer-paused-past-lease': CHILD_PROCESSES,
  'repeated-kill-under-load': CHILD_PROCESSES,
  'relay-killed-mid-window': CHILD_PROCESSES,
  'pinned-xmin': "it measures the lab's own relay loop under the pin",
  'broker-down-relay':
    "it cuts the relay's broker connection through a proxy of the lab's; the deployed relay connects to the broker's endpoint itself",
};

/** Why a scenario × configuration does not run from the bundles (undefined: it does). */
export function notApplicableWithBundles(
  scenario: Scenario,
  configuration: Configuration,
): NotApplicable | undefined {
  const reason = !localTransport(configuration.transport).deployed
    ? `nothing deploys ${configuration.transport}: there are no bundles`
    : configuration.fifo
      ? 'the stacks deploy no FIFO queue'
      : NEEDS_THE_PROCESS[scenario.id];
  return reason ? { reason, instead: WITHOUT_BUNDLES } : undefined;
}

/**
 * The consumer function's shortest timeout in a run from the bundles. A Lambda timeout is whole
 * seconds, and every transaction is rolled back 1 s before it (transactionDeadline); measured
 * here, 2 s was too short for a batch through the Data API on a loaded 2-core machine (a batch of
 * 10 never committed, every invocation timed out), 5 s (the real-time setting) is not.
 */
const MIN_BUNDLE_TIMEOUT_S = 5;

/**
 * The run's settings as a deployment can have them: the consumer's timeout whole seconds, at
 * least {@link MIN_BUNDLE_TIMEOUT_S}, the SQS visibility timeout at least 6 × that, and the Amazon
 * MQ batching window whole seconds or Lambda's default of 500 ms.
 */
export function bundleSettings(settings: LabSettings): LabSettings {
  const timeoutSeconds = Math.max(
    MIN_BUNDLE_TIMEOUT_S,
    Math.ceil(settings.functionTimeoutMs / 1000),
  );
  return {
    ...settings,
    code: 'bundles',
    functionTimeoutMs: timeoutSeconds * 1000,
    visibilityTimeoutSeconds: Math.max(settings.visibilityTimeoutSeconds, 6 * timeoutSeconds),
    mqBatchWindowMs:
      settings.mqBatchWindowMs % 1000 === 0 && settings.mqBatchWindowMs > 0
        ? settings.mqBatchWindowMs
        : 500,
  };
}

/** What the stacks are synthesized with for a run: its budget, timeouts and retry mode. */
export function pipelineOverrides(
  settings: LabSettings,
  configuration: Configuration,
  budget: RetryBudget,
): PipelineOverrides {
  return {
    budget,
    timeoutsSeconds: { reserve: settings.functionTimeoutMs / 1000 },
    sqs: {
      visibilityTimeoutSeconds: settings.visibilityTimeoutSeconds,
      retryMode: configuration.sqsMode ?? 'visibility',
    },
    rabbitmq:
      settings.mqBatchWindowMs === 500
        ? {}
        : { maxBatchingWindowSeconds: settings.mqBatchWindowMs / 1000 },
  };
}

/**
 * The synthesized assemblies of a lab run, one per transport and overrides, each synthesized once
 * (and cached across runs by source digest).
 */
export class LabAssemblies {
  private readonly assemblies = new Map<string, Promise<DeployedAssembly>>();
  /** Synths that were not cached, with their durations (for the report). */
  readonly synthesized: { key: string; ms: number }[] = [];

  constructor(private readonly log?: (line: string) => void) {}

  /** The assembly of the stacks that deploy `transport`, synthesized with `overrides`. */
  get(transport: TransportName, overrides: PipelineOverrides): Promise<DeployedAssembly> {
    const stack = localTransport(transport).deployed?.stack;
    if (!stack) return Promise.reject(new Error(`nothing deploys ${transport}`));
    const context = { pipeline: JSON.stringify(overrides) };
    const key = `${transport} ${context.pipeline}`;
    let a = this.assemblies.get(key);
    if (!a) {
      a = synthesizedAssembly({
        transport: stack,
        context,
        ...(this.log ? { log: this.log } : {}),
      }).then(({ assembly, synth }) => {
        if (!synth.cached) this.synthesized.push({ key: synth.key, ms: synth.durationMs });
        return assembly;
      });
      this.assemblies.set(key, a);
    }
    return a;
  }
}
