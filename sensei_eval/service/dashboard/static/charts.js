// Small SVG charts (no chart library, nothing downloaded): bars, rate bars, count bars and lines, with
// axes, tooltips (<title>) and, where given, a link from each bar or point to the runs behind it.
// Labels are untrusted text (tool names from a judge): they go in as text nodes via `s()`.

import { h, s } from './dom.js';

const W = 560;

function empty(message) {
  return h('p', { class: 'muted empty', text: message });
}

/** Horizontal bars, one per {label, count}, longest first as given. */
export function barChart(bars, { name, emptyText = 'No data yet.' } = {}) {
  if (!bars.length) return empty(emptyText);
  const rowH = 26;
  const labelW = 200;
  const max = Math.max(...bars.map((b) => b.count), 1);
  const height = bars.length * rowH + 8;
  const svg = s('svg', { viewBox: `0 0 ${W} ${height}`, class: 'chart', role: 'img', 'aria-label': name, 'data-chart': name });
  bars.forEach((bar, i) => {
    const y = i * rowH + 4;
    const width = Math.max(2, ((W - labelW - 50) * bar.count) / max);
    svg.append(
      s('text', { x: labelW - 8, y: y + 16, 'text-anchor': 'end', class: 'label' }, truncateLabel(bar.label, 30)),
      s('rect', { x: labelW, y, width, height: rowH - 8, rx: 3, class: 'bar' }, s('title', {}, `${bar.label}: ${bar.count}`)),
      s('text', { x: labelW + width + 6, y: y + 16, class: 'value' }, String(bar.count)),
    );
  });
  return svg;
}

/** Mean score per day, 0-100 on the y axis. */
export function lineChart(points, { name }) {
  if (!points.length) return empty('No scores under the current criteria yet.');
  const height = 220;
  const left = 36;
  const top = 12;
  const bottom = height - 30;
  const right = W - 16;
  const x = (i) => (points.length === 1 ? (left + right) / 2 : left + ((right - left) * i) / (points.length - 1));
  const y = (v) => bottom - ((bottom - top) * v) / 100;
  const svg = s('svg', { viewBox: `0 0 ${W} ${height}`, class: 'chart', role: 'img', 'aria-label': name, 'data-chart': name });
  for (const v of [0, 50, 75, 100]) {
    svg.append(s('line', { x1: left, y1: y(v), x2: right, y2: y(v), class: 'grid' }), s('text', { x: left - 6, y: y(v) + 4, 'text-anchor': 'end', class: 'tick' }, String(v)));
  }
  svg.append(s('polyline', { points: points.map((p, i) => `${x(i)},${y(p.mean_score)}`).join(' '), class: 'line' }));
  const every = Math.ceil(points.length / 8);
  points.forEach((p, i) => {
    svg.append(s('circle', { cx: x(i), cy: y(p.mean_score), r: 4, class: 'dot' }, s('title', {}, `${p.day}: mean ${p.mean_score} over ${p.count} session(s)`)));
    if (i % every === 0) svg.append(s('text', { x: x(i), y: bottom + 18, 'text-anchor': 'middle', class: 'tick' }, p.day.slice(5)));
  });
  return svg;
}

function truncateLabel(text, n) {
  const t = String(text);
  return t.length > n ? `${t.slice(0, n - 1)}…` : t;
}

// ---------------------------------------------------------------------------------------------------
// Rates (pass or failure rates with their denominators), over time, and clickable bars

const SERIES = 8; // series colours: classes s0..s7 in style.css (no inline style under the page's CSP)

function pct(v) {
  return `${Math.round(v * 100)}%`;
}

/** A link around an SVG element when `href` is given (a bar that leads to the runs behind it). */
function linked(href, el, label) {
  if (!href) return el;
  return s('a', { href, class: 'bar-link', 'aria-label': label }, el);
}

/** Horizontal rate bars, 0-100% on a labelled x axis: one per {label, count, total, rate}; `href(bar)` makes each a link. */
export function rateChart(rates, { name, axis = 'rate', emptyText = 'No data yet.', href = null, tone = 'bar' } = {}) {
  const shown = rates.filter((r) => r.rate !== null && r.rate !== undefined);
  if (!shown.length) return empty(emptyText);
  const rowH = 26;
  const labelW = 180;
  const right = W - 110;
  const top = 6;
  const height = shown.length * rowH + top + 40;
  const x = (v) => labelW + (right - labelW) * v;
  const svg = s('svg', { viewBox: `0 0 ${W} ${height}`, class: 'chart', role: 'img', 'aria-label': name, 'data-chart': name });
  const base = top + shown.length * rowH;
  for (const v of [0, 0.25, 0.5, 0.75, 1]) {
    svg.append(
      s('line', { x1: x(v), y1: top, x2: x(v), y2: base, class: 'grid' }),
      s('text', { x: x(v), y: base + 14, 'text-anchor': 'middle', class: 'tick' }, pct(v)),
    );
  }
  svg.append(s('text', { x: (labelW + right) / 2, y: base + 32, 'text-anchor': 'middle', class: 'axis-title' }, axis));
  shown.forEach((r, i) => {
    const y = top + i * rowH + 4;
    const width = Math.max(2, x(r.rate) - labelW);
    const extra = (r.errors ? ` · ${r.errors} error(s)` : '') + (r.inconclusive ? ` · ${r.inconclusive} inconclusive` : '');
    const tip = `${r.label}: ${pct(r.rate)} (${r.count} of ${r.total})${extra}`;
    const link = href ? href(r) : null;
    svg.append(
      s('text', { x: labelW - 8, y: y + 14, 'text-anchor': 'end', class: 'label' }, truncateLabel(String(r.label).replaceAll('_', ' '), 26)),
      linked(link, s('rect', { x: labelW, y, width, height: rowH - 10, rx: 3, class: `bar ${tone}`, 'data-label': r.label }, s('title', {}, tip)), tip),
      s('text', { x: labelW + width + 6, y: y + 13, class: 'value' }, `${pct(r.rate)} (${r.count}/${r.total})`),
    );
  });
  return svg;
}

