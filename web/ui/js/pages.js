// The pages: fleet, API, incidents, incident, services, what-if, plan. Each
// returns its content; app.js routes and handles loading, errors and
// tokens.

import { h, fill, api, seg, link, num, pct, amp, time, card, table, filterBox, empty, nodeName } from './lib.js';
import { sparkline, timeChart, incidentTimeline } from './charts.js';
import { renderDAG, renderStormPath } from './dag.js';

// settle waits for every request, rethrowing a 401 (the token form) and
// giving the others' answers or errors.
async function settle(promises) {
  const res = await Promise.allSettled(promises);
  for (const r of res) {
    if (r.status === 'rejected' && (r.reason.status === 401 || r.reason.name === 'AbortError')) throw r.reason;
  }
  return res.map((r) => (r.status === 'fulfilled' ? { ok: r.value } : { err: r.reason }));
}

function errorBox(what, err) {
  return h('p', { class: 'error', role: 'alert' }, what + ': ' + (err && err.message ? err.message : String(err)));
}

// span shows an interval, the end's date only when it differs.
function span(from, to) {
  const a = time(from), b = time(to);
  return a.slice(0, 10) === b.slice(0, 10) ? a.replace(' UTC', '') + '–' + b.slice(11) : a + ' – ' + b;
}

function rangeText(from, to) {
  return time(from) + ' – ' + time(to);
}

// withFilter wires a filter box to a table's rows by the row's dataset key.
function filtered(label, id, tableEl, textOf) {
  let q = '';
  const apply = () => {
    for (const tr of tableEl.querySelectorAll('tbody tr')) tr.classList.toggle('hidden', q !== '' && !textOf(tr).toLowerCase().includes(q));
  };
  const box = filterBox(label, (v) => { q = v; apply(); });
  box.querySelector('input').id = id;
  box.querySelector('label').setAttribute('for', id);
  const mo = new MutationObserver(apply); // re-apply after a sort redraws
  mo.observe(tableEl.querySelector('tbody'), { childList: true });
  return box;
}

// OTHER_API is the root API the analysis counts APIs past a window's cap
// under (graph.OtherAPI); OTHER_SERVICE the same for services.
const OTHER_API = '\u27e8other APIs\u27e9';
const OTHER_SERVICE = '\u27e8other services\u27e9';
const OVERFLOW_NOTE = 'Root APIs past an analysis window\u2019s cap (--max-apis), and those of services past theirs ' +
  '(--max-services), counted together under ' + OTHER_API + ': their traces, figures and call graphs are summed here.';

// ---- sampled traffic (docs/SPEC.md §4.9) ----

// EST marks an estimated count: the traces received stood for more
// traffic than themselves.
const EST = '\u2248\u202f';
const EST_NOTE = 'estimated from a sample: each trace weighted by its adjusted count (1/p)';

// est shows a count, marked as an estimate when sampled.
function est(x, sampled) {
  return sampled ? h('span', { class: 'est', title: EST_NOTE }, EST + num(x)) : num(x);
}

// interval shows a rate and its 95% interval.
function interval(r) {
  if (!r) return '—';
  if (r.low === r.high) return pct(r.estimate);
  return pct(r.estimate) + ' (' + pct(r.low) + '–' + pct(r.high) + ')';
}

// samplingNotice says that the figures are estimates and how sure they
// are, and every warning (tail sampling without recorded probabilities,
// conflicting or unusable sampling information); nothing for traffic
// received whole without warnings.
function samplingNotice(sm, id) {
  if (!sm) return null;
  const out = [];
  if (sm.estimated) {
    out.push(h('p', { class: 'notice', id: id + '-sampled', dataset: { received: sm.traces_received, estimated: sm.traces_estimated } },
      h('strong', null, 'Estimated from sampled traffic. '),
      num(sm.traces_received) + ' traces received stand for about ' + num(sm.traces_estimated) +
      ' (effective sample size ' + num(Math.round(sm.effective_sample_size)) + '); counts marked \u2248 are estimates, rates show their 95% interval.'));
  }
  for (const w of sm.warnings || []) out.push(h('p', { class: 'notice warn', role: 'alert', dataset: { warning: id } }, 'Warning: ' + w));
  return out;
}

// ---- fleet ----

