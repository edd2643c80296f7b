import { CONFIGURATIONS, type ConfigurationId } from '../configurations.js';
import type { RunResult } from '../types.js';

/** Shared wording of the reports. */
export const CELL_LEGEND =
  'cell = verdict deliveries/effects/duplicates absorbed/retries/parked time-to-final-state';

export const label = (id: ConfigurationId) => CONFIGURATIONS[id].label;

/** A peer configuration (its failures are findings about the peer). */
export const isPeerId = (id: ConfigurationId) => CONFIGURATIONS[id].peer !== undefined;

/** The broker a configuration ran on, with its version (`RabbitMQ 4.0.5`, `fauxqs 2.4.1`). */
export function brokerOf(
  id: ConfigurationId,
  versions: Record<string, string>,
): string | undefined {
  if (CONFIGURATIONS[id].transport === 'rabbitmq') {
    return versions.rabbitmq ? `RabbitMQ ${versions.rabbitmq}` : undefined;
  }
  return versions.fauxqs ? `fauxqs ${versions.fauxqs}` : undefined;
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
  if (!r.applicable) return 'n/a';
  return r.invariantHeld ? '✓' : '✗';
}

/** `✓ 3/1/1/0/0 1.2 s` */
export function cell(r: RunResult): string {
  if (!r.applicable) return 'n/a';
  return `${verdict(r)} ${r.deliveries}/${r.effects}/${r.duplicatesAbsorbed}/${r.retries}/${r.parked} ${seconds(r.timeToFinalMs)}`;
}

export function retriesText(r: RunResult): string {
  if (r.retries === 0) return '0';
  const delays = r.retryDelaysMs.map((d) => seconds(d)).join(', ');
  return delays ? `${r.retries} (after ${delays})` : String(r.retries);
}

export function parkedText(r: RunResult): string {
  if (r.parkedMessages.length === 0) return '0';
  return r.parkedMessages
    .map((p) => `${p.reason}/${p.errorClass} via ${p.via}: ${p.error.slice(0, 80)}`)
    .join('; ');
}

export function failedChecks(r: RunResult): string[] {
  return [...(r.error ? [r.error] : []), ...r.checks.filter((c) => !c.ok).map((c) => c.text)];
}
