import { CONFIGURATIONS } from '../configurations.js';
import type {
  LabReport,
  RunResult,
  ScenarioReport,
  TimelineEvent,
  TimelineKind,
} from '../types.js';
import {
  CELL_LEGEND,
  cell,
  columnLabel,
  detailCells,
  failedChecks,
  label,
  notApplicableText,
  notReproducible,
  reasonOf,
  reasonText,
  seconds,
  verdict,
} from './cells.js';
import { agreedText, differences } from './differences.js';

/**
 * reports/compare.html: one self-contained page (inline CSS and SVG, no external assets). Per
 * scenario, a timeline with one lane per configuration: deliveries, effects, duplicates, retries
 * (with the delay they actually took), parking, failures, faults and controls, and the final state.
 */
const esc = (s: string) =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

const COLORS: Record<TimelineKind, string> = {
  received: '#2563eb',
  committed: '#15803d',
  duplicate: '#d97706',
  deferred: '#7c3aed',
  retry: '#7c3aed',
  parked: '#dc2626',
  acked: '#15803d',
  abandoned: '#dc2626',
  'failed-invocation': '#dc2626',
  fault: '#111827',
  control: '#6b7280',
  final: '#111827',
};

const LEGEND: [TimelineKind, string][] = [
  ['received', 'delivered'],
  ['committed', 'effect committed'],
  ['duplicate', 'duplicate absorbed (inbox)'],
  ['retry', 'retry scheduled → next delivery (actual delay)'],
  ['deferred', 'deferred (predecessor missing)'],
  ['parked', 'parked'],
  ['acked', 'acknowledged / deleted'],
  ['failed-invocation', 'invocation failed / consumer gave up'],
  ['fault', 'injected fault'],
  ['control', 'control (database, broker, route)'],
  ['final', 'final state reached'],
];

function marker(kind: TimelineKind, x: number, y: number): string {
  const c = COLORS[kind];
  switch (kind) {
    case 'received':
      return `<circle cx="${x}" cy="${y}" r="3.5" fill="${c}"/>`;
    case 'committed':
      return `<path d="M${x} ${y - 6} L${x + 6} ${y} L${x} ${y + 6} L${x - 6} ${y} Z" fill="${c}"/>`;
    case 'duplicate':
      return `<rect x="${x - 4}" y="${y - 4}" width="8" height="8" fill="${c}"/>`;
    case 'retry':
      return `<path d="M${x - 4} ${y - 5} L${x + 5} ${y} L${x - 4} ${y + 5} Z" fill="${c}"/>`;
    case 'deferred':
      return `<path d="M${x} ${y - 6} L${x + 6} ${y} L${x} ${y + 6} L${x - 6} ${y} Z" fill="none" stroke="${c}" stroke-width="2"/>`;
    case 'parked':
      return `<rect x="${x - 5}" y="${y - 5}" width="10" height="10" fill="${c}"/><rect x="${x - 2}" y="${y - 2}" width="4" height="4" fill="#fff"/>`;
    case 'acked':
      return `<path d="M${x - 4} ${y + 1} L${x - 1} ${y + 4} L${x + 5} ${y - 4}" fill="none" stroke="${c}" stroke-width="2"/>`;
    case 'abandoned':
    case 'failed-invocation':
      return `<path d="M${x - 5} ${y - 5} L${x + 5} ${y + 5} M${x + 5} ${y - 5} L${x - 5} ${y + 5}" stroke="${c}" stroke-width="2.5"/>`;
    case 'fault':
      return `<path d="M${x + 1} ${y - 8} L${x - 4} ${y + 1} L${x} ${y + 1} L${x - 2} ${y + 8} L${x + 4} ${y - 2} L${x} ${y - 2} Z" fill="${c}"/>`;
    default:
      return '';
  }
}