export async function fleetPage(ctx) {
  const [fl, list, incs] = await Promise.all([api('/fleet', ctx.range, ctx), api('/apis', ctx.range, ctx),
    api('/incidents', { ...ctx.range, limit: 5 }, ctx).catch((e) => { if (e.status === 401 || e.name === 'AbortError') throw e; return { error: e }; })]);
  const f = fl.fleet;
  const sm = fl.sampling || {};
  const sampled = !!sm.estimated;
  ctx.shown(fl.from, fl.to);
  const apis = list.apis || [];
  const sparks = new Map(apis.map((a) => [a.api, h('span', { class: 'spark-cell', dataset: { state: 'loading' } })]));
  const tbl = table([
    { key: 'api', label: 'Root API', value: (a) => a.api, cls: () => 'name', cell: (a) => h('a', { href: link('/api', { name: a.api }), dataset: { apiLink: a.api }, title: a.api === OTHER_API ? OVERFLOW_NOTE : null }, a.api) },
    { key: 'traces', label: 'Traces', num: true, value: (a) => a.traces, raw: (a) => a.traces, cell: (a) => est(a.traces, a.sampling && a.sampling.estimated) },
    sampled ? { key: 'received', label: 'Received', num: true, value: (a) => a.sampling.traces_received, raw: (a) => a.sampling.traces_received, title: 'traces received (the sample)' } : null,
    { key: 'failed_traces', label: 'Failed', num: true, value: (a) => a.failed_traces, raw: (a) => a.failed_traces, title: 'traces with at least one failure event', cell: (a) => est(a.failed_traces, a.sampling && a.sampling.estimated) },
    sampled ? { key: 'failed_rate', label: 'Failed % (95% CI)', num: true, value: (a) => a.sampling.failed_trace_rate.estimate, raw: (a) => a.sampling.failed_trace_rate.estimate, cell: (a) => interval(a.sampling.failed_trace_rate), title: 'share of traces with a failure event, with its 95% interval' } : null,
    { key: 'root_errors', label: 'Root errors', num: true, value: (a) => a.root_errors, raw: (a) => a.root_errors, title: 'errors users saw', cell: (a) => est(a.root_errors, a.sampling && a.sampling.estimated) },
    { key: 'max_radius', label: 'Max radius', num: true, value: (a) => a.max_radius, raw: (a) => a.max_radius, cls: (a) => (a.max_radius > 1 ? 'alarm' : '') },
    { key: 'mean_radius', label: 'Mean radius / trace', num: true, value: (a) => a.mean_radius, raw: (a) => a.mean_radius, title: 'mean radius over the API\u2019s traces with a failure event' },
    { key: 'potential_radius', label: 'Potential', num: true, value: (a) => a.potential_radius, raw: (a) => a.potential_radius, title: 'potential radius: how far a storm could reach in this call graph' },
    { key: 'max_amplification', label: 'Max amp.', num: true, value: (a) => a.max_amplification, raw: (a) => a.max_amplification, cell: (a) => amp(a.max_amplification) },
    { key: 'suppressed_retries', label: 'Suppressed', num: true, value: (a) => a.suppressed_retries, raw: (a) => a.suppressed_retries, title: 'retries the ownership protocol suppressed', cell: (a) => est(a.suppressed_retries, a.sampling && a.sampling.estimated) },
    { key: 'spurious_requests_prevented', label: 'Prevented', num: true, value: (a) => a.spurious_requests_prevented, raw: (a) => a.spurious_requests_prevented, title: 'spurious requests prevented', cell: (a) => est(a.spurious_requests_prevented, a.sampling && a.sampling.estimated) },
    { key: 'trend', label: 'Max radius trend', cell: (a) => sparks.get(a.api) },
  ].filter(Boolean), apis, { id: 'apis', sort: 'max_radius', rowAttrs: (a) => ({ dataset: { api: a.api } }) });

  // Sparklines after the table shows, four requests at a time.
  ctx.after(async () => {
    const queue = apis.slice(0, 200);
    const worker = async () => {
      while (queue.length) {
        const a = queue.shift();
        const cell = sparks.get(a.api);
        try {
          const sr = await api('/radius', { api: a.api, ...ctx.range }, ctx);
          const vals = sr.points.map((p) => p.max_radius);
          fill(cell, sparkline(vals, { max: Math.max(2, a.potential_radius || 0), label: 'max radius per ' + Math.round(sr.step_seconds / 60) + ' min: ' + vals.join(' ') }));
          cell.dataset.state = 'ready';
        } catch (e) {
          if (e.name === 'AbortError') return;
          fill(cell, h('span', { class: 'muted', title: e.message }, '—'));
          cell.dataset.state = 'error';
        }
      }
    };
    await Promise.all([worker(), worker(), worker(), worker()]);
    ctx.mark('sparks', 'done');
  });

  return [
    h('h1', null, 'Fleet'),
    h('p', { class: 'sub' }, rangeText(fl.from, fl.to), ' · ', est(fl.traces, sampled), ' traces · ', est(fl.spans, sampled), ' spans',
      fl.fragments ? [' · ', est(fl.fragments, sampled), ' fragments'] : '', sampled ? ' · ' + num(sm.traces_received) + ' received' : ''),
    samplingNotice(sm, 'fleet'),
    fl.split_traces > 0 ? h('p', { class: 'notice warn', role: 'alert', id: 'fleet-split', dataset: { split: fl.split_traces } },
      h('strong', null, num(fl.split_traces) + (fl.split_traces === 1 ? ' trace was' : ' traces were') + ' split across partitions '),
      'and left out of every figure: the collector must send every span of a trace to one partition (kafka exporter ',
      h('code', null, 'partition_traces_by_id: true'), ', loadbalancing exporter ', h('code', null, 'routing_key: traceID'), ').') : null,
    h('div', { class: 'cards', id: 'fleet-cards' },
      card('Fleet max radius', num(f.max_radius), { field: 'max_radius', raw: f.max_radius, hot: f.max_radius > 1, note: 'largest max radius of an API' }),
      card('Mean of the APIs\u2019 max radius', num(f.mean_max_radius), { field: 'mean_max_radius', raw: f.mean_max_radius, note: 'over the ' + num(f.failed_apis || 0) + (f.failed_apis === 1 ? ' API' : ' APIs') + ' with failures; not a mean over traces' }),
      f.apis !== undefined ? card('Root APIs', num(f.apis), { field: 'apis', raw: f.apis, note: num(f.failed_apis || 0) + ' with failures' }) : null,
      f.max_potential_radius !== undefined ? card('Max potential radius', num(f.max_potential_radius), { field: 'max_potential_radius', raw: f.max_potential_radius, note: 'without ownership: ' + num(f.max_potential_radius_without_ownership) }) : null,
      f.spurious_requests_prevented !== undefined ? card('Spurious requests prevented', est(f.spurious_requests_prevented, sampled), { field: 'spurious_requests_prevented', raw: f.spurious_requests_prevented }) : null,
      sampled ? card('Effective sample size', num(Math.round(sm.effective_sample_size)), { field: 'effective_sample_size', raw: sm.effective_sample_size,
        note: num(sm.traces_received) + ' traces received stand for about ' + num(sm.traces_estimated) }) : null,
      sampled ? card('Failed traces (95% CI)', interval(sm.failed_trace_rate), { field: 'failed_trace_rate', raw: sm.failed_trace_rate.estimate, note: 'share of the traffic\u2019s traces with a failure event' }) : null),
    h('h2', null, 'Root APIs'),
    apis.length ? [filtered('Filter APIs', 'filter-apis', tbl, (tr) => tr.dataset.api || ''), tbl]
      : empty('No traces in this range. Pick a wider range above, or send traces to the OTLP receivers.'),
    h('h2', null, 'Latest incidents'),
    incs.error ? errorBox('Incidents', incs.error)
      : incs.incidents.length ? [incidentsTable(incs.incidents, 'fleet-incidents'), h('p', null, h('a', { href: link('/incidents') }, 'All incidents in the range →'))]
        : empty('No incident in this range.'),
  ];
}

// ---- API ----

function ownersTable(owners, name, current) {
  return table([
    { key: 'owner', label: 'Owner', value: (o) => nodeName(o), cls: () => 'name',
      cell: (o) => h('a', { href: link('/api', { name, owner: nodeName(o) }), 'aria-current': nodeName(o) === current ? 'true' : null, title: 'Highlight its storm path' }, nodeName(o)) },
    { key: 'owned_failures', label: 'Failure events', num: true, value: (o) => o.owned_failures, raw: (o) => o.owned_failures },
    { key: 'spurious_requests_prevented', label: 'Spurious prevented', num: true, value: (o) => o.spurious_requests_prevented || 0, raw: (o) => o.spurious_requests_prevented || 0 },
    { key: 'whatif', label: 'What-if', cell: (o) => h('a', { href: link('/whatif', { api: name, fail: o.service, run: 1 }) }, 'if it fails…') },
  ], owners, { id: 'owners', sort: 'owned_failures', rowAttrs: (o) => ({ class: nodeName(o) === current ? 'current' : null, dataset: { owner: nodeName(o) } }) });
}

