// The shell: routes (#/path?query, the range in the query so that links
// share it), the range picker, auto-refresh, the theme toggle, the token
// form and keyboard shortcuts.

import { h, parseHash, range, link, getToken, setToken, time, DEFAULT_FROM, DEFAULT_TO } from './lib.js';
import { fleetPage, apiPage, incidentsPage, incidentPage, servicesPage, whatifPage, planPage } from './pages.js';
import { tracePage } from './trace.js';

const routes = [
  { re: /^\/$/, page: 'fleet', nav: 'fleet', title: 'Fleet', fn: fleetPage },
  { re: /^\/api$/, page: 'api', nav: 'fleet', title: 'API', fn: apiPage },
  { re: /^\/incidents$/, page: 'incidents', nav: 'incidents', title: 'Incidents', fn: incidentsPage },
  { re: /^\/incidents\/([^/]+)$/, page: 'incident', nav: 'incidents', title: 'Incident', fn: incidentPage },
  { re: /^\/traces\/([^/]+)$/, page: 'trace', nav: '', title: 'Trace', fn: tracePage },
  { re: /^\/services$/, page: 'services', nav: 'services', title: 'Services', fn: servicesPage },
  { re: /^\/whatif$/, page: 'whatif', nav: 'whatif', title: 'What-if', fn: whatifPage, noAutoRefresh: true },
  { re: /^\/plan$/, page: 'plan', nav: 'plan', title: 'Plan', fn: planPage, noAutoRefresh: true },
];

const PRESETS = [['15m', 'now-15m'], ['1h', 'now-1h'], ['6h', 'now-6h'], ['24h', 'now-24h'], ['7d', 'now-168h']];
const AUTO_KEY = 'stormradius.autorefresh';
const AUTO_MS = 30000;

const $ = (id) => document.getElementById(id);
const app = $('app');

// A deep link to a path (/traces/ID) becomes the hash route.
const redirecting = location.pathname !== '/' && location.pathname !== '/index.html' && !location.hash;
if (redirecting) location.replace('/#' + location.pathname + location.search);

function match(path) {
  for (const r of routes) {
    const m = r.re.exec(path);
    if (m) {
      let rest = '';
      try { rest = m[1] ? decodeURIComponent(m[1]) : ''; } catch { rest = m[1]; }
      return { route: r, rest };
    }
  }
  return null;
}

function hrefWith(changes) {
  const { path, params } = parseHash();
  for (const [k, v] of Object.entries(changes)) {
    if (v === '' || v === null) params.delete(k); else params.set(k, v);
  }
  const qs = params.toString();
  return '#' + path + (qs ? '?' + qs : '');
}

