// Charts in SVG: a sparkline for the fleet table and time charts for an
// API's radius and traces.

import { s, h, num, clock, time } from './lib.js';

// sparkline draws values (one per step) as a line over an area.
export function sparkline(values, opts = {}) {
  const W = opts.width || 120, H = opts.height || 26, P = 2;
  const max = Math.max(opts.max || 0, ...values, 1);
  const n = values.length;
  const x = (i) => P + (n <= 1 ? 0 : (i * (W - 2 * P)) / (n - 1));
  const y = (v) => H - P - (v / max) * (H - 2 * P);
  const pts = values.map((v, i) => x(i).toFixed(1) + ',' + y(v).toFixed(1)).join(' ');
  const svg = s('svg', { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': opts.label || 'trend' },
    s('title', null, opts.label || ''),
    s('line', { class: 'base', x1: P, x2: W - P, y1: H - P, y2: H - P }),
    n > 0 ? s('polygon', { class: 'area', points: `${x(0)},${H - P} ${pts} ${x(n - 1)},${H - P}` }) : null,
    n > 0 ? s('polyline', { class: 'line', points: pts }) : null);
  return h('span', { class: 'spark' }, svg);
}

function niceMax(v) {
  if (v <= 5) return Math.max(1, Math.ceil(v));
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

// timeChart draws series over time. points: [{t (ms)}]; lines: [{label,
// cls, values, step}]; bars: [{label, cls, values}] (drawn behind, the
// second one over the first); refs: [{value, label}] horizontal lines.
export function timeChart(opts) {
  const W = opts.width || 1200, H = opts.height || 220;
  const L = 44, R = 16, T = 12, B = 26;
  const pts = opts.points;
  const n = pts.length;
  const stepMs = opts.stepMs || (n > 1 ? pts[1].t - pts[0].t : 60000);
  const t0 = n ? pts[0].t : 0, t1 = n ? pts[n - 1].t + stepMs : 1;
  const xs = (t) => L + ((t - t0) / (t1 - t0 || 1)) * (W - L - R);
  let vmax = 0;
  for (const l of opts.lines || []) for (const v of l.values) vmax = Math.max(vmax, v);
  for (const b of opts.bars || []) for (const v of b.values) vmax = Math.max(vmax, v);
  for (const r of opts.refs || []) vmax = Math.max(vmax, r.value);
  const ymax = niceMax(vmax * 1.05 || 1);
  const ys = (v) => H - B - (v / ymax) * (H - T - B);
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': opts.label });
  svg.append(s('title', null, opts.label));
  // grid and y axis
  const grid = s('g', { class: 'grid' });
  const axis = s('g', { class: 'axis' });
  const ticks = opts.integer && ymax <= 8 ? ymax : 4;
  for (let i = 0; i <= ticks; i++) {
    const v = (ymax * i) / ticks;
    grid.append(s('line', { x1: L, x2: W - R, y1: ys(v), y2: ys(v) }));
    axis.append(s('text', { x: L - 6, y: ys(v) + 4, 'text-anchor': 'end' }, num(Number.isInteger(v) ? v : Math.round(v * 100) / 100)));
  }
  // x axis: about 8 labels
  const long = t1 - t0 > 36 * 3600e3;
  const every = Math.max(1, Math.ceil(n / 8));
  for (let i = 0; i < n; i += every) {
    axis.append(s('text', { x: xs(pts[i].t), y: H - 8, 'text-anchor': i === 0 ? 'start' : 'middle' }, clock(pts[i].t, long)));
  }
  svg.append(grid, axis);
  // bars
  const bw = Math.max(1, ((W - L - R) / Math.max(n, 1)) * 0.7);
  for (const b of opts.bars || []) {
    const g = s('g', { class: b.cls });
    b.values.forEach((v, i) => {
      if (v > 0) g.append(s('rect', { x: xs(pts[i].t) + ((W - L - R) / Math.max(n, 1) - bw) / 2, y: ys(v), width: bw, height: ys(0) - ys(v) }));
    });
    svg.append(g);
  }
  // reference lines
  for (const r of opts.refs || []) {
    svg.append(s('line', { class: 'ref', x1: L, x2: W - R, y1: ys(r.value), y2: ys(r.value) }));
    svg.append(s('text', { class: 'ref-label', x: W - R - 4, y: ys(r.value) - 4, 'text-anchor': 'end' }, r.label));
  }
  // lines
  for (const l of opts.lines || []) {
    let d = '';
    l.values.forEach((v, i) => {
      const xa = xs(pts[i].t), xb = xs(pts[i].t + stepMs), y = ys(v);
      if (l.step) d += (i === 0 ? 'M' : 'L') + xa.toFixed(1) + ',' + y.toFixed(1) + 'L' + xb.toFixed(1) + ',' + y.toFixed(1);
      else d += (i === 0 ? 'M' : 'L') + ((xa + xb) / 2).toFixed(1) + ',' + y.toFixed(1);
    });
    if (d) svg.append(s('path', { class: 'line ' + l.cls, d }));
  }
  // hover targets with the step's figures
  const hover = s('g');
  pts.forEach((p, i) => {
    const parts = [(opts.lines || []).concat(opts.bars || []).map((l) => l.label + ' ' + num(l.values[i]))].flat();
    hover.append(s('rect', { class: 'hover', x: xs(p.t), y: T, width: Math.max(1, xs(p.t + stepMs) - xs(p.t)), height: H - T - B },
      s('title', null, time(p.t) + ': ' + parts.join(', '))));
  });
  svg.append(hover);
  const legend = h('div', { class: 'legend' },
    (opts.lines || []).map((l) => h('span', null, h('span', { class: 'key k-' + l.key }), l.label)),
    (opts.bars || []).map((b) => h('span', null, h('span', { class: 'key k-' + b.key }), b.label)),
    (opts.refs || []).map((r) => h('span', null, h('span', { class: 'key k-ref' }), r.label)));
  return h('div', { class: 'chart', dataset: { chart: opts.name } }, legend, svg);
}

// TICK_STEPS are the steps of a time axis: whole minutes, hours, days.
const TICK_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440, 2880, 10080].map((m) => m * 60000);

// timeTicks returns the round instants (multiples of a step from
// TICK_STEPS, in UTC) within [t0, t1], at most max of them: labels at a
// minute's precision or coarser, each naming the instant it is drawn at,
// and no two alike.
export function timeTicks(t0, t1, max) {
  const week = TICK_STEPS[TICK_STEPS.length - 1];
  const step = TICK_STEPS.find((st) => Math.floor(t1 / st) - Math.ceil(t0 / st) + 1 <= max) ||
    Math.ceil((t1 - t0) / (max - 1) / week) * week;
  const out = [];
  for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) out.push(t);
  return out;
}