export function incidentsTable(list, id = 'incidents') {
  return table([
    { key: 'owner', label: 'Owner (incident)', value: (d) => d.service + ' ' + d.operation, cls: () => 'name',
      cell: (d) => h('a', { href: link('/incidents/' + seg(d.id)), dataset: { incidentLink: d.id } }, d.service + ' ' + d.operation) },
    { key: 'start', label: 'When (hot minutes)', value: (d) => d.start, cell: (d) => span(d.start, d.end), cls: () => 'nowrap' },
    { key: 'open', label: 'Status', value: (d) => (d.open ? 1 : 0), cell: (d) => h('span', { class: ['badge', d.open ? 'bad' : 'good'] }, d.open ? 'open' : 'closed') },
    { key: 'affected', label: 'Affected APIs', value: (d) => d.affected_apis.join(', '), cls: () => 'name',
      cell: (d) => h('span', null, d.affected_apis.map((a, i) => [i ? ', ' : '', h('a', { href: link('/api', { name: a }) }, a)])) },
    { key: 'max_radius', label: 'Max radius', num: true, value: (d) => d.max_radius, raw: (d) => d.max_radius, cls: (d) => (d.max_radius > 1 ? 'alarm' : '') },
    { key: 'mean_radius', label: 'Mean radius / event', num: true, value: (d) => d.mean_radius, raw: (d) => d.mean_radius, title: 'mean radius over the incident\u2019s failure events' },
    { key: 'max_amplification', label: 'Max amp.', num: true, value: (d) => d.max_amplification, raw: (d) => d.max_amplification, cell: (d) => amp(d.max_amplification) },
    { key: 'owned_failures', label: 'Owned failures', num: true, value: (d) => d.owned_failures, raw: (d) => d.owned_failures },
    { key: 'suppressed_retries', label: 'Suppressed', num: true, value: (d) => d.suppressed_retries, raw: (d) => d.suppressed_retries },
    { key: 'spurious_requests_prevented', label: 'Prevented', num: true, value: (d) => d.spurious_requests_prevented, raw: (d) => d.spurious_requests_prevented },
  ], list, { id, sort: 'start', rowAttrs: (d) => ({ dataset: { incident: d.id } }) });
}

export async function apiPage(ctx) {
  // name= is what the UI's links write; api= is what REST takes (and what
  // a link written by hand after it says): either opens the page.
  const name = ctx.params.get('name') || ctx.params.get('api');
  if (!name) return [h('h1', null, 'No API named'), h('p', null, 'Pick a root API on the ', h('a', { href: link('/') }, 'fleet page'), '.')];
  ctx.title(name);
  const [list, series, graph, incs] = await settle([
    api('/apis', ctx.range, ctx),
    api('/radius', { api: name, ...ctx.range }, ctx),
    api('/graph', { api: name, ...ctx.range }, ctx),
    api('/incidents', { api: name, ...ctx.range }, ctx),
  ]);
  const out = [h('div', { class: 'crumbs' }, h('a', { href: link('/') }, 'Fleet'), ' › root API'), h('h1', { id: 'api-name' }, name)];
  let a = null;
  if (list.ok) {
    ctx.shown(list.ok.from, list.ok.to);
    a = (list.ok.apis || []).find((x) => x.api === name) || null;
    out.push(h('p', { class: 'sub' }, rangeText(list.ok.from, list.ok.to),
      ' · ', h('a', { href: link('/whatif', { api: name }) }, 'What-if on this API'),
      ' · ', h('a', { href: link('/incidents', { api: name }) }, 'its incidents')));
  } else out.push(errorBox('Figures', list.err));
  if (name === OTHER_API) out.push(h('p', { class: 'notice', id: 'api-overflow' }, OVERFLOW_NOTE));
  if (list.ok && !a) out.push(h('p', { class: 'notice' }, 'No traces of this API in the range. Pick another range above.'));
  if (a) {
    const sm = a.sampling || {};
    const sampled = !!sm.estimated;
    const ci = (r) => (sampled && r ? '95% interval ' + interval(r) : null);
    out.push(samplingNotice(sm, 'api'));
    out.push(h('div', { class: 'cards', id: 'api-cards' },
      card('Traces', est(a.traces, sampled), { field: 'traces', raw: a.traces,
        note: [sampled ? num(sm.traces_received) + ' received, effective sample size ' + num(Math.round(sm.effective_sample_size)) : null,
          a.remote_parent_traces ? num(a.remote_parent_traces) + ' with a remote parent' : null].filter(Boolean).join('; ') || null }),
      card('Failed traces', est(a.failed_traces, sampled), { field: 'failed_traces', raw: a.failed_traces,
        note: sampled ? interval(sm.failed_trace_rate) + ' of traces; ' + num(a.root_errors) + ' root errors' : num(a.root_errors) + ' root errors' }),
      card('Max radius', num(a.max_radius), { field: 'max_radius', raw: a.max_radius, hot: a.max_radius > 1, note: sampled ? 'largest observed' : null }),
      card('Mean radius per trace', num(a.mean_radius), { field: 'mean_radius', raw: a.mean_radius, note: ci(sm.mean_radius) || ('over the ' + num(a.failed_traces) + (a.failed_traces === 1 ? ' trace' : ' traces') + ' with a failure event') }),
      card('Potential radius', num(a.potential_radius), { field: 'potential_radius', raw: a.potential_radius,
        note: a.potential_radius_without_ownership !== undefined ? 'without ownership: ' + num(a.potential_radius_without_ownership) : null }),
      card('Max amplification', amp(a.max_amplification), { field: 'max_amplification', raw: a.max_amplification, hot: a.max_amplification > 2 }),
      card('Suppressed retries', est(a.suppressed_retries, sampled), { field: 'suppressed_retries', raw: a.suppressed_retries }),
      card('Spurious requests prevented', est(a.spurious_requests_prevented, sampled), { field: 'spurious_requests_prevented', raw: a.spurious_requests_prevented }),
      card('Misattributed errors', est(a.misattributed_errors, sampled), { field: 'misattributed_errors', raw: a.misattributed_errors,
        note: ci(sm.misattribution_rate) || (a.naive_misattributed_errors !== undefined ? 'naive attributor: ' + num(a.naive_misattributed_errors) : null) })));
  }

  out.push(h('h2', null, 'Call graph'));
  if (graph.ok) {
    const g = graph.ok;
    const dag = renderDAG(g, { owner: ctx.params.get('owner') || '', link: (nd) => link('/api', { name, owner: nodeName(nd) }) });
    out.push(h('p', { class: 'sub' }, dag.owner
      ? ['Highlighted: the failing owner ', h('strong', { id: 'dag-owner' }, dag.owner), ' and the path its errors took to the root (', num(dag.path.edges.size), ' edges). Select a node to follow its path instead.']
      : 'No failure owned in this range.'), dag.el);
    if (g.owners && g.owners.length) out.push(h('h3', null, 'Owners of the failures'), ownersTable(g.owners, name, dag.owner));
  } else out.push(graph.err.status === 404 ? empty('No call graph for this API in the range.') : errorBox('Call graph', graph.err));

  out.push(h('h2', null, 'Radius over time'));
  if (series.ok) {
    const pts = series.ok.points.map((p) => ({ ...p, t: Date.parse(p.time) }));
    if (!pts.length) out.push(empty('No steps in this range.'));
    else {
      const step = series.ok.step_seconds * 1000;
      out.push(h('div', { class: 'charts' },
        h('div', { class: 'panel' }, h('h3', null, 'Storm radius per ' + Math.round(series.ok.step_seconds / 60) + ' min'),
          timeChart({ name: 'radius', label: 'Max and mean storm radius of ' + name + ' over time', points: pts, stepMs: step, integer: true,
            lines: [{ key: 'max', cls: 's-max', label: 'max radius', step: true, values: pts.map((p) => p.max_radius) },
              { key: 'mean', cls: 's-mean', label: 'mean radius per trace', values: pts.map((p) => p.mean_radius) }],
            refs: a ? [{ value: a.potential_radius, label: 'potential radius ' + a.potential_radius }] : [] })),
        h('div', { class: 'panel' }, h('h3', null, 'Traces and failed traces'),
          timeChart({ name: 'traces', label: 'Traces and failed traces of ' + name + ' over time', points: pts, stepMs: step, height: 150,
            bars: [{ key: 'total', cls: 'bar-total', label: 'traces', values: pts.map((p) => p.traces) },
              { key: 'failed', cls: 'bar-failed', label: 'failed traces', values: pts.map((p) => p.failed_traces) }] }))));
      out.push(h('details', { class: 'data' }, h('summary', null, 'Show the series as a table'),
        table([
          { key: 'time', label: 'Step', value: (p) => p.t, cell: (p) => time(p.time) },
          { key: 'traces', label: 'Traces', num: true, value: (p) => p.traces },
          { key: 'failed_traces', label: 'Failed', num: true, value: (p) => p.failed_traces },
          { key: 'max_radius', label: 'Max radius', num: true, value: (p) => p.max_radius, raw: (p) => p.max_radius },
          { key: 'mean_radius', label: 'Mean radius / trace', num: true, value: (p) => p.mean_radius },
          { key: 'max_amplification', label: 'Max amp.', num: true, value: (p) => p.max_amplification },
          { key: 'suppressed_retries', label: 'Suppressed', num: true, value: (p) => p.suppressed_retries },
          { key: 'spurious', label: 'Prevented', num: true, value: (p) => p.spurious_requests_prevented },
        ], pts, { id: 'series', sort: 'time', dir: 'asc' })));
    }
  } else out.push(series.err.status === 404 ? empty('No traces of this API in the store.') : errorBox('Radius series', series.err));

  out.push(h('h2', null, 'Incidents'));
  if (incs.ok) out.push(incs.ok.incidents.length ? incidentsTable(incs.ok.incidents) : empty('No incident in this range.'));
  else out.push(errorBox('Incidents', incs.err));
  return out;
}

