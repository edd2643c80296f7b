import type { ConfigurationCost } from '../bench/cost.js';
import type { Accounting } from './accounting.js';
import type { Configuration, ConfigurationId } from './configurations.js';
import type { Measurements } from './measure.js';
import type { Rig, RigOptions } from './rigs/index.js';

/** A scenario does not apply to a configuration: why, and what happens there instead. */
export interface NotApplicable {
  /**
   * Why. A reason that starts with `emulator:` says the local emulation cannot reproduce the
   * behaviour (the reports then show `not reproducible here`, not `n/a`).
   */
  reason: string;
  instead: string;
}

export interface Check {
  ok: boolean;
  text: string;
}

export const check = (ok: boolean, text: string): Check => ({ ok, text });

/**
 * One fault scenario: a small script over the real pipeline, and the invariant it
 * asserts. The same definition runs in `npm start` (the lab) and in the test suite.
 */
export interface Scenario {
  id: string;
  title: string;
  /** What the scenario does to the pipeline, in one or two sentences. */
  stimulus: string;
  /** The invariant, in words (the checks below are its executable form). */
  invariant: string;
  /** Where it does not apply (default: applies everywhere except SQS FIFO). */
  notApplicable?(configuration: Configuration): NotApplicable | undefined;
  /**
   * Why it does not apply to the peer configurations, when it does not (it exercises a part of
   * ours the peers do not replace, or a mechanism they do not have).
   */
  forPeers?: NotApplicable;
  /** Why it does not apply to one peer configuration, when only some peers are concerned. */
  forPeer?(configuration: Configuration): NotApplicable | undefined;
  rig?: RigOptions | ((configuration: Configuration) => RigOptions);
  /**
   * Runs after the parallel runs, with nothing else running (its own configurations at once):
   * it loads the machine, or it measures timings others would disturb.
   */
  alone?: boolean;
  /** Drives the pipeline until its final state (waits on conditions, with timeouts). */
  run(rig: Rig): Promise<void>;
  /** The invariant, checked on what the journal, the database and the broker say. */
  check(rig: Rig, m: Measurements): Promise<Check[]> | Check[];
  /** One line on the mechanism that produced the result, from the measurements. */
  note(rig: Rig, m: Measurements): string;
}

export type TimelineKind =
  | 'received'
  | 'duplicate'
  | 'committed'
  | 'deferred'
  | 'retry'
  | 'parked'
  | 'acked'
  | 'abandoned'
  | 'failed-invocation'
  | 'fault'
  | 'control'
  | 'final';

export interface TimelineEvent {
  /** ms since the scenario's start. */
  t: number;
  kind: TimelineKind;
  label: string;
  messageId?: string | null;
  /** Retries already made when this happened (deliveries and retries). */
  attempt?: number;
}

export interface ParkedSummary {
  messageId: string | null;
  reason: string;
  errorClass: string;
  error: string;
  via: string;
  attempts: number;
}

/** One scenario × configuration, as reported (the first fields are the pinned result format). */
export interface RunResult {
  configuration: ConfigurationId;
  applicable: boolean;
  invariantHeld: boolean;
  deliveries: number;
  effects: number;
  parked: number;
  retries: number;
  timeToFinalMs: number | null;
  note: string;
  /** Not applicable: why, and what happens instead. */
  reason?: string;
  instead?: string;
  duplicatesAbsorbed: number;
  retryDelaysMs: number[];
  redeliveries: number;
  failedInvocations: number;
  parkedMessages: ParkedSummary[];
  /**
   * Jepsen's accounting (lab/accounting.ts): accepted events against decided, lost, applied twice,
   * recovered, unexpected, out of order, time to recover. Always present: zeros (and null times)
   * for a run that did not apply or could not be measured.
   */
  accounting: Accounting;
  checks: Check[];
  error?: string;
  timeline: TimelineEvent[];
  /** Wall time of the whole run, setup and clean-up included. */
  wallMs: number;
  /** The broker this run used, with its version (`RabbitMQ 4.0.5`); set by `npm start`. */
  broker?: string;
}

export interface ScenarioReport {
  id: string;
  title: string;
  stimulus: string;
  invariant: string;
  results: RunResult[];
}

export interface LabReport {
  startedAt: string;
  durationMs: number;
  settings: string;
  /** What ran the consumers and the relay: the sources, or the deployed bundles (`--bundles`). */
  code: 'sources' | 'bundles';
  machine: string;
  versions: Record<string, string>;
  /** Every invariant held on our configurations (a peer's failure is a finding, not a failure). */
  allHeld: boolean;
  /**
   * What each deployed configuration costs per million orders, from the last
   * `npm run bench -- --suite cost` (reports/bench.json), shown beside the behaviour table.
   */
  cost?: { measuredAt: string; configurations: ConfigurationCost[] };
  /** The peers that ran (`--peers`): versions and how each was set up. */
  peers?: PeerSummary[];
  scenarios: ScenarioReport[];
}

/** A peer configuration in the reports: what it is and how it was set up. */
export interface PeerSummary {
  id: string;
  transport: 'sqs' | 'rabbitmq';
  versions: Record<string, string>;
  setup: string;
  guarantee: string;
  /** Scenarios run / whose invariant held on it. */
  ran: number;
  held: number;
}
