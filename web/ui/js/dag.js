// The call graph of a root API as a layered DAG in SVG: layers by the
// longest path from the root (edges closing a cycle are drawn but not
// layered), the failing owner and the storm path above it highlighted,
// each node with its requests, attempts and amplification.

import { s, h, num, nodeName } from './lib.js';

const key = (n) => n.service + '\u0000' + n.operation;

// layout places the nodes: layer[i], order within layers, and which edges
// are back edges (closing a cycle). It never loops: a DFS with colours.
export function layout(nodes, edges, rootName) {
  const n = nodes.length;
  const idx = new Map(nodes.map((x, i) => [key(x), i]));
  const out = nodes.map(() => []);
  const indeg = new Array(n).fill(0);
  const ends = edges.map((e) => [idx.get(key(e.from)), idx.get(key(e.to))]);
  ends.forEach(([a, b], ei) => {
    if (a === undefined || b === undefined) return;
    out[a].push({ to: b, ei });
    if (a !== b) indeg[b]++;
  });
  let root = nodes.findIndex((x) => nodeName(x) === rootName);
  const state = new Uint8Array(n); // 0 unseen, 1 on the stack, 2 done
  const back = new Set();
  const post = [];
  const seen = [];
  const dfs = (start) => {
    const stack = [[start, 0]];
    state[start] = 1;
    seen.push(start);
    while (stack.length) {
      const top = stack[stack.length - 1];
      const v = top[0];
      if (top[1] < out[v].length) {
        const { to, ei } = out[v][top[1]++];
        if (state[to] === 1) back.add(ei);
        else if (state[to] === 0) {
          state[to] = 1;
          seen.push(to);
          stack.push([to, 0]);
        }
      } else {
        state[v] = 2;
        post.push(v);
        stack.pop();
      }
    }
  };
  if (root >= 0) dfs(root);
  for (let i = 0; i < n; i++) if (state[i] === 0 && indeg[i] === 0) dfs(i);
  for (let i = 0; i < n; i++) if (state[i] === 0) dfs(i);
  const topo = post.slice().reverse();
  const layer = new Array(n).fill(0);
  for (const v of topo) {
    for (const { to, ei } of out[v]) if (!back.has(ei)) layer[to] = Math.max(layer[to], layer[v] + 1);
  }
  const layers = [];
  for (const v of seen) (layers[layer[v]] ||= []).push(v);
  // Order within layers: a few barycentre sweeps over the forward edges.
  const preds = nodes.map(() => []);
  const succs = nodes.map(() => []);
  ends.forEach(([a, b], ei) => {
    if (a === undefined || b === undefined || back.has(ei) || a === b) return;
    preds[b].push(a);
    succs[a].push(b);
  });
  const pos = new Array(n).fill(0);
  const setPos = () => layers.forEach((l) => l.forEach((v, i) => { pos[v] = i; }));
  setPos();
  const bary = (v, nb) => (nb[v].length ? nb[v].reduce((t, u) => t + pos[u], 0) / nb[v].length : pos[v]);
  for (let sweep = 0; sweep < 4; sweep++) {
    const down = sweep % 2 === 0;
    const order = down ? layers.keys() : [...layers.keys()].reverse();
    for (const li of order) {
      if (!layers[li]) continue;
      const nb = down ? preds : succs;
      const bc = new Map(layers[li].map((v) => [v, bary(v, nb)]));
      layers[li].sort((a, b) => bc.get(a) - bc.get(b) || nodeName(nodes[a]).localeCompare(nodeName(nodes[b])));
      layers[li].forEach((v, i) => { pos[v] = i; });
    }
  }
  return { root, layer, layers: layers.filter(Boolean), back, ends, pos };
}

// stormPath returns the edges of the path from the root to the owner that
// had the most retried edges (then the most retried calls), as a set of
// edge indexes, and the nodes on it.
export function stormPath(nodes, edges, lay, owner) {
  const n = nodes.length;
  if (lay.root < 0 || owner < 0) return { edges: new Set(), nodes: new Set() };
  // Longest path in a DAG over topological order (by layer).
  const order = [...Array(n).keys()].sort((a, b) => lay.layer[a] - lay.layer[b]);
  const best = new Array(n).fill(null);
  best[lay.root] = { r: 0, c: 0, via: -1 };
  for (const v of order) {
    if (!best[v]) continue;
    lay.ends.forEach(([a, b], ei) => {
      if (a !== v || lay.back.has(ei) || a === b) return;
      const e = edges[ei];
      const cand = { r: best[v].r + (e.retried_calls > 0 ? 1 : 0), c: best[v].c + e.retried_calls, via: ei };
      const cur = best[b];
      if (!cur || cand.r > cur.r || (cand.r === cur.r && cand.c > cur.c)) best[b] = cand;
    });
  }
  const pe = new Set(), pn = new Set([owner]);
  let v = owner;
  if (!best[v]) return { edges: pe, nodes: new Set() };
  for (let guard = 0; best[v] && best[v].via >= 0 && guard < n; guard++) {
    const ei = best[v].via;
    pe.add(ei);
    v = lay.ends[ei][0];
    pn.add(v);
  }
  return { edges: pe, nodes: pn };
}