// ---- incidents ----

export async function incidentsPage(ctx) {
  const only = ctx.params.get('api') || '';
  const res = await api('/incidents', { ...ctx.range, api: only }, ctx);
  const list = res.incidents || [];
  const tbl = list.length ? incidentsTable(list) : null;
  return [
    h('h1', null, 'Incidents'),
    h('p', { class: 'sub' }, only ? ['Affecting ', h('strong', null, only), ' · ', h('a', { href: link('/incidents', { api: '' }) }, 'all APIs')] : 'Every owner whose failures reached 5% of its requests (at least 10 in a minute), newest first.',
      ' ', h('span', { id: 'incident-count' }, num(list.length)), list.length === 1 ? ' incident.' : ' incidents.'),
    list.length ? h('div', { class: 'panel' }, incidentTimeline(list, (d) => link('/incidents/' + seg(d.id)))) : null,
    tbl ? [h('h2', null, 'List'), filtered('Filter incidents', 'filter-incidents', tbl, (tr) => tr.textContent), tbl] : empty('No incident in this range.'),
  ];
}

function servicesTable(list, id = 'services') {
  const z = (v) => (v ? '' : 'zero');
  return table([
    { key: 'service', label: 'Service', value: (s) => s.service, cls: () => 'name',
      cell: (s) => h('span', null, h('span', { class: 'svc-name', title: s.service === OTHER_SERVICE ? 'services past an analysis window\u2019s cap (--max-services), counted together' : null }, s.service),
        s.virtual ? [' ', h('span', { class: 'badge', title: 'not instrumented: named by its callers' }, 'virtual')] : null) },
    { key: 'correct', label: 'Correct', num: true, value: (s) => s.claims.correct, raw: (s) => s.claims.correct, title: 'claims as the protocol says' },
    { key: 'false_claim', label: 'False claim', num: true, value: (s) => s.claims.false_claim, raw: (s) => s.claims.false_claim, cls: (s) => (s.claims.false_claim ? 'alarm' : 'zero'), title: 'claimed an error it did not own: callers above retry, storms grow' },
    { key: 'false_unclaim', label: 'False unclaim', num: true, value: (s) => s.claims.false_unclaim, raw: (s) => s.claims.false_unclaim, cls: (s) => (s.claims.false_unclaim ? 'alarm' : 'zero'), title: 'unclaimed its own error: legitimate retries lost' },
    { key: 'missing', label: 'Missing', num: true, value: (s) => s.claims.missing, raw: (s) => s.claims.missing, cls: (s) => z(s.claims.missing) },
    { key: 'invalid', label: 'Invalid', num: true, value: (s) => s.claims.invalid, raw: (s) => s.claims.invalid, cls: (s) => (s.claims.invalid ? 'alarm' : 'zero') },
    { key: 'claim_mismatches', label: 'Mismatches', num: true, value: (s) => s.claim_mismatches || 0, raw: (s) => s.claim_mismatches || 0, cls: (s) => z(s.claim_mismatches), title: 'server and client saw different claims' },
    { key: 'misattributed_errors', label: 'Misattributed', num: true, value: (s) => s.misattributed_errors, raw: (s) => s.misattributed_errors, cls: (s) => (s.misattributed_errors ? 'alarm' : 'zero'), title: 'errors it blamed on a fail-open dependency: they were its own (rate: misattributed / failed hops with a failed fail-open call)' },
    { key: 'naive', label: 'Naive misattr.', num: true, value: (s) => s.naive_misattributed_errors || 0, raw: (s) => s.naive_misattributed_errors || 0, cls: (s) => z(s.naive_misattributed_errors), title: 'what an attributor without the failure memory would have blamed wrongly' },
    { key: 'context_drops', label: 'Context drops', num: true, value: (s) => s.context_drops, raw: (s) => s.context_drops, cls: (s) => z(s.context_drops) },
    { key: 'owned_failures', label: 'Owned failures', num: true, value: (s) => s.owned_failures || 0, raw: (s) => s.owned_failures || 0 },
    { key: 'requests', label: 'Requests', num: true, value: (s) => s.requests || 0, raw: (s) => s.requests || 0 },
    { key: 'load_increase_avoided', label: 'Load avoided', num: true, value: (s) => s.load_increase_avoided || 0, cell: (s) => pct(s.load_increase_avoided || 0), title: 'load increase avoided: naive retries would have sent this much more' },
  ], list, { id, cls: 'dense', sort: 'service', dir: 'asc', rowAttrs: (s) => ({ dataset: { service: s.service }, title: s.misattribution_rate ? 'misattribution rate ' + pct(s.misattribution_rate) : null }) });
}

// ---- incident ----

function shift(iso, minutes) {
  return new Date(Date.parse(iso) + minutes * 60000).toISOString().replace('.000Z', 'Z');
}

