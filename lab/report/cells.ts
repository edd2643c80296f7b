import { BROKERS, CONFIGURATIONS, type ConfigurationId } from '../configurations.js';
import type { RunResult } from '../types.js';

/** Shared wording of the reports. */
export const CELL_LEGEND =
  'Each cell: ✓ the invariant held (✗ it failed); effects (what the handler wrote: reservations, rejections); ' +
  'lost (events the producer side accepted that were never decided: no effect, not parked); ' +
  'the time to the final state. Shown only when not zero: dup absorbed (copies recognised as duplicates), ' +
  'retries, parked, applied twice (extra applications of one event), unexpected (effects of no accepted event), ' +
  'out of order (an event applied after a later version of its order), recovered (uncertain publishes that arrived anyway). ' +
  'n/a: the scenario does not apply (its section says why); not reproducible here: the emulator cannot reproduce the behaviour.';

/** A not-applicable reason with this prefix: the emulator cannot reproduce the behaviour. */
const EMULATOR_PREFIX = 'emulator:';

/** Not applicable because the emulator cannot reproduce the behaviour. */
export const notReproducible = (r: RunResult) =>
  !r.applicable && (r.reason ?? '').startsWith(EMULATOR_PREFIX);

/** What a run that did not apply shows instead of a verdict. */
const notApplicableText = (r: RunResult) => (notReproducible(r) ? 'not reproducible here' : 'n/a');

/** Why a run did not apply (without the `emulator:` prefix). */
export const reasonOf = (r: RunResult) => (r.reason ?? '').replace(/^emulator:\s*/, '');

/** Why a run did not apply, and what happens instead. */
export const reasonText = (r: RunResult) => `${reasonOf(r)}. Instead: ${r.instead ?? ''}`;

/** A run that could not be set up or measured: its numbers are not measurements. */
export const unmeasured = (r: RunResult) =>
  r.applicable && /^(setup|measure): /.test(r.error ?? '');

export const label = (id: ConfigurationId) => CONFIGURATIONS[id].label;

/** A peer configuration (its failures are findings about the peer). */
export const isPeerId = (id: ConfigurationId) => CONFIGURATIONS[id].peer !== undefined;

/** The broker a configuration ran on, with its version (`RabbitMQ 4.0.5`, `fauxqs 2.4.1`). */
export function brokerOf(
  id: ConfigurationId,
  versions: Record<string, string>,
): string | undefined {
  const broker = BROKERS[CONFIGURATIONS[id].transport];
  const version = broker && versions[broker.version];
  return broker && version ? `${broker.name} ${version}` : undefined;
}

/** A report column's heading: the configuration and the broker it ran on. */
export function columnLabel(id: ConfigurationId, versions: Record<string, string>): string {
  const broker = brokerOf(id, versions);
  return broker ? `${label(id)} (${broker})` : label(id);
}

export function seconds(ms: number | null): string {
  if (ms === null) return '—';
  return ms >= 10_000 ? `${(ms / 1000).toFixed(0)} s` : `${(ms / 1000).toFixed(1)} s`;
}

export function verdict(r: RunResult): string {
  if (!r.applicable) return notApplicableText(r);
  return r.invariantHeld ? '✓' : '✗';
}

export const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/**
 * What a run came to, in words: effects and lost always; duplicates absorbed, retries, parked and
 * every anomaly of the accounting only when not zero.
 */
function cellParts(r: RunResult): string[] {
  const a = r.accounting;
  const parts = [plural(r.effects, 'effect')];
  if (r.duplicatesAbsorbed) parts.push(`${r.duplicatesAbsorbed} dup absorbed`);
  if (r.retries) parts.push(plural(r.retries, 'retry', 'retries'));
  if (r.parked) parts.push(`${r.parked} parked`);
  parts.push(`${a.lost} lost`);
  if (a.duplicated) parts.push(`${a.duplicated} applied twice`);
  if (a.unexpected) parts.push(`${a.unexpected} unexpected`);
  if (a.orderViolations) parts.push(`${a.orderViolations} out of order`);
  if (a.recovered) parts.push(`${a.recovered} recovered`);
  return parts;
}

/** `✓ 1 effect · 1 dup absorbed · 0 lost · 1.2 s` */
export function cell(r: RunResult): string {
  if (!r.applicable) return notApplicableText(r);
  if (unmeasured(r)) return `✗ ${r.note}`;
  return `${verdict(r)} ${[...cellParts(r), seconds(r.timeToFinalMs)].join(' · ')}`;
}

function retriesText(r: RunResult): string {
  if (r.retries === 0) return '0';
  const delays = r.retryDelaysMs.map((d) => seconds(d)).join(', ');
  return delays ? `${r.retries} (after ${delays})` : String(r.retries);
}

function parkedText(r: RunResult): string {
  if (r.parkedMessages.length === 0) return '0';
  return r.parkedMessages
    .map((p) => `${p.reason}/${p.errorClass} via ${p.via}: ${p.error.slice(0, 80)}`)
    .join('; ');
}

/** The numbers of a run's row in the per-scenario tables, from deliveries to the time to recover. */
export function detailCells(r: RunResult): string[] {
  const a = r.accounting;
  const counted = !unmeasured(r);
  const n = (v: number) => (counted ? String(v) : '—');
  return [
    String(r.deliveries),
    String(r.effects),
    String(r.duplicatesAbsorbed),
    retriesText(r),
    parkedText(r),
    counted ? `${a.lost} of ${a.accepted}` : '—',
    n(a.duplicated),
    n(a.recovered),
    n(a.unexpected),
    n(a.orderViolations),
    seconds(r.timeToFinalMs),
    seconds(a.recoverMs),
  ];
}

/** What a run came to, short enough for the end of its timeline lane: `✓ 1 effect · 1 dup`. */
export function laneSummary(r: RunResult): string {
  const a = r.accounting;
  const parts = [`${r.effects} effect${r.effects === 1 ? '' : 's'}`];
  if (r.duplicatesAbsorbed) parts.push(`${r.duplicatesAbsorbed} dup`);
  if (r.retries) parts.push(`${r.retries} retr${r.retries === 1 ? 'y' : 'ies'}`);
  if (r.parked) parts.push(`${r.parked} parked`);
  // the accounting's anomalies, only when there are any (the lane's width is small)
  if (a.lost) parts.push(`${a.lost} lost`);
  if (a.duplicated) parts.push(`${a.duplicated} twice`);
  if (a.unexpected) parts.push(`${a.unexpected} unexpected`);
  if (a.orderViolations) parts.push(`${a.orderViolations} out of order`);
  return `${verdict(r)} ${parts.join(' · ')}`;
}

export function failedChecks(r: RunResult): string[] {
  return [...(r.error ? [r.error] : []), ...r.checks.filter((c) => !c.ok).map((c) => c.text)];
}
