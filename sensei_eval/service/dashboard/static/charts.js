// Small SVG charts (no chart library, nothing downloaded): horizontal bars, a histogram and a line.
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

/** Vertical bars for the score distribution, coloured by the badge bands (0-49, 50-74, 75-100). */
export function histogram(buckets, { name }) {
  const total = buckets.reduce((a, b) => a + b.count, 0);
  if (!total) return empty('No scores under the current criteria yet.');
  const height = 220;
  const base = height - 30;
  const max = Math.max(...buckets.map((b) => b.count), 1);
  const slot = (W - 20) / buckets.length;
  const svg = s('svg', { viewBox: `0 0 ${W} ${height}`, class: 'chart', role: 'img', 'aria-label': name, 'data-chart': name });
  svg.append(s('line', { x1: 10, y1: base, x2: W - 10, y2: base, class: 'axis' }));
  buckets.forEach((b, i) => {
    const barH = ((base - 20) * b.count) / max;
    const x = 10 + i * slot + 4;
    const low = parseInt(b.label, 10);
    const band = low >= 75 ? 'good' : low >= 50 ? 'weak' : 'bad';
    svg.append(
      s('rect', { x, y: base - barH, width: slot - 8, height: Math.max(barH, 0), class: `bar ${band}` }, s('title', {}, `${b.label}: ${b.count}`)),
      s('text', { x: x + (slot - 8) / 2, y: base + 16, 'text-anchor': 'middle', class: 'tick' }, b.label),
    );
    if (b.count) svg.append(s('text', { x: x + (slot - 8) / 2, y: base - barH - 4, 'text-anchor': 'middle', class: 'value' }, String(b.count)));
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