export async function incidentPage(ctx) {
  const d = await api('/incidents/' + seg(ctx.rest), null, ctx);
  ctx.title('Incident ' + d.service + ' ' + d.operation);
  const around = (a) => link('/api', { name: a, from: shift(d.start, -10), to: shift(d.closed_at || d.end, 10), owner: d.service + ' ' + d.operation });
  return [
    h('div', { class: 'crumbs' }, h('a', { href: link('/incidents') }, 'Incidents'), ' › ', h('span', { class: 'mono' }, d.id)),
    h('h1', null, 'Incident: ', h('span', { id: 'incident-owner' }, d.service + ' ' + d.operation), ' ',
      h('span', { class: ['badge', d.open ? 'bad' : 'good'], id: 'incident-status' }, d.open ? 'open' : 'closed')),
    h('p', { class: 'sub' }, time(d.start), ' – ', time(d.end), d.closed_at ? ' · closed ' + time(d.closed_at) : ' · still open'),
    h('div', { class: 'cards', id: 'incident-cards' },
      card('Max radius', num(d.max_radius), { field: 'max_radius', raw: d.max_radius, hot: d.max_radius > 1 }),
      card('Mean radius per event', num(d.mean_radius), { field: 'mean_radius', raw: d.mean_radius, note: 'over its failure events' }),
      card('Max amplification', amp(d.max_amplification), { field: 'max_amplification', raw: d.max_amplification }),
      card('Owned failures', num(d.owned_failures), { field: 'owned_failures', raw: d.owned_failures, note: 'of ' + num(d.requests) + ' requests · peak ' + pct(d.peak_owned_failure_rate) + '/min' }),
      card('Suppressed retries', num(d.suppressed_retries), { field: 'suppressed_retries', raw: d.suppressed_retries }),
      card('Spurious requests prevented', num(d.spurious_requests_prevented), { field: 'spurious_requests_prevented', raw: d.spurious_requests_prevented }),
      card('Load increase avoided', pct(d.load_increase_avoided), { field: 'load_increase_avoided', raw: d.load_increase_avoided, note: 'at ' + d.service }),
      card('Misattributed errors', num(d.misattributed_errors), { field: 'misattributed_errors', raw: d.misattributed_errors })),
    h('div', { class: 'two' },
      h('div', { class: 'panel' },
        h('h2', null, 'Affected APIs'),
        h('ul', { id: 'affected-apis' }, d.affected_apis.map((a) => h('li', { dataset: { api: a } },
          h('a', { href: link('/api', { name: a }) }, a), ' · ', h('a', { href: around(a) }, 'call graph during the incident')))),
        h('dl', { class: 'facts' },
          h('dt', null, 'Owner'), h('dd', null, d.service + ' ' + d.operation),
          h('dt', null, 'Started'), h('dd', null, time(d.start)),
          h('dt', null, 'Last hot minute ends'), h('dd', null, time(d.end)),
          h('dt', null, 'Closed'), h('dd', null, d.closed_at ? time(d.closed_at) : 'not yet (open)'),
          h('dt', null, 'Id'), h('dd', { class: 'mono' }, d.id))),
      h('div', { class: 'panel' },
        h('h2', null, 'Example traces'),
        d.example_traces.length
          ? h('ol', { id: 'example-traces', class: 'mono' }, d.example_traces.map((t) => h('li', null, h('a', { href: link('/traces/' + seg(t)), dataset: { trace: t } }, t))))
          : empty('No example trace stored.'),
        h('p', { class: 'muted' }, 'The widest storms first.'))),
    h('h2', null, 'Claim integrity of the services involved'),
    d.services.length ? servicesTable(d.services, 'incident-services') : empty('No service.'),
  ];
}

// ---- services ----

export async function servicesPage(ctx) {
  const res = await api('/services', ctx.range, ctx);
  ctx.shown(res.from, res.to);
  const svcs = res.services || [];
  const edges = res.edges || [];
  const st = servicesTable(svcs);
  const et = table([
    { key: 'caller', label: 'Caller', value: (e) => e.caller, cls: () => 'name' },
    { key: 'callee', label: 'Callee', value: (e) => e.callee, cls: () => 'name' },
    { key: 'fail_open', label: 'Fail-open', value: (e) => (e.fail_open ? 1 : 0), cell: (e) => h('span', null, e.fail_open ? 'fail-open' : 'fail-close', h('span', { class: 'muted' }, ' (' + e.fail_open_source + ')')) },
    { key: 'calls', label: 'Calls', num: true, value: (e) => e.calls || 0 },
    { key: 'failed_calls', label: 'Failed', num: true, value: (e) => e.failed_calls || 0 },
    { key: 'caller_failed_fraction', label: 'Caller failed', num: true, value: (e) => e.caller_failed_fraction || 0, cell: (e) => pct(e.caller_failed_fraction || 0), title: 'of the failed calls, the fraction whose caller failed too' },
    { key: 'retried_calls', label: 'Retried', num: true, value: (e) => e.retried_calls || 0 },
    { key: 'retry_enabled', label: 'Retries', value: (e) => (e.retry_enabled ? 1 : 0), cell: (e) => (e.retry_enabled ? 'up to ' + num(e.max_attempts) + ' attempts' : 'none seen') },
    { key: 'suppressed_calls', label: 'Suppressed', num: true, value: (e) => e.suppressed_calls || 0 },
  ], edges, { id: 'edges', sort: 'caller', dir: 'asc' });
  return [
    h('h1', null, 'Services'),
    h('p', { class: 'sub' }, rangeText(res.from, res.to), ' · the claim audit of every failed hop (docs/SPEC.md §4.2): a service that claims what it did not originate is what a buggy or compromised service looks like.'),
    h('h2', null, 'Claim integrity'),
    svcs.length ? [filtered('Filter services', 'filter-services', st, (tr) => tr.dataset.service || ''), st] : empty('No service in this range.'),
    h('h2', null, 'Dependencies'),
    h('p', { class: 'sub' }, 'Per edge: fail-open (the caller absorbs its errors) or fail-close, declared, learned by the failure memory, or by default.'),
    edges.length ? et : empty('No edge in this range.'),
  ];
}

// ---- what-if ----

const POLICIES = ['naive', 'budget', 'ownership'];

function fmtReq(x) {
  return x.toLocaleString('en-US', { maximumFractionDigits: 3 });
}

