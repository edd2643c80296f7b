import type { ConfigurationCost } from '../bench/cost.js';
import type { TransportName } from '../shared/transport/index.js';
import type { ConfigurationId } from './configurations.js';

// What the lab reports, as plain data (compare.json): each run's checks, timeline and accounting,
// and the report of the whole lab run.

export interface Check {
  ok: boolean;
  text: string;
}

export const check = (ok: boolean, text: string): Check => ({ ok, text });

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

/**
 * Jepsen's accounting of one run: what the producer side accepted, set against what the consumer
 * side decided in the end. Every figure is read from the run (the rig's record of accepted events,
 * the journal, the database, the parking lot), never from what the scenario meant to do.
 */
export interface Accounting {
  /** Events the producer side accepted (`rig.run.accepted`: the API answered, or the scenario published). */
  accepted: number;
  /** Of those, decided in the end: an inbox row / a peer's effect row, or parked. */
  decided: number;
  /** Accepted, never decided. */
  lost: number;
  /** Extra applications of an effect (an event applied n times counts n − 1). */
  duplicated: number;
  /** Uncertain publishes (`rig.run.uncertain`) that arrived anyway (decided). */
  recovered: number;
  /** Effects (inbox rows / a peer's effect rows) of no accepted event. */
  unexpected: number;
  /** Per ordering key (aggregate id): events applied after an event of a higher version. */
  orderViolations: number;
  /**
   * From the end of the fault (`rig.run.faultEnded`) to the last decision of an accepted event (0 when
   * everything was decided before the fault ended); null when no fault end was marked or nothing
   * accepted was decided.
   */
  recoverMs: number | null;
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
  transport: TransportName;
  versions: Record<string, string>;
  setup: string;
  guarantee: string;
  /** Scenarios run / whose invariant held on it. */
  ran: number;
  held: number;
}
