// Shared helpers: DOM building (text only: nothing from the API is ever
// parsed as markup), the API client, routes and formatting.

export const SVGNS = 'http://www.w3.org/2000/svg';

function setAttrs(el, attrs) {
  if (!attrs) return;
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') {
      const c = Array.isArray(v) ? v.filter(Boolean).join(' ') : String(v);
      if (c) el.setAttribute('class', c);
    } else if (k === 'dataset') {
      for (const [dk, dv] of Object.entries(v)) if (dv !== undefined && dv !== null) el.dataset[dk] = String(dv);
    } else if (k === 'text') {
      el.textContent = String(v);
    } else if (k.startsWith('on') && typeof v === 'function') {
      el.addEventListener(k.slice(2), v);
    } else {
      el.setAttribute(k, v === true ? '' : String(v));
    }
  }
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// h builds an HTML element; strings among the children become text nodes.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

// fill replaces el's children (arrays flattened, null skipped).
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// s builds an SVG element.
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVGNS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

// ---- API client ----

const TOKEN_KEY = 'stormradius.token';

export function getToken() {
  try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch { return ''; }
}

export function setToken(t) {
  try {
    if (t) sessionStorage.setItem(TOKEN_KEY, t);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch { /* storage disabled */ }
}

export class HTTPError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// api calls the REST API: params become the query string (encoded; an
// array repeats its parameter), body is sent as JSON. It answers the
// decoded JSON or throws an HTTPError with the API's message.
export async function api(path, params, opts = {}) {
  const u = new URL('/api/v1' + path, location.origin);
  if (params) {
    for (const [k, v] of Object.entries(params)) {
      if (Array.isArray(v)) {
        for (const x of v) if (x !== undefined && x !== null && x !== '') u.searchParams.append(k, String(x));
      } else if (v !== undefined && v !== null && v !== '') u.searchParams.set(k, String(v));
    }
  }
  const headers = { Accept: 'application/json' };
  const tok = getToken();
  if (tok) headers.Authorization = 'Bearer ' + tok;
  let body;
  if (opts.body !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(opts.body);
  }
  let res;
  try {
    res = await fetch(u, { method: opts.method || 'GET', headers, body, cache: 'no-store', signal: opts.signal });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new HTTPError(0, 'the server did not answer (' + e.message + ')');
  }
  let data = null;
  try { data = await res.json(); } catch { /* not JSON */ }
  if (!res.ok) throw new HTTPError(res.status, (data && typeof data.error === 'string' && data.error) || res.statusText || ('HTTP ' + res.status));
  return data;
}

// ---- routes: #/path?query ----

export function parseHash(hash = location.hash) {
  const raw = hash.replace(/^#/, '');
  const q = raw.indexOf('?');
  let path = q < 0 ? raw : raw.slice(0, q);
  const params = new URLSearchParams(q < 0 ? '' : raw.slice(q + 1));
  if (!path.startsWith('/')) path = '/' + path;
  return { path, params };
}

// Parameters every link keeps: the range and auto-refresh.
export const STICKY = ['from', 'to', 'refresh'];

// link returns the href of a page, keeping the current range.
export function link(path, params = {}) {
  const cur = parseHash().params;
  const p = new URLSearchParams();
  for (const k of STICKY) if (cur.get(k)) p.set(k, cur.get(k));
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === '') p.delete(k);
    else p.set(k, String(v));
  }
  const qs = p.toString();
  return '#' + path + (qs ? '?' + qs : '');
}

// seg encodes one path segment (an id from the API).
export const seg = (x) => encodeURIComponent(String(x));

export const DEFAULT_FROM = 'now-1h';
export const DEFAULT_TO = 'now';

// range returns the current range as the API takes it (RFC 3339, unix
// seconds or now-DURATION: the server resolves "now").
export function range(params = parseHash().params) {
  return { from: params.get('from') || DEFAULT_FROM, to: params.get('to') || DEFAULT_TO };
}

// ---- formatting ----

// num formats a figure: whole numbers with separators, others with two
// decimals (the browser tests format the API's values the same way).
export function num(x) {
  if (x === undefined || x === null || Number.isNaN(x)) return '—';
  if (Number.isInteger(x)) return x.toLocaleString('en-US');
  return x.toFixed(2);
}

export function pct(x) {
  if (x === undefined || x === null || Number.isNaN(x)) return '—';
  return (x * 100).toFixed(1) + '%';
}

export function amp(x) {
  if (!x) return '—';
  return '×' + num(x);
}

const pad = (n) => String(n).padStart(2, '0');

// time formats an instant in UTC: 2026-03-02 10:12 UTC (seconds when not 0).
export function time(v, opts = {}) {
  if (!v) return '—';
  const d = v instanceof Date ? v : new Date(v);
  if (Number.isNaN(d.getTime())) return String(v);
  let t = d.getUTCFullYear() + '-' + pad(d.getUTCMonth() + 1) + '-' + pad(d.getUTCDate()) + ' ' + pad(d.getUTCHours()) + ':' + pad(d.getUTCMinutes());
  if (opts.seconds || d.getUTCSeconds()) t += ':' + pad(d.getUTCSeconds());
  return t + ' UTC';
}