const CH = 7.1; // an average character's width at 12–13px
const clip = (t, max) => (t.length > max ? t.slice(0, max - 1) + '…' : t);

// labelWidth is the width of an edge label (11px, at the storm labels'
// weight, the wider) in the page's font, measured on a canvas; by the
// character when there is none.
let measure = null;
function labelWidth(text) {
  try {
    if (!measure) {
      measure = document.createElement('canvas').getContext('2d');
      measure.font = '600 11px ' + getComputedStyle(document.body).fontFamily;
    }
    return Math.ceil(measure.measureText(text).width);
  } catch {
    return Math.ceil(text.length * 7.2);
  }
}


// render draws the graph answer (/api/v1/graph). ownerName names the node
// to highlight (the top owner by default); link(node) gives a node's href.
export function renderDAG(g, opts = {}) {
  const nodes = g.nodes, edges = g.edges;
  const lay = layout(nodes, edges, g.api);
  const ownerName = opts.owner || (g.owners && g.owners.length ? nodeName(g.owners[0]) : '');
  const owner = nodes.findIndex((x) => nodeName(x) === ownerName);
  const path = stormPath(nodes, edges, lay, owner);

  // Per node: calls and attempts of the edges into it.
  const calls = new Array(nodes.length).fill(0), attempts = new Array(nodes.length).fill(0);
  lay.ends.forEach(([a, b], ei) => {
    if (b === undefined || a === undefined) return;
    calls[b] += edges[ei].calls;
    attempts[b] += edges[ei].attempts;
  });
  const stats = nodes.map((x, i) => {
    const into = calls[i] > 0;
    return {
      attempts: into ? attempts[i] : null,
      amp: into ? attempts[i] / calls[i] : null,
      text: 'req ' + num(x.requests) + (into ? ' · att ' + num(attempts[i]) + ' · ×' + (attempts[i] / calls[i]).toFixed(2) : ' · root'),
    };
  });

  // Edge labels: retried calls and amplification, or fail-open.
  const labels = edges.map((e) => {
    const ampE = e.calls ? e.attempts / e.calls : 0;
    return e.retried_calls > 0 ? '↻ ' + num(e.retried_calls) + ' · ×' + ampE.toFixed(2) : (e.fail_open ? 'fail-open' : '');
  });
  const labelW = labels.map((t) => (t ? labelWidth(t) : 0));

  // Geometry: columns are layers, left to right. A forward edge's label
  // goes in a gap between two columns that the edge crosses, where no node
  // is, and a self-call's to the right of its node: each gap is made wide
  // enough for the labels that may go in it (LM clear on each side). The
  // gap after the last column is the right margin.
  const NH = 74, GX = 90, GY = 26, PAD = 24, LM = 8, SELF = 4;
  const width = nodes.map((x, i) => Math.round(Math.min(300, Math.max(170, 24 + Math.max(8.2 * Math.min(x.service.length, 34), CH * Math.min(x.operation.length, 38), 6.7 * stats[i].text.length)))));
  const colW = lay.layers.map((l) => Math.max(...l.map((v) => width[v])));
  const col = new Array(nodes.length);
  lay.layers.forEach((l, li) => l.forEach((v) => { col[v] = li; }));
  const gap = colW.map((_, li) => (li < colW.length - 1 ? GX : PAD));
  lay.ends.forEach(([a, b], ei) => {
    if (a === undefined || b === undefined || !labels[ei]) return;
    if (a === b) gap[col[a]] = Math.max(gap[col[a]], SELF + labelW[ei] + LM);
    else if (!lay.back.has(ei)) for (let g = col[a]; g < col[b]; g++) gap[g] = Math.max(gap[g], labelW[ei] + 2 * LM);
  });
  const colX = [];
  let x = PAD;
  colW.forEach((w, li) => { colX.push(x); x += w + gap[li]; });
  const W = Math.max(x, 300);
  const rows = Math.max(...lay.layers.map((l) => l.length));
  const backCount = lay.back.size;
  const H = PAD * 2 + rows * NH + (rows - 1) * GY + (backCount ? 50 : 0);
  const P = new Array(nodes.length);
  lay.layers.forEach((l, li) => {
    const off = ((rows - l.length) * (NH + GY)) / 2;
    l.forEach((v, i) => { P[v] = { x: colX[li] + (colW[li] - width[v]) / 2, y: PAD + off + i * (NH + GY), w: width[v] }; });
  });

  const svg = s('svg', { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'group', 'aria-label': 'Call graph of ' + g.api });
  const id = 'm' + Math.random().toString(36).slice(2, 8);
  const marker = (name, cls) => s('marker', { id: id + name, class: cls, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 9, markerHeight: 9, markerUnits: 'userSpaceOnUse', orient: 'auto-start-reverse' },
    s('path', { d: 'M0,0 L10,5 L0,10 z' }));
  svg.append(s('defs', null, marker('a', ''), marker('s', 'm-storm'), marker('w', 'm-warn')));

  // A forward edge's route: out of its node, along its row to the edge of
  // its column, then through each column it skips in the free lane (between
  // two nodes, above the first or below the last) nearest its way, and into
  // its node; it turns only in the gaps between columns, so that it passes
  // under no node. route[ei] lists the points: the turns are from point
  // 2k+1 to 2k+2, in the k-th gap it crosses.
  const route = new Array(edges.length);
  lay.ends.forEach(([a, b], ei) => {
    if (a === undefined || b === undefined || a === b || lay.back.has(ei)) return;
    const x1 = P[a].x + P[a].w, y1 = P[a].y + NH / 2, x2 = P[b].x, y2 = P[b].y + NH / 2;
    const pts = [{ x: x1, y: y1 }, { x: colX[col[a]] + colW[col[a]], y: y1 }];
    for (let c = col[a] + 1; c < col[b]; c++) {
      const cx = colX[c] + colW[c] / 2;
      const want = y1 + ((y2 - y1) * (cx - x1)) / (x2 - x1);
      const ys = lay.layers[c].map((v) => P[v].y);
      const lanes = [ys[0] - GY / 2, ...ys.map((y) => y + NH + GY / 2)];
      const lane = lanes.reduce((best, y) => (Math.abs(y - want) < Math.abs(best - want) ? y : best));
      pts.push({ x: colX[c], y: lane }, { x: colX[c] + colW[c], y: lane });
    }
    pts.push({ x: colX[col[b]], y: y2 }, { x: x2, y: y2 });
    route[ei] = pts;
  });

  // Where each label goes (its x is its middle, y its baseline): a
  // self-call's right of its loop, above its node; a back edge's under its
  // curve, below every node; a forward edge's on its line (just above, else
  // just below) in the middle of a gap it crosses, the gap nearest its
  // middle where it meets no label placed before.
  const bottom = PAD + rows * NH + (rows - 1) * GY;
  const at = new Array(edges.length);
  const placed = [];
  const boxOf = (p, w) => ({ l: p.x - w / 2 - 2, r: p.x + w / 2 + 2, t: p.y - 12, b: p.y + 4 });
  const free = (bx) => bx.t >= 0 && bx.b <= H && placed.every((o) => bx.r <= o.l || o.r <= bx.l || bx.b <= o.t || o.b <= bx.t);
  lay.ends.forEach(([a, b], ei) => {
    if (a === undefined || b === undefined || !labels[ei] || a !== b) return;
    at[ei] = { x: P[a].x + P[a].w + SELF + labelW[ei] / 2, y: P[a].y - 6 };
    placed.push(boxOf(at[ei], labelW[ei]));
  });
  lay.ends.forEach(([a, b], ei) => {
    if (!route[ei] || !labels[ei]) return;
    const pts = route[ei];
    const n = col[b] - col[a];
    const order = [...Array(n).keys()].sort((i, j) => Math.abs(i - (n - 1) / 2) - Math.abs(j - (n - 1) / 2) || i - j);
    const cands = order.flatMap((k) => {
      const p = pts[2 * k + 1], q = pts[2 * k + 2];
      const gx = colX[col[a] + k] + colW[col[a] + k] + gap[col[a] + k] / 2, gy = (p.y + q.y) / 2;
      return [{ x: gx, y: gy - 5 }, { x: gx, y: gy + 14 }];
    });
    at[ei] = cands.find((p) => free(boxOf(p, labelW[ei]))) || cands[0];
    placed.push(boxOf(at[ei], labelW[ei]));
  });

  const eg = s('g', { class: 'edges' });
  lay.ends.forEach(([a, b], ei) => {
    if (a === undefined || b === undefined) return;
    const e = edges[ei];
    const isBack = lay.back.has(ei);
    const onPath = path.edges.has(ei);
    const storm = onPath && e.retried_calls > 0;
    const pa = P[a], pb = P[b];
    let d, lx, ly;
    if (a === b) {
      const cx = pa.x + pa.w - 20, cy = pa.y;
      d = `M${cx - 14},${cy} C${cx - 20},${cy - 30} ${cx + 26},${cy - 30} ${cx + 14},${cy}`;
    } else if (isBack) {
      const x1 = pa.x + pa.w / 2, y1 = pa.y + NH, x2 = pb.x + pb.w / 2, y2 = pb.y + NH;
      const yb = bottom + 40;
      d = `M${x1},${y1} C${x1},${yb} ${x2},${yb} ${x2},${y2}`;
      lx = (x1 + x2) / 2; ly = yb - 8;
    } else {
      const pts = route[ei];
      d = `M${pts[0].x},${pts[0].y}`;
      for (let i = 1; i < pts.length; i++) {
        const p = pts[i - 1], q = pts[i];
        if (q.x === p.x && q.y === p.y) continue;
        const xm = (p.x + q.x) / 2;
        d += q.y === p.y ? ` L${q.x},${q.y}` : ` C${xm},${p.y} ${xm},${q.y} ${q.x},${q.y}`;
      }
    }
    if (at[ei]) { lx = at[ei].x; ly = at[ei].y; }
    const ampE = e.calls ? e.attempts / e.calls : 0;
    const label = labels[ei];
    const title = nodeName(e.from) + ' → ' + nodeName(e.to) + '\n' +
      num(e.calls) + ' calls, ' + num(e.attempts) + ' attempts (×' + ampE.toFixed(2) + '), ' + num(e.retried_calls) + ' retried, ' +
      num(e.failed_calls) + ' failed, max ' + num(e.max_attempts) + ' attempts' +
      (e.retry_enabled ? ', retry-enabled' : '') + (e.suppressed_calls ? ', ' + num(e.suppressed_calls) + ' retries suppressed' : '') +
      '\n' + (e.fail_open ? 'fail-open' : 'fail-close') + ' (' + (e.fail_open_source || 'default') + ')' +
      (isBack ? '\ncloses a cycle' : '') + (storm ? '\non the storm path' : '');
    const m = storm ? 's' : e.retried_calls > 0 ? 'w' : 'a';
    eg.append(s('g', {
      class: ['edge', isBack && 'back', e.fail_open && 'fail-open', e.retried_calls > 0 && 'retried', onPath && 'path', storm && 'storm'],
      dataset: { from: nodeName(e.from), to: nodeName(e.to), calls: e.calls, attempts: e.attempts },
    },
    s('title', null, title),
    s('path', { class: 'line', d, 'marker-end': `url(#${id}${m})` }),
    label ? s('text', { x: lx, y: ly, 'text-anchor': 'middle' }, label) : null));
  });
  svg.append(eg);

  const ng = s('g', { class: 'nodes' });
  nodes.forEach((nd, i) => {
    const p = P[i];
    const isOwner = i === owner, isRoot = i === lay.root;
    const st = stats[i];
    const maxc = Math.floor((p.w - 20) / 8.2);
    const title = nodeName(nd) + '\n' + num(nd.requests) + ' requests, ' + num(nd.failed) + ' failed' +
      (st.attempts !== null ? '\n' + num(st.attempts) + ' attempts into it for ' + num(calls[i]) + ' calls: amplification ×' + st.amp.toFixed(2) : '\nthe root API') +
      (isOwner ? '\nthe failing owner' : '');
    const body = s('g', {
      class: ['node', isRoot && 'root', isOwner && 'owner', nd.failed > 0 && 'failing', path.nodes.has(i) && 'on-path'],
      transform: `translate(${p.x},${p.y})`,
      dataset: { node: nodeName(nd), service: nd.service, requests: nd.requests, failed: nd.failed, attempts: st.attempts ?? '', amplification: st.amp ?? '' },
    },
    s('title', null, title),
    s('rect', { width: p.w, height: NH, rx: 7 }),
    s('text', { class: 'svc', x: 10, y: 19 }, clip(nd.service, maxc)),
    s('text', { class: 'op', x: 10, y: 35 }, clip(nd.operation, Math.floor((p.w - 20) / CH))),
    s('text', { class: 'stats', x: 10, y: 52 }, st.text),
    nd.failed > 0 ? s('text', { class: 'fails', x: 10, y: 67 }, '✕ ' + num(nd.failed) + ' failed') : null,
    isOwner ? s('text', { class: 'tag', x: p.w - 8, y: 67, 'text-anchor': 'end' }, 'OWNER') : (isRoot ? s('text', { class: 'tag', x: p.w - 8, y: 67, 'text-anchor': 'end' }, 'ROOT') : null));
    ng.append(opts.link ? s('a', { href: opts.link(nd), 'aria-label': title }, body) : body);
  });
  svg.append(ng);

  const legend = h('div', { class: 'legend' },
    h('span', null, h('span', { class: 'key k-owner' }), 'failing owner'),
    h('span', null, h('span', { class: 'key k-storm' }), 'storm path (retried)'),
    h('span', null, h('span', { class: 'key k-failing' }), 'node with failures'),
    h('span', null, h('span', { class: 'key k-open' }), 'fail-open / cycle'),
    h('span', null, 'req: requests served · att: attempts into it · ×: amplification (attempts / calls)'));
  return { el: h('div', null, legend, h('div', { class: 'dag panel', dataset: { nodes: nodes.length, owner: ownerName } }, svg)), owner: ownerName, path };
}