export async function whatifPage(ctx) {
  const p = ctx.params;
  const list = await api('/apis', ctx.range, ctx);
  const apis = list.apis || [];
  const mode = p.get('mode') || (apis.length && !p.get('chain') ? 'api' : 'chain');
  const sel = h('select', { id: 'wi-api', name: 'api' }, apis.map((a) => h('option', { value: a.api }, a.api)));
  const chosen = p.get('api') && apis.some((a) => a.api === p.get('api')) ? p.get('api') : (apis[0] && apis[0].api) || '';
  sel.value = chosen;
  const failBox = h('fieldset', { class: 'checks', id: 'wi-fail' }, h('legend', { class: 'hint' }, 'loading the call graph…'));
  const chain = h('input', { id: 'wi-chain', type: 'text', name: 'chain', value: p.get('chain') || 'A,B,C,D,E,F,G', spellcheck: 'false' });
  const chainFail = h('input', { id: 'wi-chain-fail', type: 'text', name: 'chain_fail', value: mode === 'chain' ? p.getAll('fail').join(',') || 'D' : 'D', spellcheck: 'false' });
  const retries = h('input', { id: 'wi-retries', type: 'number', name: 'retries', min: 0, step: 'any', value: p.get('retries') || '' });
  const budget = h('input', { id: 'wi-budget', type: 'number', name: 'budget', min: 0, max: 1, step: 'any', value: p.get('budget') || '0.1' });
  const errRate = h('input', { id: 'wi-error-rate', type: 'number', name: 'error_rate', min: 0, max: 1, step: 'any', value: p.get('error_rate') || '' });
  const modeApi = h('input', { type: 'radio', name: 'mode', value: 'api', id: 'wi-mode-api', checked: mode === 'api', disabled: !apis.length });
  const modeChain = h('input', { type: 'radio', name: 'mode', value: 'chain', id: 'wi-mode-chain', checked: mode === 'chain' });
  const result = h('div', { id: 'whatif-result', 'aria-live': 'polite' });
  let graphNodes = [];

  const apiRows = [h('label', { for: 'wi-api' }, 'Root API'), h('div', null, sel, h('div', { class: 'hint' }, 'its call graph learned from the traces in the range')),
    h('span', null, 'Failing'), failBox];
  const chainRows = [h('label', { for: 'wi-chain' }, 'Chain'), h('div', null, chain, h('div', { class: 'hint' }, 'call chain, root first, comma separated')),
    h('label', { for: 'wi-chain-fail' }, 'Failing'), h('div', null, chainFail, h('div', { class: 'hint' }, 'the failing node(s) of the chain'))];
  const showMode = () => {
    const api = modeApi.checked;
    for (const el of apiRows) el.hidden = !api;
    for (const el of chainRows) el.hidden = api;
    retries.placeholder = api ? 'observed per edge' : '1';
  };

  const loadFails = async () => {
    const name = sel.value;
    if (!name) return;
    const a = apis.find((x) => x.api === name);
    const wanted = new Set(mode === 'api' && p.get('api') === name && p.getAll('fail').length ? p.getAll('fail') : a && a.owners && a.owners.length ? [a.owners[0].service] : []);
    try {
      const g = await api('/graph', { api: name, ...ctx.range }, ctx);
      graphNodes = g.nodes;
      const services = [...new Set(g.nodes.map((n) => n.service))].sort();
      fill(failBox, h('legend', { class: 'hint' }, 'the failing service(s)'),
        services.map((sv, i) => h('label', null, h('input', { type: 'checkbox', name: 'fail', value: sv, id: 'wi-fail-' + i, checked: wanted.has(sv) }), sv)));
    } catch (e) {
      if (e.name === 'AbortError') return;
      fill(failBox, h('legend', { class: 'hint' }, 'no call graph: ' + e.message));
    }
  };
  sel.addEventListener('change', loadFails);
  modeApi.addEventListener('change', showMode);
  modeChain.addEventListener('change', showMode);

  const question = () => {
    const q = {};
    if (modeApi.checked) {
      q.api = sel.value;
      q.fail = [...failBox.querySelectorAll('input[name=fail]:checked')].map((x) => x.value);
    } else {
      q.chain = chain.value.split(',').map((x) => x.trim()).filter(Boolean);
      q.fail = chainFail.value.split(',').map((x) => x.trim()).filter(Boolean);
    }
    if (retries.value !== '') q.retries = Number(retries.value);
    if (budget.value !== '') q.budget = Number(budget.value);
    if (errRate.value !== '') q.error_rate = Number(errRate.value);
    return q;
  };

  const run = async () => {
    const q = question();
    // Keep the question in the URL, so that a link shares it.
    const sp = new URLSearchParams();
    for (const k of ['from', 'to']) if (p.get(k)) sp.set(k, p.get(k));
    sp.set('mode', q.api ? 'api' : 'chain');
    if (q.api) sp.set('api', q.api); else sp.set('chain', q.chain.join(','));
    for (const f of q.fail) sp.append('fail', f);
    if (q.retries !== undefined) sp.set('retries', String(q.retries));
    if (q.budget !== undefined) sp.set('budget', String(q.budget));
    if (q.error_rate !== undefined) sp.set('error_rate', String(q.error_rate));
    sp.set('run', '1');
    history.replaceState(null, '', '#/whatif?' + sp.toString());
    result.dataset.state = 'loading';
    fill(result, h('p', { class: 'muted' }, 'Computing…'));
    let answers;
    try {
      answers = await Promise.all(POLICIES.map((pol) => api('/whatif', ctx.range, { method: 'POST', body: { ...q, policy: pol }, signal: ctx.signal })));
    } catch (e) {
      if (e.name === 'AbortError') return;
      if (e.status === 401) { ctx.auth(e); return; }
      fill(result, errorBox('What-if', e));
      result.dataset.state = 'error';
      return;
    }
    const first = answers[0];
    let rows;
    if (q.api) {
      const byName = new Map(graphNodes.map((n) => [nodeName(n), n.service]));
      const order = [];
      for (const n of first.order || []) { const sv = byName.get(n); if (sv !== undefined && !order.includes(sv)) order.push(sv); }
      for (const k of Object.keys(first.requests).sort()) if (!order.includes(k)) order.push(k);
      rows = order;
    } else rows = first.order || Object.keys(first.requests);
    const failing = new Set(q.fail);
    const max = Math.max(1, ...answers.flatMap((a) => Object.values(a.requests)));
    const tbl = h('table', { id: 'whatif-table' },
      h('caption', { class: 'muted' }, 'Requests each ' + (q.api ? 'service' : 'node') + ' serves per request at the root while the failing one fails'),
      h('thead', null, h('tr', null, h('th', { scope: 'col' }, q.api ? 'Service' : 'Node'), POLICIES.map((pol) => h('th', { class: 'num', scope: 'col' }, pol)))),
      h('tbody', null, rows.map((r) => h('tr', { dataset: { node: r } },
        h('td', { class: 'name' }, r, failing.has(r) ? [' ', h('span', { class: 'badge bad' }, 'failing')] : null),
        answers.map((a, i) => {
          const v = a.requests[r];
          return h('td', { class: 'num', dataset: { policy: POLICIES[i], value: v } },
            h('span', { class: 'barcell' }, v === undefined ? '—' : fmtReq(v), h('span', { class: ['hbar', v > 1 && 'bad'], 'aria-hidden': 'true' })));
        })))));
    for (const b of tbl.querySelectorAll('.hbar')) {
      const v = Number(b.closest('td').dataset.value);
      b.style.width = Math.max(1, Math.round((v / max) * 80)) + 'px';
    }
    const total = answers.map((a) => Object.values(a.requests).reduce((t, v) => t + v, 0));
    fill(result, 
      h('h2', null, 'Requests per root request'),
      h('p', { class: 'sub' }, 'Retries per hop R = ', first.retries !== undefined && first.retries !== null ? fmtReq(first.retries) : 'as observed per edge',
        ', budget B = ', fmtReq(first.budget), '. Total: ', POLICIES.map((pol, i) => [i ? ', ' : '', pol + ' ' + fmtReq(total[i])])),
      h('div', { class: 'table-wrap' }, tbl),
      first.error_rate_after_retries !== undefined && first.error_rate_after_retries !== null
        ? h('p', { id: 'whatif-error-rate' }, 'An independent error rate of ', pct(q.error_rate), ' becomes ', pct(first.error_rate_after_retries), ' after retries with budget ', fmtReq(first.budget), '.')
        : null);
    result.dataset.state = 'ready';
  };

  const form = h('form', { class: 'whatif panel', id: 'whatif-form', novalidate: true, onsubmit: (ev) => { ev.preventDefault(); run(); } },
    h('span', null, 'Model'),
    h('fieldset', null, h('legend', { class: 'hint' }, 'what to model'),
      h('label', null, modeApi, ' a root API\u2019s call graph'), h('label', null, modeChain, ' a chain')),
    apiRows, chainRows,
    h('label', { for: 'wi-retries' }, 'Retries per hop (R)'), h('div', null, retries),
    h('label', { for: 'wi-budget' }, 'Retry budget (B)'), h('div', null, budget, h('span', { class: 'hint' }, ' a fraction of requests: 0.1 is 10%')),
    h('label', { for: 'wi-error-rate' }, 'Error rate'), h('div', null, errRate, h('span', { class: 'hint' }, ' optional: what a caller sees after retries')),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'wi-submit' }, 'Compute')));
  showMode();
  ctx.after(async () => {
    if (apis.length) await loadFails();
    ctx.mark('form', 'ready');
    if (p.get('run')) run();
  });
  return [
    h('h1', null, 'What-if'),
    h('p', { class: 'sub' }, 'Requests each node serves per request at the root while a node fails persistently (docs/SPEC.md §4.7): naive retries multiply by (1 + R) per retrying level, a budget by (1 + min(R, B)), ownership retries only into the failing node.'),
    form,
    result,
  ];
}

