import type { LabReport, TimelineEvent, TimelineKind } from '../types.js';
import {
  type AppliedRunView,
  detailColumns,
  type ReportModel,
  type RunView,
  reportModel,
  type ScenarioView,
} from './model.js';

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

/** Where a lane is drawn: its top and height, time to x, and an event to its row's y. */
interface LaneFrame {
  y0: number;
  h: number;
  x: (t: number) => number;
  rowY: (e: TimelineEvent) => number;
}

/** A configuration's lane: a line of text where the scenario did not apply. */
function lane(r: RunView, y0: number, x: (t: number) => number): { svg: string; height: number } {
  if (!r.applicable) {
    const svg =
      `<text x="10" y="${y0 + 19}" class="lane">${esc(r.short)}</text>` +
      `<text x="${LEFT}" y="${y0 + 19}" class="na">${esc(r.lane)}</text>`;
    return { svg, height: 30 };
  }
  const ids = [...new Set(r.timeline.map((e) => e.messageId).filter((id): id is string => !!id))];
  const perMessage = ids.length > 0 && ids.length <= 6;
  const h = Math.max(44, 22 + (perMessage ? ids.length : 1) * 16);
  const rowY = (e: TimelineEvent) => {
    if (!perMessage || !e.messageId) return y0 + h / 2 + 2;
    return y0 + 18 + Math.max(0, ids.indexOf(e.messageId)) * 16;
  };
  const frame: LaneFrame = { y0, h, x, rowY };
  const svg = [
    laneHeading(r, frame),
    perMessage ? messageRows(ids, y0) : '',
    controlLines(r.timeline, frame),
    retryArcs(r.timeline, frame),
    markers(r.timeline, frame),
    finalLine(r.timeline, frame),
    laneEnd(r, y0),
  ];
  return { svg: svg.join(''), height: h };
}

/** The lane's background, and the configuration's name with its deliveries. */
function laneHeading(r: AppliedRunView, { y0, h }: LaneFrame): string {
  const bg = r.invariantHeld ? '#f8fafc' : '#fef2f2';
  return (
    `<rect x="0" y="${y0}" width="${WIDTH}" height="${h}" fill="${bg}"/>` +
    `<line x1="0" x2="${WIDTH}" y1="${y0 + h}" y2="${y0 + h}" stroke="#e5e7eb"/>` +
    `<text x="10" y="${y0 + 18}" class="lane">${esc(r.short)}</text>` +
    `<text x="10" y="${y0 + 33}" class="sub">${r.deliveries} deliveries</text>`
  );
}

/** With up to six messages, a row per message, its id on the left. */
function messageRows(ids: string[], y0: number): string {
  return ids
    .map((id, i) => {
      const yy = y0 + 18 + i * 16;
      return (
        `<line x1="${LEFT}" x2="${LEFT + PLOT}" y1="${yy}" y2="${yy}" stroke="#e5e7eb" stroke-dasharray="2 3"/>` +
        `<text x="${LEFT - 6}" y="${yy + 3}" class="msg" text-anchor="end">${esc(id.slice(0, 8))}</text>`
      );
    })
    .join('');
}

const hoverText = (e: TimelineEvent) => esc(`${fmtTick(Math.round(e.t))}: ${e.label}`);

/**
 * Controls and faults: vertical lines across the lane. Control labels take two rows (bottom,
 * top); a label that would overlap the previous one in both rows is pushed right of the one that
 * ends first.
 */
function controlLines(timeline: TimelineEvent[], { y0, h, x }: LaneFrame): string {
  const parts: string[] = [];
  const rowEnds = [Number.NEGATIVE_INFINITY, Number.NEGATIVE_INFINITY];
  for (const e of timeline) {
    if (e.kind !== 'control' && e.kind !== 'fault' && e.kind !== 'failed-invocation') continue;
    const xx = x(e.t);
    const dash = e.kind === 'control' ? ' stroke-dasharray="4 3"' : '';
    parts.push(
      `<line x1="${xx}" x2="${xx}" y1="${y0 + 2}" y2="${y0 + h - 2}" stroke="${COLORS[e.kind]}" stroke-width="1"${dash} opacity="0.6"><title>${hoverText(e)}</title></line>`,
    );
    if (e.kind !== 'control') continue;
    const text = e.label.slice(0, 28);
    let row = rowEnds.findIndex((end) => xx + 3 >= end + 4);
    let tx = xx + 3;
    if (row < 0) {
      row = (rowEnds[0] as number) <= (rowEnds[1] as number) ? 0 : 1;
      tx = (rowEnds[row] as number) + 4;
    }
    rowEnds[row] = tx + text.length * 5;
    const ty = row === 0 ? y0 + h - 4 : y0 + 9;
    parts.push(`<text x="${tx}" y="${ty}" class="ctl">${esc(text)}</text>`);
  }
  return parts.join('');
}

/**
 * Retries: an arc from the retry (or deferral) to the delivery it produced (same message, one
 * attempt further), labelled with the actual delay.
 */