// perRoot formats requests per root request (up to three decimals, as the
// what-if table does).
const perRoot = (x) => (typeof x === 'number' ? x.toLocaleString('en-US', { maximumFractionDigits: 3 }) : '—');

// attemptsText prints attempts per call: 2, 1.1 (two decimals at most).
function attemptsText(x) { return String(Math.round((Number(x) || 1) * 100) / 100); }

// renderStormPath draws a storm path of the adoption plan (its API, the
// failing node, and the hops from the root down to it, before and after a
// step) as two rows of hops: each hop with the requests it serves per root
// request, each call into a hop marked "↻ retried ×N" (N attempts per
// call; the storm colour, as on the call graph) or "→ not retried". A hop
// whose requests the step changes says what it served before. Everything
// is text.
export function renderStormPath(path, opts = {}) {
  const row = (when, label, hops, other) => h('div', { class: 'path-row', dataset: { when } },
    h('span', { class: 'path-when', 'aria-hidden': 'true' }, label),
    h('ol', { class: 'storm-path', 'aria-label': label + ': the storm path from ' + path.api + ' to ' + path.failing },
      (hops || []).map((hp, i) => {
        const failing = hp.node === path.failing;
        const o = other && other[i] && other[i].node === hp.node ? other[i] : null;
        return h('li', { class: ['hop', i > 0 && hp.retried && 'retried', i === 0 && 'root', failing && 'failing'], dataset: { node: hp.node, requests: hp.requests, retried: String(!!hp.retried) } },
          i > 0 ? h('span', { class: ['call', hp.retried ? 'retried' : 'plain'], title: hp.retried ? 'the call into ' + hp.node + ' is retried: ' + attemptsText(hp.attempts) + ' attempts per call' : 'the call into ' + hp.node + ' is not retried' },
            hp.retried ? '↻ retried ×' + attemptsText(hp.attempts) : '→ not retried') : null,
          h('span', { class: 'hop-box' },
            h('span', { class: 'hop-node' }, hp.node),
            h('span', { class: 'hop-req' }, perRoot(hp.requests) + ' req',
              o && o.requests !== hp.requests ? h('span', { class: 'hop-was' }, ' (was ' + perRoot(o.requests) + ')') : null),
            i === 0 || failing ? h('span', { class: 'hop-tag' }, [i === 0 ? 'ROOT' : null, failing ? 'FAILING' : null].filter(Boolean).join(' · ')) : null));
      })));
  return h('div', { class: 'plan-path panel', dataset: { api: path.api, failing: path.failing } },
    row('before', opts.before || 'Before', path.before, null),
    row('after', opts.after || 'After', path.after, path.before),
    h('div', { class: 'legend' },
      h('span', null, h('span', { class: 'key k-storm' }), '↻ retried: the call into the hop is retried'),
      h('span', null, h('span', { class: 'key k-failing' }), 'the failing node'),
      h('span', null, 'req: requests the hop serves per root request while the failing node fails')));
}