// ---- adoption plan (docs/PLANNER.md) ----

const PLAN_NONE = 'No step lowers the expected storm cost: every service on the storm paths already speaks the protocol, or nothing retries.';

// PLAN_OPEN steps show their changes and storm path at once; the details
// of later ones are built when opened (a fleet's plan may have hundreds).
const PLAN_OPEN = 10;

// failList reads the failing services of a query: fail= repeated, each
// also split at commas (the form's field is comma separated).
function failList(p) {
  return p.getAll('fail').flatMap((v) => v.split(',')).map((x) => x.trim()).filter(Boolean);
}

// planWeights says how the plan weighed the failing nodes.
function planWeights(pl) {
  if (pl.weights === 'fail') return 'planned for ' + (pl.fail || []).join(', ') + ' failing, each in turn';
  if (pl.weights === 'uniform') return 'no failure seen: every node of an API weighs the same';
  return 'failing nodes weighed by their observed owned-failure rate';
}

// beforeAfter shows a figure a step changes: "3 → 2".
function beforeAfter(a, b, fmt) {
  return h('span', { class: ['change', b < a && 'lower', b > a && 'higher'], dataset: { before: a, after: b } }, fmt(a) + ' \u2192 ' + fmt(b));
}

function stepServices(st) {
  return h('span', { class: 'step-services' }, h('span', { class: 'svc-names' }, st.services.join(' + ')),
    st.together ? [' ', h('span', { class: 'badge warn', title: 'neither helps alone: adopt them in one step' }, 'only together')] : null);
}

// stepDetail is what a step changes: the root APIs' figures, before and
// after, and its storm path.
function stepDetail(st, prevCost) {
  const changes = table([
    { key: 'api', label: 'Root API', cls: () => 'name', cell: (c) => h('a', { href: link('/api', { name: c.api }) }, c.api) },
    { key: 'max_radius', label: 'Max radius', num: true, raw: (c) => c.after.max_radius, cell: (c) => beforeAfter(c.before.max_radius, c.after.max_radius, num) },
    { key: 'mean_radius', label: 'Mean radius', num: true, raw: (c) => c.after.mean_radius, cell: (c) => beforeAfter(c.before.mean_radius, c.after.mean_radius, num) },
    { key: 'load', label: 'Load at the failing node', num: true, raw: (c) => c.after.load, cell: (c) => beforeAfter(c.before.load, c.after.load, fmtReq),
      title: 'requests the failing node serves per root request' },
    { key: 'spurious', label: 'Spurious requests', num: true, raw: (c) => c.after.spurious, cell: (c) => beforeAfter(c.before.spurious, c.after.spurious, fmtReq),
      title: 'requests retries add per root request' },
  ], st.apis || [], { id: 'plan-step-' + st.step + '-apis', sortable: false, caption: 'The root APIs step ' + st.step + ' changes: before \u2192 after', rowAttrs: (c) => ({ dataset: { api: c.api } }) });
  const pa = st.path;
  return [
    h('p', { class: 'why', dataset: { field: 'why' } }, st.why),
    h('p', { class: 'sub' }, 'Expected storm cost ', h('span', { dataset: { field: 'cost' } }, fmtReq(prevCost) + ' \u2192 ' + fmtReq(st.cost)),
      ' (lowered by ', fmtReq(st.gain), ').'),
    (st.apis || []).length ? changes : empty('No root API changes.'),
    pa ? [h('h4', null, 'Storm path: ', h('span', { class: 'path-api' }, pa.api), ', while ', h('span', { class: 'path-failing' }, pa.failing), ' fails'),
      renderStormPath(pa, { before: 'Before', after: 'After step ' + st.step })] : null,
  ];
}

