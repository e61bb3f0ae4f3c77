// The trace view: the hop tree as a waterfall (like Jaeger's), each hop
// with its attempt number, claim and failure, the owners marked, and the
// calls each hop made.

import { h, api, seg, link, num, time, dur, extLink, card, table, empty } from './lib.js';

// order lists hop indexes depth first, children by start.
function treeOrder(hops) {
  const kids = new Map();
  const roots = [];
  const byIndex = new Map(hops.map((x) => [x.index, x]));
  for (const x of hops) {
    if (x.parent < 0 || !byIndex.has(x.parent) || x.parent === x.index) roots.push(x);
    else {
      if (!kids.has(x.parent)) kids.set(x.parent, []);
      kids.get(x.parent).push(x);
    }
  }
  const byStart = (a, b) => a.start_ns - b.start_ns || a.index - b.index;
  roots.sort(byStart);
  const out = [];
  const seen = new Set();
  const stack = roots.slice().reverse();
  while (stack.length) {
    const x = stack.pop();
    if (seen.has(x.index)) continue;
    seen.add(x.index);
    out.push(x);
    const c = (kids.get(x.index) || []).slice().sort(byStart);
    for (let i = c.length - 1; i >= 0; i--) stack.push(c[i]);
  }
  for (const x of hops) if (!seen.has(x.index)) out.push(x); // never lose a hop
  return out;
}

function claimBadge(claim, failed) {
  if (!claim || (claim === 'missing' && !failed)) return null;
  const cls = claim === 'claimed' ? 'good' : claim === 'unclaimed' ? 'warn' : claim === 'invalid' ? 'bad' : '';
  return h('span', { class: ['badge', cls], title: 'the claim it answered' }, claim);
}

export function waterfall(tv) {
  const hops = tv.hops;
  if (!hops.length) return empty('No hops.');
  let t0 = Infinity, t1 = -Infinity;
  for (const x of hops) { t0 = Math.min(t0, x.start_ns); t1 = Math.max(t1, x.end_ns); }
  const span = Math.max(1, t1 - t0);
  const pctOf = (ns) => ((ns - t0) / span) * 100;
  const names = new Map(hops.map((x) => [x.index, x.service + ' ' + x.operation]));
  const axis = h('div', { class: 'wf-axis' });
  for (let i = 0; i <= 4; i++) {
    const el = h('span', null, dur((span * i) / 4));
    el.style.left = (i * 25) + '%';
    axis.append(el);
  }
  const head = h('div', { class: 'wf-head', 'aria-hidden': 'true' }, h('span', null, 'Hop (service, operation)'), h('div', { class: 'wf-track' }, axis));
  const list = h('ol', { class: 'wf', 'aria-label': 'Hops of the trace' });
  for (const x of treeOrder(hops)) {
    const callsId = 'calls-' + x.index;
    const hasCalls = x.calls && x.calls.length > 0;
    const open = hasCalls && x.calls.some((c) => c.failed || c.attempts.length > 1 || c.suppressed);
    const callList = hasCalls ? h('ul', { class: 'wf-calls', id: callsId }, x.calls.map((c) => h('li', null,
      '→ ', h('span', { class: 'mono' }, c.callee), ': ',
      c.attempts.length === 1 ? '1 attempt' : c.attempts.length + ' attempts',
      ' (hops ', c.attempts.map((a) => '#' + a).join(', '), ')',
      c.failed ? h('span', { class: 'bad' }, ' · failed') : ' · ok',
      c.claim && c.claim !== 'missing' ? ' · ' + c.claim : (c.failed ? ' · no claim' : ''),
      c.suppressed ? h('span', { class: 'warn' }, ' · retry suppressed') : null))) : null;
    if (callList) callList.hidden = !open;
    const toggle = hasCalls
      ? h('button', { type: 'button', 'aria-expanded': String(open), 'aria-controls': callsId, title: 'Show the calls this hop made',
        onclick: (ev) => {
          const b = ev.currentTarget;
          const now = b.getAttribute('aria-expanded') !== 'true';
          b.setAttribute('aria-expanded', String(now));
          b.firstChild.textContent = now ? '▾' : '▸';
          callList.hidden = !now;
        } }, h('span', { class: 'toggle' }, open ? '▾' : '▸'))
      : h('span', { class: 'toggle', 'aria-hidden': 'true' }, '·');
    const name = h('div', { class: 'wf-name' },
      toggle,
      h('span', { class: 'idx' }, '#' + x.index),
      h('span', { class: 'svc' }, x.service),
      h('span', { class: 'op' }, x.operation),
      x.version ? h('span', { class: 'badge', title: 'service.version' }, 'v' + x.version) : null,
      x.failed ? h('span', { class: 'badge bad', title: 'this hop failed' }, '✕ failed') : null,
      x.attempt > 0 ? h('span', { class: 'badge warn', title: 'a retry: attempt ' + (x.attempt + 1) + ' of its call' }, '↻ retry ' + x.attempt) : null,
      x.attempt === 0 && x.retried ? h('span', { class: 'badge', title: 'its call was retried' }, 'retried') : null,
      claimBadge(x.claim, x.failed),
      x.owner ? h('span', { class: 'badge owner', title: 'owns its error: a failure event starts here' }, 'owner') : null,
      x.virtual ? h('span', { class: 'badge', title: 'not instrumented: named from the caller' }, 'virtual') : null,
      x.fragment ? h('span', { class: 'badge warn', title: 'a fragment: its parent is not in the trace' }, 'fragment') : null);
    name.style.paddingLeft = (0.3 + Math.min(x.depth, 20) * 1.1) + 'rem';
    if (callList) callList.style.paddingLeft = (1.6 + Math.min(x.depth, 20) * 1.1) + 'rem';
    const bar = h('div', { class: ['wf-bar', x.failed && 'failed', x.attempt > 0 && 'retry', x.virtual && 'virtual'],
      title: names.get(x.index) + ': ' + dur(x.end_ns - x.start_ns) + ' from +' + dur(x.start_ns - t0) });
    const left = pctOf(x.start_ns), width = Math.max(0.25, ((x.end_ns - x.start_ns) / span) * 100);
    bar.style.left = left + '%';
    bar.style.width = width + '%';
    const d = h('span', { class: 'wf-dur' }, dur(x.end_ns - x.start_ns));
    if (left + width > 85) { d.style.right = (100 - left + 0.5) + '%'; } else { d.style.left = (left + width + 0.5) + '%'; }
    const row = h('li', {
      class: ['wf-row', x.failed && 'failed', x.owner && 'owner', x.attempt > 0 && 'retry'],
      id: 'hop-' + x.index,
      dataset: { hop: x.index, service: x.service, depth: x.depth, attempt: x.attempt, claim: x.claim, failed: x.failed, owner: !!x.owner },
    }, h('div', { class: 'wf-line' }, name, h('div', { class: 'wf-track' }, bar, d)), callList);
    list.append(row);
  }
  return h('div', { class: 'panel' }, head, list);
}