/** One line per series of {period, until, failed, evaluated, rate}, 0-100% on the y axis; `href(point, group)` links each dot. */
export function rateLines(series, { name, emptyText = 'No data yet.', href = null } = {}) {
  if (!series.length) return empty(emptyText);
  const periods = [...new Set(series.flatMap((sr) => sr.points.map((p) => p.period)))].sort();
  const height = 250;
  const left = 60;
  const top = 12;
  const bottom = height - 58;
  const right = W - 16;
  const x = (p) => {
    const i = periods.indexOf(p);
    return periods.length === 1 ? (left + right) / 2 : left + ((right - left) * i) / (periods.length - 1);
  };
  const y = (v) => bottom - (bottom - top) * v;
  const svg = s('svg', { viewBox: `0 0 ${W} ${height}`, class: 'chart', role: 'img', 'aria-label': name, 'data-chart': name });
  for (const v of [0, 0.25, 0.5, 0.75, 1]) {
    svg.append(s('line', { x1: left, y1: y(v), x2: right, y2: y(v), class: 'grid' }), s('text', { x: left - 6, y: y(v) + 4, 'text-anchor': 'end', class: 'tick' }, pct(v)));
  }
  svg.append(s('text', { x: 12, y: (top + bottom) / 2, 'text-anchor': 'middle', class: 'axis-title', transform: `rotate(-90 12 ${(top + bottom) / 2})` }, 'runs failed'));
  const every = Math.ceil(periods.length / 8);
  periods.forEach((p, i) => {
    if (i % every === 0) svg.append(s('text', { x: x(p), y: bottom + 16, 'text-anchor': 'middle', class: 'tick' }, p.slice(5)));
  });
  series.forEach((sr, k) => {
    const color = `s${k % SERIES}`;
    svg.append(s('polyline', { points: sr.points.map((p) => `${x(p.period)},${y(p.rate)}`).join(' '), class: `line ${color}` }));
    for (const p of sr.points) {
      const tip = `${sr.group} · ${p.period === p.until ? p.period : `${p.period} – ${p.until}`}: ${pct(p.rate)} failed (${p.failed} of ${p.evaluated})`;
      svg.append(linked(href ? href(p, sr.group) : null, s('circle', { cx: x(p.period), cy: y(p.rate), r: 5, class: `dot ${color}`, 'data-group': sr.group }, s('title', {}, tip)), tip));
    }
  });
  // legend under the axis
  let lx = left;
  series.forEach((sr, k) => {
    const color = `s${k % SERIES}`;
    const label = truncateLabel(sr.group, 22);
    svg.append(s('rect', { x: lx, y: bottom + 30, width: 10, height: 10, class: `key ${color}` }), s('text', { x: lx + 14, y: bottom + 39, class: 'tick' }, label));
    lx += 24 + label.length * 7;
  });
  return svg;
}

/** Vertical bars with a count axis: one per {label, count}; `href(bar)` links each; `bands` colours by score band. */
export function countBars(bars, { name, axis = '', emptyText = 'No data yet.', href = null, band = null } = {}) {
  const total = bars.reduce((a, b) => a + b.count, 0);
  if (!total) return empty(emptyText);
  const height = 230;
  const left = 36;
  const base = height - 44;
  const top = 16;
  const max = Math.max(...bars.map((b) => b.count), 1);
  const slot = (W - left - 10) / bars.length;
  const svg = s('svg', { viewBox: `0 0 ${W} ${height}`, class: 'chart', role: 'img', 'aria-label': name, 'data-chart': name });
  const ticks = [...new Set([0, Math.ceil(max / 2), max])];
  for (const t of ticks) {
    const ty = base - ((base - top) * t) / max;
    svg.append(s('line', { x1: left, y1: ty, x2: W - 10, y2: ty, class: 'grid' }), s('text', { x: left - 6, y: ty + 4, 'text-anchor': 'end', class: 'tick' }, String(t)));
  }
  svg.append(s('text', { x: (left + W) / 2, y: height - 6, 'text-anchor': 'middle', class: 'axis-title' }, axis));
  bars.forEach((b, i) => {
    const barH = ((base - top) * b.count) / max;
    const x = left + i * slot + 4;
    const tip = `${b.label}: ${b.count} run(s)`;
    const cls = band ? `bar ${band(b)}` : 'bar';
    svg.append(
      linked(href && b.count ? href(b) : null, s('rect', { x, y: base - barH, width: slot - 8, height: Math.max(barH, 0), class: cls, 'data-label': b.label }, s('title', {}, tip)), tip),
      s('text', { x: x + (slot - 8) / 2, y: base + 16, 'text-anchor': 'middle', class: 'tick' }, b.label),
    );
    if (b.count) svg.append(s('text', { x: x + (slot - 8) / 2, y: base - barH - 4, 'text-anchor': 'middle', class: 'value' }, String(b.count)));
  });
  return svg;
}