function retryArcs(timeline: TimelineEvent[], { x, rowY }: LaneFrame): string {
  const receivedByMessage = new Map<string | null | undefined, TimelineEvent[]>();
  for (const e of timeline) {
    if (e.kind !== 'received') continue;
    const list = receivedByMessage.get(e.messageId) ?? [];
    list.push(e);
    receivedByMessage.set(e.messageId, list);
  }
  const parts: string[] = [];
  for (const e of timeline) {
    if (e.kind !== 'retry' && e.kind !== 'deferred') continue;
    const next = receivedByMessage
      .get(e.messageId)
      ?.find((q) => q.t > e.t && (e.attempt === undefined || q.attempt === e.attempt + 1));
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
  return parts.join('');
}

/** A mark per event (faults at the top of the lane), its journal line on hover. */
function markers(timeline: TimelineEvent[], { y0, x, rowY }: LaneFrame): string {
  const parts: string[] = [];
  for (const e of timeline) {
    if (e.kind === 'control' || e.kind === 'final') continue;
    const m = marker(e.kind, x(e.t), e.kind === 'fault' ? y0 + 10 : rowY(e));
    if (m) parts.push(`<g><title>${hoverText(e)}</title>${m}</g>`);
  }
  return parts.join('');
}

/** The final state: a bold line across the lane. */
function finalLine(timeline: TimelineEvent[], { y0, h, x }: LaneFrame): string {
  const final = timeline.find((e) => e.kind === 'final');
  if (!final) return '';
  const xx = x(final.t);
  return `<line x1="${xx}" x2="${xx}" y1="${y0 + 3}" y2="${y0 + h - 3}" stroke="#111827" stroke-width="2.5"/>`;
}

/** Right of the lane: what the run came to, and when. */
function laneEnd(r: AppliedRunView, y0: number): string {
  const color = r.invariantHeld ? '#15803d' : '#b91c1c';
  return (
    `<text x="${LEFT + PLOT + 12}" y="${y0 + 18}" class="final" fill="${color}">${esc(r.summary)}</text>` +
    `<text x="${LEFT + PLOT + 12}" y="${y0 + 33}" class="sub">final state at ${r.timeToFinal}</text>`
  );
}

function timelineSvg(s: ScenarioView): string {
  // the latest event of the runs, at least 1 s (a loop: a timeline can be long)
  let maxT = 1_000;
  for (const r of s.runs) for (const e of r.timeline) maxT = Math.max(maxT, e.t);
  const span = maxT * 1.03;
  const x = (t: number) => LEFT + (Math.max(0, t) / span) * PLOT;
  const step = niceStep(span);
  const lanes: string[] = [];
  let y = 22;
  for (const r of s.runs) {
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

const DETAIL_COLUMNS = detailColumns(true);

/** What the page opens with: where the configurations differ, from the measurements. */
function differencesHtml({ differences: d }: ReportModel): string {
  const list = d.lines.length
    ? `<p><b>Where the configurations differ</b> (measured in this run; the full table and each scenario below):</p><ul class="diff">${d.lines
        .map((l) => `<li><a href="#${esc(l.scenario)}">${esc(l.scenario)}</a>: ${esc(l.text)}</li>`)
        .join('')}</ul>`
    : '';
  return `${list}${d.closing ? `<p>${esc(d.closing)}</p>` : ''}`;
}

function detailRow(r: RunView): string {
  if (!r.applicable) {
    return `<tr class="na"><td>${esc(r.label)}</td><td>${r.verdict}</td><td colspan="${DETAIL_COLUMNS.length - 2}">${esc(r.reason)}</td></tr>`;
  }
  const failed = r.failures.length ? `<div class="fail">${esc(r.failures.join('; '))}</div>` : '';
  return `<tr class="${r.invariantHeld ? 'ok' : 'bad'}"><td>${esc(r.label)}</td><td class="v">${r.verdict}</td>${r.numbers
    .map((c) => `<td>${esc(c)}</td>`)
    .join('')}<td>${esc(r.note)}${failed}</td></tr>`;
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

const STYLE = `
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
`;

const outcomeClass = (r: RunView) => (!r.applicable ? 'na' : r.invariantHeld ? 'ok' : 'bad');

/** The summary table: scenarios × configurations, one cell per run. */
function summaryTable(model: ReportModel): string {
  const rows = model.scenarios
    .map(
      (s) =>
        `<tr><td><a href="#${s.id}">${esc(s.title)}</a></td>${s.runs
          .map((r) => `<td class="${outcomeClass(r)}">${esc(r.cell)}</td>`)
          .join('')}</tr>`,
    )
    .join('');
  return `<table class="summary"><tr><th>scenario</th>${model.columns.map((c) => `<th>${esc(c.heading)}</th>`).join('')}</tr>${rows}</table>`;
}

/** A scenario's section: what it does, its timeline, and a row per run. */
function section(s: ScenarioView): string {
  return `<section id="${s.id}">
<h2>${esc(s.title)}</h2>
<p><b>Does:</b> ${esc(s.stimulus)}<br><b>Invariant:</b> ${esc(s.invariant)}</p>
${timelineSvg(s)}
<table class="detail"><tr>${DETAIL_COLUMNS.map((c) => `<th>${esc(c)}</th>`).join('')}</tr>${s.runs.map(detailRow).join('')}</table>
</section>`;
}

export function renderHtml(report: LabReport): string {
  const model = reportModel(report);
  const { run } = model;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Comparison lab: RabbitMQ vs SQS</title>
<style>${STYLE}</style></head><body>
<h1>${esc(model.title)}</h1>
${differencesHtml(model)}
<p class="meta">Run ${esc(run.startedAt)} in ${run.duration} on ${esc(run.machine)}.<br>${esc(run.settings)}.<br>Versions: ${esc(run.versions)}.<br><b>${run.allHeld ? 'Every invariant held.' : 'Some invariants FAILED.'}</b></p>
${summaryTable(model)}
<p class="meta">${esc(model.legend)}</p>
${model.cost ? costHtml(model.cost) : ''}
<h2>How to read the timelines</h2>
<p>One lane per configuration, time from the scenario's start. With up to six messages each message has its own row (its id on the left); dashed arcs join a retry to the delivery it produced, labelled with the delay it actually took. Hover a mark for its journal line.</p>
${legendSvg()}
${model.scenarios.map(section).join('\n')}
</body></html>
`;
}
