import { CONFIGURATIONS, type ConfigurationId } from '../configurations.js';
import type { LabReport, PeerSummary, RunResult, TimelineEvent } from '../types.js';
import {
  CELL_LEGEND,
  cell,
  columnLabel,
  detailCells,
  failedChecks,
  isPeerId,
  label,
  laneSummary,
  notReproducible,
  reasonOf,
  reasonText,
  seconds,
  verdict,
} from './cells.js';
import { agreedText, type Differences, differences } from './differences.js';

/**
 * The report of a lab run as the renderers show it (the terminal table, compare.md, compare.html):
 * every text worded once from the run's results; a renderer only lays it out and escapes it.
 */
export interface ReportModel {
  title: string;
  /** What the reports open with: where the configurations differ, and how many agreed. */
  differences: { lines: Differences['lines']; closing: string };
  run: {
    startedAt: string;
    duration: string;
    machine: string;
    settings: string;
    /** `rabbitmq 3.10.8, postgresql 15` */
    versions: string;
    /** Every invariant held on our configurations. */
    allHeld: boolean;
  };
  /** The peers that ran (`--peers`). */
  peers?: PeerView[];
  /** The summary table's columns: the configurations of the first scenario. */
  columns: { label: string; heading: string }[];
  legend: string;
  cost?: LabReport['cost'];
  scenarios: ScenarioView[];
}

export interface PeerView {
  id: string;
  /** `name 1.2.3, other 4.5` */
  versions: string;
  held: number;
  ran: number;
  setup: string;
  guarantee: string;
}

export interface ScenarioView {
  id: string;
  title: string;
  stimulus: string;
  invariant: string;
  runs: RunView[];
}

interface RunViewBase {
  configuration: ConfigurationId;
  label: string;
  /** The configuration's short name (the timeline's lanes). */
  short: string;
  /** A peer configuration (its failures are findings about the peer). */
  peer: boolean;
  invariantHeld: boolean;
  /** ✓, ✗, n/a or not reproducible here. */
  verdict: string;
  /** The summary table's cell: `✓ 1 effect · 1 dup absorbed · 0 lost · 1.2 s`. */
  cell: string;
  /** The error and the failed checks. */
  failures: string[];
  timeline: TimelineEvent[];
}

/** A run that applied: its numbers, mechanism and timeline. */
export interface AppliedRunView extends RunViewBase {
  applicable: true;
  /** The per-scenario table's numbers, from deliveries to the time to recover. */
  numbers: string[];
  /** The mechanism that produced the result. */
  note: string;
  deliveries: number;
  /** What the run came to, short enough for the end of its timeline lane. */
  summary: string;
  timeToFinal: string;
}

/** A run that did not apply: why, and what happens instead. */
export interface NotApplicableRunView extends RunViewBase {
  applicable: false;
  /** `why. Instead: what happens` */
  reason: string;
  /** `not applicable: why` (or `not reproducible here: why`), the timeline lane's line. */
  lane: string;
}

export type RunView = AppliedRunView | NotApplicableRunView;

/**
 * The columns of a scenario's table (`numbers` between the verdict and the mechanism); the page's
 * verdict column has no heading, and its retries and parked columns say what they show.
 */
export const detailColumns = (html: boolean) => [
  'configuration',
  html ? '' : 'verdict',
  'deliveries',
  'effects',
  'duplicates absorbed',
  html ? 'retries (actual delays)' : 'retries',
  html ? 'parked (diagnosis)' : 'parked',
  'lost (of accepted)',
  'applied twice',
  'recovered',
  'unexpected',
  'order violations',
  'time to final',
  'time to recover',
  'mechanism',
];

const TITLE = 'Comparison lab: the same faults on RabbitMQ, SQS and NATS JetStream';

/** The model of a lab run's report, built from its results. */
export function reportModel(report: LabReport): ReportModel {
  const configs = (report.scenarios[0]?.results ?? []).map((r) => r.configuration);
  const d = differences(report);
  return {
    title: TITLE,
    differences: { lines: d.lines, closing: agreedText(d) },
    run: {
      startedAt: report.startedAt,
      duration: seconds(report.durationMs),
      machine: report.machine,
      settings: report.settings,
      versions: versionsText(report.versions),
      allHeld: report.allHeld,
    },
    ...(report.peers ? { peers: report.peers.map(peerView) } : {}),
    columns: configs.map((c) => ({ label: label(c), heading: columnLabel(c, report.versions) })),
    legend: CELL_LEGEND,
    ...(report.cost ? { cost: report.cost } : {}),
    scenarios: report.scenarios.map((s) => ({
      id: s.id,
      title: s.title,
      stimulus: s.stimulus,
      invariant: s.invariant,
      runs: s.results.map(runView),
    })),
  };
}

/** `name 1.2.3, other 4.5` */
export const versionsText = (versions: Record<string, string>) =>
  Object.entries(versions)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');

function peerView(p: PeerSummary): PeerView {
  const { id, held, ran, setup, guarantee } = p;
  return { id, versions: versionsText(p.versions), held, ran, setup, guarantee };
}

function runView(r: RunResult): RunView {
  const base: RunViewBase = {
    configuration: r.configuration,
    label: label(r.configuration),
    short: CONFIGURATIONS[r.configuration].short,
    peer: isPeerId(r.configuration),
    invariantHeld: r.invariantHeld,
    verdict: verdict(r),
    cell: cell(r),
    failures: failedChecks(r),
    timeline: r.timeline,
  };
  if (!r.applicable) {
    const lane = `${notReproducible(r) ? 'not reproducible here' : 'not applicable'}: ${reasonOf(r)}`;
    return { ...base, applicable: false, reason: reasonText(r), lane };
  }
  return {
    ...base,
    applicable: true,
    numbers: detailCells(r),
    note: r.note,
    deliveries: r.deliveries,
    summary: laneSummary(r),
    timeToFinal: seconds(r.timeToFinalMs),
  };
}