export async function planPage(ctx) {
  const p = ctx.params;
  const apisQ = p.getAll('api').filter(Boolean);
  const failQ = failList(p);
  const budgetQ = (p.get('budget') || '').trim();
  const stepsQ = (p.get('steps') || '').trim();
  const [list, res] = await settle([
    api('/apis', ctx.range, ctx),
    api('/plan', { ...ctx.range, api: apisQ, fail: failQ, budget: budgetQ, steps: stepsQ }, ctx),
  ]);
  if (list.ok) ctx.shown(list.ok.from, list.ok.to);

  // The question: every field is in the URL, so that a link shares it.
  const names = [...new Set([...(list.ok ? (list.ok.apis || []).map((a) => a.api) : []), ...apisQ])];
  const budget = h('input', { id: 'plan-budget', type: 'number', name: 'budget', min: 0, max: 1, step: 'any', value: budgetQ, placeholder: '0.1' });
  const steps = h('input', { id: 'plan-limit', type: 'number', name: 'steps', min: 0, step: 1, value: stepsQ, placeholder: 'all' });
  const fail = h('input', { id: 'plan-fail', type: 'text', name: 'fail', value: failQ.join(', '), spellcheck: 'false', autocomplete: 'off', placeholder: 'as observed' });
  const apis = h('select', { id: 'plan-api', name: 'api', multiple: true, size: Math.min(4, Math.max(2, names.length)) },
    names.map((n) => h('option', { value: n, selected: apisQ.includes(n) }, n)));
  const submit = (ev) => {
    ev.preventDefault();
    const sp = new URLSearchParams();
    for (const k of ['from', 'to']) if (p.get(k)) sp.set(k, p.get(k));
    if (budget.value.trim() !== '') sp.set('budget', budget.value.trim());
    if (steps.value.trim() !== '') sp.set('steps', steps.value.trim());
    for (const f of fail.value.split(',').map((x) => x.trim()).filter(Boolean)) sp.append('fail', f);
    for (const o of apis.selectedOptions) sp.append('api', o.value);
    location.hash = '#/plan' + (sp.toString() ? '?' + sp.toString() : '');
  };
  const field = (id, label, input, hint) => {
    input.setAttribute('aria-describedby', id + '-hint');
    return h('div', { class: 'field' }, h('label', { for: id }, label), input, h('span', { class: 'hint', id: id + '-hint' }, hint));
  };
  const form = h('form', { class: 'plan panel', id: 'plan-form', novalidate: true, onsubmit: submit },
    field('plan-budget', 'Retry budget (B)', budget, 'of an adopted service, a fraction of requests: 0.1 (10%) by default'),
    field('plan-limit', 'Steps', steps, 'the most steps to plan: empty or 0 for every step that helps'),
    field('plan-fail', 'Failing', fail, 'services (or "service operation" nodes) to plan for, comma separated; empty: as observed'),
    field('plan-api', 'Root APIs', apis, 'none selected: every root API; Ctrl- or \u2318-click selects several'),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'plan-submit' }, 'Plan'),
      h('a', { href: link('/plan'), id: 'plan-reset' }, 'Reset')));

  const out = [
    h('h1', null, 'Adoption plan'),
    h('p', { class: 'sub' }, list.ok ? [rangeText(list.ok.from, list.ok.to), ' · '] : null,
      'Which services to move to error ownership first, predicted from the call graphs in the range (docs/PLANNER.md): each step adopts the service, ',
      'or the pair that helps only together, that lowers the expected storm cost most. The cost sums, over every root API and failing node, ',
      'the root requests \u00d7 the failure\u2019s weight \u00d7 (the requests reaching the failing node + the spurious requests retries add), per root request.'),
    form,
  ];
  if (res.err) {
    const e = res.err;
    const box = errorBox('Plan', e);
    box.id = 'plan-error';
    box.dataset.status = String(e.status);
    out.push(box);
    return out;
  }
  const pl = res.ok;
  const plan = pl.steps || [];
  const apiFigs = pl.apis || [];
  const speaking = pl.speaking || [];
  const last = plan.length ? plan[plan.length - 1] : null;
  const f = (field, value, text) => h('strong', { dataset: { field, value } }, text);
  out.push(h('p', { id: 'plan-summary', class: 'summary' },
    f('steps', plan.length, num(plan.length)), plan.length === 1 ? ' step' : ' steps', ' over ',
    f('apis', apiFigs.length, num(apiFigs.length)), apiFigs.length === 1 ? ' root API' : ' root APIs', ' and ',
    f('services', pl.services, num(pl.services)), pl.services === 1 ? ' service' : ' services', ' · ',
    h('span', { dataset: { field: 'weights', value: pl.weights } }, planWeights(pl)), ' · budget B = ', f('budget', pl.budget, fmtReq(pl.budget)),
    ' · expected storm cost ', f('cost', pl.cost, fmtReq(pl.cost)),
    last ? [' \u2192 ', f('cost_after', last.cost, fmtReq(last.cost)), ' after step ' + last.step,
      pl.cost > 0 ? ' (' + pct((last.cost - pl.cost) / pl.cost).replace('-', '\u2212') + ')' : null] : ', no step lowers it', '.'));

  out.push(h('h2', null, 'Already speaking the protocol'));
  out.push(speaking.length
    ? [h('p', { class: 'sub' }, num(speaking.length) + ' of ' + num(pl.services) + ' services claim their errors and honour claims: they are never a step.'),
      h('ul', { id: 'plan-speaking', class: 'names' }, speaking.map((sv) => h('li', { dataset: { service: sv } }, sv)))]
    : h('p', { id: 'plan-speaking', class: 'empty' }, 'None of the ' + num(pl.services) + (pl.services === 1 ? ' service' : ' services') + ' speaks the protocol yet.'));

  out.push(h('h2', null, 'Root APIs before any step'));
  out.push(apiFigs.length ? table([
    { key: 'api', label: 'Root API', value: (a) => a.api, cls: () => 'name', cell: (a) => h('a', { href: link('/api', { name: a.api }) }, a.api) },
    { key: 'weight', label: 'Root requests', num: true, value: (a) => a.weight, raw: (a) => a.weight, cell: (a) => fmtReq(a.weight), title: 'the API\u2019s weight in the cost: its root requests in the range' },
    { key: 'max_radius', label: 'Max radius', num: true, value: (a) => a.max_radius, raw: (a) => a.max_radius, cls: (a) => (a.max_radius > 1 ? 'alarm' : '') },
    { key: 'mean_radius', label: 'Mean radius', num: true, value: (a) => a.mean_radius, raw: (a) => a.mean_radius, title: 'over its failing nodes, each weighed by its share of the failures' },
    { key: 'load', label: 'Load at the failing node', num: true, value: (a) => a.load, raw: (a) => a.load, cell: (a) => fmtReq(a.load), title: 'requests the failing node serves per root request' },
    { key: 'spurious', label: 'Spurious requests', num: true, value: (a) => a.spurious, raw: (a) => a.spurious, cell: (a) => fmtReq(a.spurious), title: 'requests retries add per root request' },
  ], apiFigs, { id: 'plan-apis', sort: 'max_radius', caption: 'Each root API\u2019s storm figures while its nodes fail, before any step: load and spurious requests per root request',
    rowAttrs: (a) => ({ dataset: { api: a.api } }) }) : empty('No root API with a failing node to plan for in this range.'));

  out.push(h('h2', null, 'Steps'));
  if (!plan.length) {
    out.push(h('p', { class: 'empty', id: 'plan-none' }, PLAN_NONE));
    return out;
  }
  out.push(table([
    { key: 'step', label: 'Step', num: true, raw: (st) => st.step, cell: (st) => num(st.step) },
    { key: 'services', label: 'Adopt', cls: () => 'name', cell: stepServices },
    { key: 'why', label: 'Why', cls: () => 'why', cell: (st) => st.why },
    { key: 'gain', label: 'Lowers the cost by', num: true, raw: (st) => st.gain, cell: (st) => fmtReq(st.gain) },
    { key: 'cost', label: 'Cost after', num: true, raw: (st) => st.cost, cell: (st) => fmtReq(st.cost) },
  ], plan, { id: 'plan-steps', sortable: false, caption: 'The steps in order: the services each adopts, why, and the expected storm cost after it',
    rowAttrs: (st) => ({ dataset: { step: st.step, together: String(!!st.together) } }) }));
  plan.forEach((st, i) => {
    const prev = i ? plan[i - 1].cost : pl.cost;
    const id = 'plan-step-' + st.step;
    const head = h('h3', { id: id + '-title' }, 'Step ' + st.step + ': adopt ', stepServices(st));
    if (i < PLAN_OPEN) {
      out.push(h('section', { class: 'plan-step', id, 'aria-labelledby': id + '-title', dataset: { step: st.step } }, head, stepDetail(st, prev)));
      return;
    }
    const body = h('div');
    const d = h('details', { class: 'plan-step', id, dataset: { step: st.step } }, h('summary', null, head), body);
    d.addEventListener('toggle', () => { if (d.open && !body.childElementCount) fill(body, stepDetail(st, prev)); });
    out.push(d);
  });
  return out;
}