function niceStep(span: number): number {
  const target = span / 8;
  for (const s of [
    50, 100, 200, 250, 500, 1_000, 2_000, 5_000, 10_000, 30_000, 60_000, 120_000, 300_000,
  ]) {
    if (s >= target) return s;
  }
  return 600_000;
}

const fmtTick = (t: number) =>
  t >= 1_000 ? `${t % 1_000 === 0 ? t / 1_000 : (t / 1_000).toFixed(1)} s` : `${t} ms`;

const WIDTH = 1320;
const LEFT = 250;
const RIGHT = 215;
const PLOT = WIDTH - LEFT - RIGHT;

function finalSummary(r: RunResult): string {
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

function lane(r: RunResult, y0: number, x: (t: number) => number): { svg: string; height: number } {
  const parts: string[] = [];
  const name = CONFIGURATIONS[r.configuration].short;
  if (!r.applicable) {
    const h = 30;
    parts.push(
      `<text x="10" y="${y0 + 19}" class="lane">${esc(name)}</text>`,
      `<text x="${LEFT}" y="${y0 + 19}" class="na">${notReproducible(r) ? 'not reproducible here' : 'not applicable'}: ${esc(reasonOf(r))}</text>`,
    );
    return { svg: parts.join(''), height: h };
  }
  const ids = [...new Set(r.timeline.map((e) => e.messageId).filter((id): id is string => !!id))];
  const perMessage = ids.length > 0 && ids.length <= 6;
  const rows = perMessage ? ids.length : 1;
  const h = Math.max(44, 22 + rows * 16);
  const rowY = (e: TimelineEvent) => {
    if (!perMessage || !e.messageId) return y0 + h / 2 + 2;
    const i = ids.indexOf(e.messageId);
    return y0 + 18 + Math.max(0, i) * 16;
  };
  const bg = r.invariantHeld ? '#f8fafc' : '#fef2f2';
  parts.push(
    `<rect x="0" y="${y0}" width="${WIDTH}" height="${h}" fill="${bg}"/>`,
    `<line x1="0" x2="${WIDTH}" y1="${y0 + h}" y2="${y0 + h}" stroke="#e5e7eb"/>`,
    `<text x="10" y="${y0 + 18}" class="lane">${esc(name)}</text>`,
    `<text x="10" y="${y0 + 33}" class="sub">${r.deliveries} deliveries</text>`,
  );
  if (perMessage) {
    ids.forEach((id, i) => {
      const yy = y0 + 18 + i * 16;
      parts.push(
        `<line x1="${LEFT}" x2="${LEFT + PLOT}" y1="${yy}" y2="${yy}" stroke="#e5e7eb" stroke-dasharray="2 3"/>`,
        `<text x="${LEFT - 6}" y="${yy + 3}" class="msg" text-anchor="end">${esc(id.slice(0, 8))}</text>`,
      );
    });
  }
  // controls and faults: vertical lines across the lane
  // control labels: two rows (bottom, top); a label that would overlap the previous one in both
  // rows is pushed right of the one that ends first
  const rowEnds = [Number.NEGATIVE_INFINITY, Number.NEGATIVE_INFINITY];
  for (const e of r.timeline) {
    if (e.kind !== 'control' && e.kind !== 'fault' && e.kind !== 'failed-invocation') continue;
    const xx = x(e.t);
    const dash = e.kind === 'control' ? ' stroke-dasharray="4 3"' : '';
    parts.push(
      `<line x1="${xx}" x2="${xx}" y1="${y0 + 2}" y2="${y0 + h - 2}" stroke="${COLORS[e.kind]}" stroke-width="1"${dash} opacity="0.6"><title>${esc(`${fmtTick(Math.round(e.t))}: ${e.label}`)}</title></line>`,
    );
    if (e.kind === 'control') {
      const text = e.label.slice(0, 28);
      const width = text.length * 5;
      let row = rowEnds.findIndex((end) => xx + 3 >= end + 4);
      let tx = xx + 3;
      if (row < 0) {
        row = (rowEnds[0] as number) <= (rowEnds[1] as number) ? 0 : 1;
        tx = (rowEnds[row] as number) + 4;
      }
      rowEnds[row] = tx + width;
      const ty = row === 0 ? y0 + h - 4 : y0 + 9;
      parts.push(`<text x="${tx}" y="${ty}" class="ctl">${esc(text)}</text>`);
    }
  }
  // retries: an arc from the retry to the delivery it produced, labelled with the actual delay
  const received = r.timeline.filter((e) => e.kind === 'received');
  for (const e of r.timeline.filter((q) => q.kind === 'retry' || q.kind === 'deferred')) {
    // the delivery this retry (or deferral) produced: same message, one attempt further
    const next = received.find(
      (q) =>
        q.messageId === e.messageId &&
        q.t > e.t &&
        (e.attempt === undefined || q.attempt === e.attempt + 1),
    );
    if (!next) continue;
    const x1 = x(e.t);
    const x2 = x(next.t);
    const yy = rowY(e);
    // retries arc above the row, deferrals below it, so their labels never collide
    const bend = e.kind === 'deferred' ? 14 : -14;
    parts.push(
      `<path d="M${x1} ${yy} Q${(x1 + x2) / 2} ${yy + bend} ${x2} ${yy}" fill="none" stroke="${COLORS.retry}" stroke-width="1.2" stroke-dasharray="3 2"/>`,
      `<text x="${(x1 + x2) / 2}" y="${yy + (bend > 0 ? 12 : -9)}" class="delay" text-anchor="middle">${fmtTick(Math.round(next.t - e.t))}</text>`,
    );
  }
  for (const e of r.timeline) {
    if (e.kind === 'control' || e.kind === 'final') continue;
    const m = marker(e.kind, x(e.t), e.kind === 'fault' ? y0 + 10 : rowY(e));
    if (m)
      parts.push(`<g><title>${esc(`${fmtTick(Math.round(e.t))}: ${e.label}`)}</title>${m}</g>`);
  }
  const final = r.timeline.find((e) => e.kind === 'final');
  if (final) {
    const xx = x(final.t);
    parts.push(
      `<line x1="${xx}" x2="${xx}" y1="${y0 + 3}" y2="${y0 + h - 3}" stroke="#111827" stroke-width="2.5"/>`,
    );
  }
  const color = r.invariantHeld ? '#15803d' : '#b91c1c';
  parts.push(
    `<text x="${LEFT + PLOT + 12}" y="${y0 + 18}" class="final" fill="${color}">${esc(finalSummary(r))}</text>`,
    `<text x="${LEFT + PLOT + 12}" y="${y0 + 33}" class="sub">final state at ${seconds(r.timeToFinalMs)}</text>`,
  );
  return { svg: parts.join(''), height: h };
}

function timelineSvg(s: ScenarioReport): string {
  const maxT = Math.max(1_000, ...s.results.flatMap((r) => r.timeline.map((e) => e.t)));
  const span = maxT * 1.03;
  const x = (t: number) => LEFT + (Math.max(0, t) / span) * PLOT;
  const step = niceStep(span);
  const lanes: string[] = [];
  let y = 22;
  for (const r of s.results) {
    const l = lane(r, y, x);
    lanes.push(l.svg);
    y += l.height;
  }
  const ticks: string[] = [];
  for (let t = 0; t <= span; t += step) {
    ticks.push(
      `<line x1="${x(t)}" x2="${x(t)}" y1="18" y2="${y}" stroke="#e5e7eb"/>`,
      `<text x="${x(t)}" y="13" class="tick" text-anchor="middle">${fmtTick(t)}</text>`,
    );
  }
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${y + 4}" viewBox="0 0 ${WIDTH} ${y + 4}" role="img" aria-label="timeline of ${esc(s.title)}">${ticks.join('')}${lanes.join('')}</svg>`;
}

function legendSvg(): string {
  const items = LEGEND.map(([kind, text], i) => {
    const col = i % 4;
    const row = Math.floor(i / 4);
    const x = 10 + col * 320;
    const y = 16 + row * 22;
    const icon =
      kind === 'control'
        ? `<line x1="${x}" x2="${x}" y1="${y - 8}" y2="${y + 8}" stroke="${COLORS.control}" stroke-dasharray="4 3"/>`
        : kind === 'final'
          ? `<line x1="${x}" x2="${x}" y1="${y - 8}" y2="${y + 8}" stroke="#111827" stroke-width="2.5"/>`
          : marker(kind, x, y);
    return `${icon}<text x="${x + 14}" y="${y + 4}" class="legend">${esc(text)}</text>`;
  });
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${16 + Math.ceil(LEGEND.length / 4) * 22}">${items.join('')}</svg>`;
}

const DETAIL_COLUMNS = [
  'configuration',
  '',
  'deliveries',
  'effects',
  'duplicates absorbed',
  'retries (actual delays)',
  'parked (diagnosis)',
  'lost (of accepted)',
  'applied twice',
  'recovered',
  'unexpected',
  'order violations',
  'time to final',
  'time to recover',
  'mechanism',
];

/** What the page opens with: where the configurations differ, from the measurements. */
function differencesHtml(report: LabReport): string {
  const d = differences(report);
  const closing = agreedText(d);
  const list = d.lines.length
    ? `<p><b>Where the configurations differ</b> (measured in this run; the full table and each scenario below):</p><ul class="diff">${d.lines
        .map((l) => `<li><a href="#${esc(l.scenario)}">${esc(l.scenario)}</a>: ${esc(l.text)}</li>`)
        .join('')}</ul>`
    : '';
  return `${list}${closing ? `<p>${esc(closing)}</p>` : ''}`;
}

function detailRows(s: ScenarioReport): string {
  return s.results
    .map((r) => {
      if (!r.applicable) {
        return `<tr class="na"><td>${esc(label(r.configuration))}</td><td>${notApplicableText(r)}</td><td colspan="${DETAIL_COLUMNS.length - 2}">${esc(reasonText(r))}</td></tr>`;
      }
      const failures = failedChecks(r);
      const cells = detailCells(r, esc);
      return `<tr class="${r.invariantHeld ? 'ok' : 'bad'}"><td>${esc(label(r.configuration))}</td><td class="v">${verdict(r)}</td>${cells
        .map((c) => `<td>${c}</td>`)
        .join('')}<td>${esc(r.note)}${
        failures.length ? `<div class="fail">${esc(failures.join('; '))}</div>` : ''
      }</td></tr>`;
    })
    .join('');
}

/** The cost table beside the behaviour table (from reports/bench.json). */
function costHtml(cost: NonNullable<LabReport['cost']>): string {
  const cs = cost.configurations;
  const items = [...new Set(cs.flatMap((c) => c.lines.map((l) => l.item)))];
  const usd = (n: number | null | undefined) =>
    n === null ? 'not priced' : n === undefined ? '—' : `$${n.toFixed(n > 0 && n < 0.01 ? 4 : 2)}`;
  const rows = items
    .map(
      (item) =>
        `<tr><td>${esc(item)}</td>${cs.map((c) => `<td>${usd(c.lines.find((l) => l.item === item)?.usdPerMillionOrders)}</td>`).join('')}</tr>`,
    )
    .join('');
  return `<h2>Cost per million orders</h2>
<p class="meta">From <code>npm run bench -- --suite cost</code> (${esc(cost.measuredAt)}): every billable call of the deployed stacks counted in a steady-state run, priced from bench/prices.ts.</p>
<table class="summary"><tr><th>item</th>${cs.map((c) => `<th>${esc(c.label)}</th>`).join('')}</tr>${rows}<tr><td><b>total (priced items)</b></td>${cs.map((c) => `<td><b>$${c.usdPerMillionOrders.toFixed(2)}</b>${c.unpriced.length ? ' + unpriced' : ''}</td>`).join('')}</tr></table>`;
}

export function renderHtml(report: LabReport): string {
  const configs = (report.scenarios[0]?.results ?? []).map((r) => r.configuration);
  const summary = report.scenarios
    .map(
      (s) =>
        `<tr><td><a href="#${s.id}">${esc(s.title)}</a></td>${s.results
          .map(
            (r) =>
              `<td class="${!r.applicable ? 'na' : r.invariantHeld ? 'ok' : 'bad'}">${esc(cell(r))}</td>`,
          )
          .join('')}</tr>`,
    )
    .join('');
  const sections = report.scenarios
    .map(
      (s) => `<section id="${s.id}">
<h2>${esc(s.title)}</h2>
<p><b>Does:</b> ${esc(s.stimulus)}<br><b>Invariant:</b> ${esc(s.invariant)}</p>
${timelineSvg(s)}
<table class="detail"><tr>${DETAIL_COLUMNS.map((c) => `<th>${esc(c)}</th>`).join('')}</tr>${detailRows(s)}</table>
</section>`,
    )
    .join('\n');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Comparison lab: RabbitMQ vs SQS</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#111827;max-width:${WIDTH + 20}px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 4px;border-top:1px solid #d1d5db;padding-top:16px}
p{margin:4px 0 10px}.meta{color:#4b5563}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #d1d5db;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f3f4f6;font-weight:600}
.summary td{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:13px}
.summary td:first-child{font-family:inherit}
td.ok,tr.ok .v{background:#f0fdf4;color:#166534}td.bad,tr.bad .v{background:#fee2e2;color:#991b1b;font-weight:600}
td.na,tr.na td{color:#6b7280;background:#f9fafb}
.detail{font-size:13px;width:100%}.detail td:nth-child(n+3):nth-child(-n+5),.detail td:nth-child(n+8):nth-child(-n+12){text-align:right}
ul.diff{margin:4px 0 10px;padding-left:22px}ul.diff li{margin:2px 0}
.fail{color:#991b1b;font-weight:600}
svg text{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
.lane{font-size:12px;font-weight:600;fill:#111827}.sub{font-size:11px;fill:#4b5563}.msg{font-size:9px;fill:#6b7280;font-family:ui-monospace,monospace}
.tick{font-size:10px;fill:#6b7280}.ctl{font-size:9px;fill:#4b5563}.delay{font-size:9px;fill:#6d28d9}
.final{font-size:12px;font-weight:600}.na{font-size:12px;fill:#6b7280;font-style:italic}.legend{font-size:12px;fill:#374151}
</style></head><body>
<h1>Comparison lab: the same faults on RabbitMQ and SQS</h1>
${differencesHtml(report)}
<p class="meta">Run ${esc(report.startedAt)} in ${seconds(report.durationMs)} on ${esc(report.machine)}.<br>${esc(report.settings)}.<br>Versions: ${esc(
    Object.entries(report.versions)
      .map(([k, v]) => `${k} ${v}`)
      .join(', '),
  )}.<br><b>${report.allHeld ? 'Every invariant held.' : 'Some invariants FAILED.'}</b></p>
<table class="summary"><tr><th>scenario</th>${configs.map((c) => `<th>${esc(columnLabel(c, report.versions))}</th>`).join('')}</tr>${summary}</table>
<p class="meta">${esc(CELL_LEGEND)}</p>
${report.cost ? costHtml(report.cost) : ''}
<h2>How to read the timelines</h2>
<p>One lane per configuration, time from the scenario's start. With up to six messages each message has its own row (its id on the left); dashed arcs join a retry to the delivery it produced, labelled with the delay it actually took. Hover a mark for its journal line.</p>
${legendSvg()}
${sections}
</body></html>
`;
}