export function clock(ms, long) {
  const d = new Date(ms);
  const hm = pad(d.getUTCHours()) + ':' + pad(d.getUTCMinutes());
  return long ? pad(d.getUTCMonth() + 1) + '-' + pad(d.getUTCDate()) + ' ' + hm : hm;
}

// dur formats nanoseconds.
export function dur(ns) {
  if (ns === 0) return '0';
  const ms = ns / 1e6;
  if (ns < 999500) return (ns / 1e3).toFixed(0) + ' µs';
  if (ms < 1000) return (ms < 10 ? ms.toFixed(2) : ms.toFixed(1)) + ' ms';
  return (ms / 1000).toFixed(2) + ' s';
}

export const nodeName = (n) => n.service + ' ' + n.operation;

// ---- page building blocks ----

export function card(label, value, opts = {}) {
  return h('div', { class: ['card', opts.hot && 'hot'], dataset: { field: opts.field, value: opts.raw } },
    h('span', { class: 'label' }, label),
    h('span', { class: 'value' }, value),
    opts.note ? h('span', { class: 'note' }, opts.note) : null);
}

// table builds a table. cols: [{key, label, num, sort}] where value(row)
// gives the sort value and cell(row) the cell's content (text or node);
// the header's buttons sort by a column. rowAttrs(row) gives the <tr>'s
// attributes.
export function table(cols, rows, opts = {}) {
  const tbody = h('tbody');
  let sortKey = opts.sort || null;
  let dir = opts.dir || 'desc';
  const heads = [];
  const draw = () => {
    let list = rows.slice();
    const col = cols.find((c) => c.key === sortKey);
    if (col && col.value) {
      list.sort((a, b) => {
        const x = col.value(a), y = col.value(b);
        const c = typeof x === 'string' || typeof y === 'string' ? String(x).localeCompare(String(y)) : x - y;
        return dir === 'asc' ? c : -c;
      });
    }
    tbody.replaceChildren(...list.map((r) => {
      const tr = h('tr', opts.rowAttrs ? opts.rowAttrs(r) : null);
      for (const c of cols) {
        const v = c.cell ? c.cell(r) : (c.value ? c.value(r) : '');
        const raw = c.raw ? c.raw(r) : undefined;
        const td = h('td', { class: [c.num && 'num', c.cls && c.cls(r)], dataset: { field: c.key, value: raw } });
        td.append(v instanceof Node ? v : document.createTextNode(c.num && typeof v === 'number' ? num(v) : String(v ?? '')));
        tr.append(td);
      }
      return tr;
    }));
    for (const [c, b] of heads) {
      if (c.key === sortKey) b.dataset.dir = dir; else delete b.dataset.dir;
      b.closest('th').setAttribute('aria-sort', c.key === sortKey ? (dir === 'asc' ? 'ascending' : 'descending') : 'none');
    }
    if (opts.onDraw) opts.onDraw(tbody);
  };
  const thead = h('thead', null, h('tr', null, cols.map((c) => {
    const th = h('th', { class: c.num && 'num', scope: 'col', title: c.title });
    if (c.value && opts.sortable !== false) {
      const b = h('button', { type: 'button', class: 'sort', onclick: () => {
        if (sortKey === c.key) dir = dir === 'asc' ? 'desc' : 'asc';
        else { sortKey = c.key; dir = c.num ? 'desc' : 'asc'; }
        draw();
      } }, c.label);
      heads.push([c, b]);
      th.append(b);
    } else {
      th.append(c.label);
    }
    return th;
  })));
  const t = h('table', { id: opts.id, class: opts.cls }, opts.caption ? h('caption', { class: 'muted' }, opts.caption) : null, thead, tbody);
  draw();
  return h('div', { class: 'table-wrap' }, t);
}

// filterBox filters the rows of a table by the text of a cell ("/" focuses
// it).
export function filterBox(label, onInput) {
  const id = 'filter-' + Math.random().toString(36).slice(2, 8);
  const input = h('input', { id, type: 'search', 'data-filter': '', placeholder: label + ' (press /)', autocomplete: 'off', spellcheck: 'false' });
  input.addEventListener('input', () => onInput(input.value.trim().toLowerCase()));
  return h('div', { class: 'filter' }, h('label', { for: id, class: 'muted' }, 'Filter'), input);
}

export function empty(text) {
  return h('p', { class: 'empty' }, text);
}

export function extLink(u) {
  // Only http(s) links from the server's template: never javascript:.
  try {
    const p = new URL(u);
    if (p.protocol !== 'https:' && p.protocol !== 'http:') return null;
    return p.href;
  } catch {
    return null;
  }
}