export async function tracePage(ctx) {
  const id = ctx.rest;
  const tv = await api('/traces/' + seg(id));
  const r = tv.result || {};
  const maxRadius = tv.events.reduce((m, e) => Math.max(m, e.radius), 0);
  const failed = tv.hops.filter((x) => x.failed).length;
  const retries = tv.hops.filter((x) => x.attempt > 0).length;
  const ext = tv.link ? extLink(tv.link) : null;
  const hopsByIndex = new Map(tv.hops.map((x) => [x.index, x]));
  return [
    h('div', { class: 'crumbs' }, h('a', { href: link('/api', { name: tv.api }) }, tv.api), ' › trace'),
    h('h1', null, 'Trace ', h('span', { class: 'mono', id: 'trace-id' }, tv.trace_id)),
    h('p', { class: 'sub' }, 'Root API ', h('a', { href: link('/api', { name: tv.api }), dataset: { apiLink: '' } }, tv.api), ' · started ', time(tv.start, { seconds: true }),
      tv.remote_parent ? ' · called from outside the traced system' : '',
      ext ? [' · ', h('a', { href: ext, target: '_blank', rel: 'noopener noreferrer', id: 'trace-link' }, 'Open in your trace viewer ↗')] : null),
    tv.pending ? h('p', { class: 'notice' }, 'This trace is waiting for its analysis: claims and owners appear once it is analysed.') : null,
    h('div', { class: 'cards' },
      card('Storm radius', num(maxRadius), { field: 'radius', raw: maxRadius, hot: maxRadius > 1 }),
      card('Hops', num(tv.hops.length), { field: 'hops', raw: tv.hops.length }),
      card('Spans', num(tv.spans), { field: 'spans', raw: tv.spans }),
      card('Failed hops', num(failed), { field: 'failed', raw: failed }),
      card('Retries', num(retries), { field: 'retries', raw: retries, note: 'attempts after the first' }),
      card('Failure events', num(tv.events.length), { field: 'events', raw: tv.events.length }),
      r.Counterfactual !== undefined ? card('Spurious requests prevented', num(r.Counterfactual - r.Hops), { field: 'spurious', raw: r.Counterfactual - r.Hops, note: 'naive retries would have made ' + num(r.Counterfactual) + ' hops' }) : null,
      r.Suppressed !== undefined ? card('Suppressed retries', num(r.Suppressed), { field: 'suppressed', raw: r.Suppressed }) : null,
      tv.fragments ? card('Fragments', num(tv.fragments), { field: 'fragments', raw: tv.fragments, note: 'context drops' }) : null),
    h('h2', null, 'Waterfall'),
    h('p', { class: 'legend' },
      h('span', null, h('span', { class: 'badge bad' }, '✕ failed'), ' the hop failed'),
      h('span', null, h('span', { class: 'badge warn' }, '↻ retry n'), ' a retry of its call'),
      h('span', null, h('span', { class: 'badge owner' }, 'owner'), ' owns its error'),
      h('span', null, h('span', { class: 'badge good' }, 'claimed'), ' / ', h('span', { class: 'badge warn' }, 'unclaimed'), ' the claim it answered')),
    waterfall(tv),
    h('h2', null, 'Failure events'),
    tv.events.length
      ? table([
        { key: 'owner', label: 'Owner', value: (e) => e.owner, cls: () => 'name' },
        { key: 'hop', label: 'Owner hop', num: true, value: (e) => e.hop, cell: (e) => h('button', { type: 'button', class: 'linkish', title: 'Show this hop in the waterfall', onclick: () => { const el = document.getElementById('hop-' + e.hop); if (el) { el.scrollIntoView({ block: 'center' }); const b = el.querySelector('button'); if (b) b.focus(); } } }, '#' + e.hop) },
        { key: 'service', label: 'Service', value: (e) => (hopsByIndex.get(e.hop) || {}).service || '' },
        { key: 'radius', label: 'Radius', num: true, value: (e) => e.radius, raw: (e) => e.radius },
      ], tv.events, { id: 'events', sort: 'radius' })
      : empty('No failure event: nothing in this trace owned an error.'),
    tv.versions && tv.versions.length ? [h('h2', null, 'Versions'), h('p', null, tv.versions.map((v, i) => [i ? ', ' : '', h('span', null, v.service), ' ', h('span', { class: 'mono' }, v.version)]))] : null,
  ];
}