function updateHeader(route) {
  const { params } = parseHash();
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (route && a.dataset.nav === route.nav) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
    a.setAttribute('href', link(a.getAttribute('href').split('?')[0].replace(/^#/, '') || '/'));
  }
  $('brand').setAttribute('href', link('/'));
  const r = range(params);
  const presets = $('presets');
  presets.replaceChildren(...PRESETS.map(([label, from]) => {
    const on = r.from === from && r.to === 'now';
    return h('a', { href: hrefWith({ from, to: 'now' }), 'aria-current': on ? 'true' : null, title: 'The last ' + label }, label);
  }));
  $('range-from').value = r.from;
  $('range-to').value = r.to;
  const pressed = autoOn();
  $('auto').setAttribute('aria-pressed', String(pressed));
  $('forget').hidden = !getToken();
  $('theme').textContent = effectiveTheme() === 'dark' ? 'Light' : 'Dark';
  $('theme').setAttribute('aria-label', 'Switch to the ' + (effectiveTheme() === 'dark' ? 'light' : 'dark') + ' theme');
}

// ---- rendering ----

let generation = 0;
let controller = null;

function authForm(err) {
  app.dataset.state = 'auth';
  app.removeAttribute('aria-busy');
  const input = h('input', { type: 'password', id: 'token', name: 'token', autocomplete: 'off', required: true, 'aria-describedby': 'token-why' });
  const had = !!getToken();
  app.replaceChildren(h('section', { class: 'token panel' },
    h('h1', null, 'A token is needed'),
    h('p', { id: 'token-why' }, had ? 'The API refused the token (' + err.message + '). Enter another one.' : 'This stormradius API asks for a bearer token. It is kept for this browser tab only (sessionStorage).'),
    h('form', { id: 'token-form', onsubmit: (ev) => { ev.preventDefault(); setToken(input.value.trim()); render(); } },
      h('label', { for: 'token', class: 'muted' }, 'Token'), input, h('button', { type: 'submit', class: 'primary' }, 'Use token'))));
  if (had) setToken('');
  input.focus();
}

async function render(opts = {}) {
  const my = ++generation;
  if (controller) controller.abort();
  controller = new AbortController();
  const { path, params } = parseHash();
  const m = match(path);
  updateHeader(m && m.route);
  if (!m) {
    app.dataset.page = 'notfound';
    app.dataset.state = 'ready';
    app.replaceChildren(h('h1', null, 'No such page'), h('p', null, h('a', { href: link('/') }, 'Go to the fleet')));
    return;
  }
  const { route, rest } = m;
  const quiet = opts.quiet && app.dataset.page === route.page && app.dataset.state === 'ready';
  let title = route.title;
  const after = [];
  const ctx = {
    params, rest, range: range(params), signal: controller.signal,
    after: (fn) => after.push(fn),
    title: (t) => { title = t; },
    shown: (from, to) => { $('range-shown').textContent = from && to ? time(from) + ' – ' + time(to) : ''; },
    mark: (k, v) => { if (my === generation) app.dataset[k] = v; },
    auth: (e) => authForm(e),
  };
  if (!quiet) {
    app.dataset.page = route.page;
    app.dataset.state = 'loading';
    delete app.dataset.sparks;
    delete app.dataset.form;
    app.setAttribute('aria-busy', 'true');
    $('range-shown').textContent = '';
    app.replaceChildren(h('p', { class: 'muted' }, 'Loading…'));
  }
  // Keep what the user typed into filters across a refresh.
  const filters = quiet ? [...app.querySelectorAll('input[data-filter]')].map((i) => [i.id, i.value]) : [];
  const focusId = quiet && document.activeElement && document.activeElement.id;
  try {
    const content = await route.fn(ctx);
    if (my !== generation) return;
    app.replaceChildren(...[content].flat(Infinity).filter((x) => x));
    app.dataset.page = route.page;
    app.dataset.state = 'ready';
    app.dataset.rendered = String(my);
    app.removeAttribute('aria-busy');
    document.title = title + ' · stormradius';
    for (const [id, v] of filters) {
      const el = document.getElementById(id);
      if (el && v) { el.value = v; el.dispatchEvent(new Event('input')); }
    }
    if (focusId && document.getElementById(focusId)) document.getElementById(focusId).focus({ preventScroll: true });
    if (!quiet && opts.focus) { window.scrollTo(0, 0); app.focus({ preventScroll: true }); }
    for (const fn of after) fn();
  } catch (e) {
    if (my !== generation || (e && e.name === 'AbortError')) return;
    if (e && e.status === 401) { authForm(e); return; }
    const msg = (e && e.message) || String(e);
    if (quiet) {
      const old = app.querySelector('.refresh-error');
      if (old) old.remove();
      app.prepend(h('p', { class: 'error refresh-error', role: 'alert' }, 'Refresh failed: ' + msg));
      return;
    }
    app.dataset.state = 'error';
    app.removeAttribute('aria-busy');
    app.replaceChildren(h('h1', null, route.title),
      h('p', { class: 'error', role: 'alert', id: 'page-error' }, (e && e.status === 404 ? 'Not found: ' : 'Something went wrong: ') + msg),
      h('p', null, h('a', { href: link('/') }, 'Back to the fleet')));
  }
}

// ---- auto-refresh ----

function autoOn() {
  try { return sessionStorage.getItem(AUTO_KEY) === '1'; } catch { return false; }
}

let timer = null;
function schedule() {
  clearInterval(timer);
  timer = null;
  if (!autoOn()) return;
  timer = setInterval(() => {
    if (document.hidden) return;
    const m = match(parseHash().path);
    if (m && m.route.noAutoRefresh) return;
    render({ quiet: true });
  }, AUTO_MS);
}

// ---- theme ----

function effectiveTheme() {
  const t = document.documentElement.getAttribute('data-theme');
  if (t === 'dark' || t === 'light') return t;
  return window.matchMedia && window.matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light';
}

$('theme').addEventListener('click', () => {
  const next = effectiveTheme() === 'dark' ? 'light' : 'dark';
  document.documentElement.setAttribute('data-theme', next);
  try { localStorage.setItem('stormradius.theme', next); } catch { /* ignore */ }
  updateHeader(match(parseHash().path)?.route);
});

$('auto').addEventListener('click', () => {
  try { sessionStorage.setItem(AUTO_KEY, autoOn() ? '0' : '1'); } catch { /* ignore */ }
  updateHeader(match(parseHash().path)?.route);
  schedule();
});

$('refresh').addEventListener('click', () => render({ quiet: true }));

$('forget').addEventListener('click', () => { setToken(''); render(); });

$('range').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const from = $('range-from').value.trim() || DEFAULT_FROM;
  const to = $('range-to').value.trim() || DEFAULT_TO;
  location.hash = hrefWith({ from, to });
});

document.addEventListener('keydown', (ev) => {
  if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
  const t = ev.target;
  if (t && (t.isContentEditable || /^(INPUT|SELECT|TEXTAREA)$/.test(t.tagName))) {
    if (ev.key === 'Escape' && t.matches('input[data-filter]')) { t.value = ''; t.dispatchEvent(new Event('input')); t.blur(); }
    return;
  }
  if (ev.key === '/') {
    const f = app.querySelector('input[data-filter]');
    if (f) { ev.preventDefault(); f.focus(); }
  } else if (ev.key === 'r') {
    render({ quiet: true });
  }
});

window.addEventListener('hashchange', () => {
  // In-page anchors (#app: skip link) are not routes.
  if (!location.hash.startsWith('#/') && location.hash !== '') { return; }
  render({ focus: true });
});

$('skip').addEventListener('click', (ev) => { ev.preventDefault(); app.focus(); });

if (!redirecting) {
  schedule();
  render();
}