// incidentTimeline draws incidents as bars per owner over time: hot
// minutes solid (the storm colour when the radius went past 1), the quiet
// minutes that closed it faint, an open one with an arrow.
export function incidentTimeline(list, href) {
  const W = 1200, L = 230, R = 20, RH = 28, T = 6, B = 24;
  const starts = list.map((d) => Date.parse(d.start));
  const ends = list.map((d) => Date.parse(d.closed_at || d.end));
  let t0 = Math.min(...starts), t1 = Math.max(...ends);
  const pad = (t1 - t0) * 0.04 || 60000;
  t0 -= pad; t1 += pad;
  const owners = [...new Set(list.map((d) => d.service + ' ' + d.operation))].sort();
  const H = T + owners.length * RH + B;
  const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - R);
  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, role: 'group', 'aria-label': 'Incidents over time, per owner' });
  const grid = s('g', { class: 'grid' }), axis = s('g', { class: 'axis' });
  const long = t1 - t0 > 36 * 3600e3;
  const half = long ? 36 : 16; // about half a label's width
  for (const t of timeTicks(t0, t1, 7)) {
    const xt = x(t);
    grid.append(s('line', { x1: xt, x2: xt, y1: T, y2: H - B }));
    axis.append(s('text', { x: xt, y: H - 7, 'text-anchor': xt - half < L ? 'start' : xt + half > W - R ? 'end' : 'middle' }, clock(t, long)));
  }
  svg.append(grid, axis);
  owners.forEach((o, i) => {
    svg.append(s('text', { class: 'owner-label', x: 8, y: T + i * RH + RH / 2 + 4 }, o.length > 32 ? o.slice(0, 31) + '…' : o, s('title', null, o)));
  });
  list.forEach((d, k) => {
    const row = owners.indexOf(d.service + ' ' + d.operation);
    const y = T + row * RH + 5, hgt = RH - 10;
    const xa = x(starts[k]), xb = x(Date.parse(d.end)), xc = x(ends[k]);
    const title = d.service + ' ' + d.operation + ': ' + time(d.start) + ' – ' + time(d.end) + (d.open ? ' (open)' : '') +
      ', max radius ' + d.max_radius + ', max amplification ×' + num(d.max_amplification) + ', ' + num(d.owned_failures) + ' owned failures';
    const g = s('g', { class: ['inc', d.max_radius > 1 && 'storm', d.open && 'open'] },
      s('title', null, title),
      !d.open && xc > xb ? s('rect', { class: 'quiet', x: xb, y: y + hgt / 3, width: xc - xb, height: hgt / 3 }) : null,
      s('rect', { class: 'hot', x: xa, y, width: Math.max(3, xb - xa), height: hgt, rx: 3 }),
      d.open ? s('path', { class: 'hot', d: `M${xb},${y} l8,${hgt / 2} l-8,${hgt / 2} z` }) : null,
      xb - xa > 70 ? s('text', { x: xa + 6, y: y + hgt / 2 + 4 }, 'r ' + d.max_radius + ' · ×' + num(d.max_amplification)) : null);
    svg.append(href ? s('a', { href: href(d), 'aria-label': title }, g) : g);
  });
  return h('div', { class: 'chart timeline', dataset: { chart: 'incidents' } },
    h('div', { class: 'legend' },
      h('span', null, h('span', { class: 'key k-hot' }), 'hot minutes (radius 1)'),
      h('span', null, h('span', { class: 'key k-storm' }), 'hot minutes (radius > 1)'),
      h('span', null, h('span', { class: 'key k-quiet' }), 'quiet minutes until it closed')),
    svg);
}
