// Sluice status page. Polls the Sluice API of the server that serves it
// (Caddy's admin endpoint, or a site's sluice_status handler; same origin)
// once a second and patches the active tab in place: rows are keyed and a
// cell is rewritten only when its content changed, so focus, text
// selection and scroll survive the updates. No framework, no build step.
'use strict';
(() => {
  const POLL_MS = 1000;
  const SPARK_SECONDS = 300;
  const RULES_REFRESH_MS = 10000;
  const OVERVIEW_MS = 5000;
  const TRANSITIONS_SHOWN = 100;
  const KEY_PAGE = 50;
  // Rate-limit results that refused the request; every other result let it through.
  const REFUSING = ['rejected', 'concurrency_rejected', 'empty_key_rejected', 'redis_unavailable'];
  const BUILTIN_KINDS = ['rate_limit', 'circuit_breaker', 'gray', 'binding'];
  // kinds are the built-in kinds, then any other the store counts (a kind a
  // plugin registers), updated with each state read.
  let kinds = BUILTIN_KINDS;
  // The API lives beside the page: /sluice/ui/ -> /sluice/ (also under a
  // handle_path prefix of a sluice_status site).
  const API = location.pathname.replace(/ui\/[^/]*$/, '');

  const $ = (id) => document.getElementById(id);
  const esc = (s) => String(s ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
  const num = (n) => (n === undefined || n === null || Number.isNaN(n) ? '—' : Number(n).toLocaleString('en-US', { maximumFractionDigits: 1 }));
  const pct = (x) => (x === null || x === undefined || !Number.isFinite(x) ? '—' : `${(x * 100).toFixed(1)}%`);
  // bar is a 0..1 share as a small SVG bar (the page's CSP allows no inline styles).
  const bar = (f) => `<svg class="bar" width="120" height="8" viewBox="0 0 120 8" aria-hidden="true"><rect class="bar-bg" width="120" height="8" rx="4"/><rect class="bar-fg" width="${(Math.min(Math.max(f, 0), 1) * 120).toFixed(1)}" height="8" rx="4"/></svg>`;
  const ruleHref = (kind, id) => `#rule/${encodeURIComponent(kind)}/${encodeURIComponent(id)}`;
  const ruleLink = (kind, id) => `<a href="${ruleHref(kind, id)}">${esc(id)}</a>`;

  const model = {
    state: null,
    overview: null,
    overviewAt: 0,
    changes: null,        // the fleet's recent rule changes, or a string (why not)
    rules: {},            // kind -> id -> rule view {kind,id,source,version,fields}
    rulesSig: '',
    rulesAt: 0,
    rl: new Map(),        // rate-limit rule id -> [{t, allowed, refused}] counter samples
    cbPrev: new Map(),    // "rule|key" -> state seen at the previous poll
    propPrev: null,       // propagation totals at the previous poll
    propMean: null,       // mean delay of the changes applied since then (s)
    detail: null,         // the rule shown in the detail view
    writes: true,         // the server takes writes (a sluice_status site may not)
    keys: null,           // the key browser: {rule, q, offset, page, error}
    transRule: '',        // transitions shown for this rule only ('' all)
  };
  // Timings the browser test reads (and an operator can read in the console).
  const stats = { polls: 0, errors: 0, lastUpdateMs: 0, maxUpdateMs: 0, lastRenderMs: 0, maxRenderMs: 0 };
  window.sluiceStats = stats;

  class APIError extends Error {
    constructor(status, message) { super(message); this.status = status; }
  }

  async function request(method, path, { body, headers } = {}) {
    const init = { method, cache: 'no-store', credentials: 'same-origin', headers: { ...(headers || {}) } };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers['Content-Type'] = 'application/json';
    }
    // Resolved against the page but without its user:password (opened as
    // http://user:pass@host/…): fetch refuses a URL with credentials, and
    // the browser sends the ones it was given for the origin anyway.
    const url = new URL(path, location.href);
    url.username = ''; url.password = '';
    const r = await fetch(url, init);
    const text = await r.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch { data = text; }
    if (r.headers.get('Sluice-Status-Writes') === 'off') model.writes = false;
    if (!r.ok) throw new APIError(r.status, (data && data.error) || text || r.statusText);
    return { data, etag: r.headers.get('ETag'), status: r.status };
  }
  const getJSON = async (path) => (await request('GET', path)).data;

  // ---- patching the DOM in place ----

  // cell is one table cell: its HTML, class and (for the phone layout)
  // the column name it shows before its value.
  const cell = (html, cls = '', span = 0) => ({ html: String(html), cls, span });

  // table gives the tbody of a table, writing its header row once.
  function table(id, headers) {
    const t = $(id);
    const sig = headers.join('|');
    if (t.dataset.head !== sig) {
      t.innerHTML = `<thead><tr>${headers.map((h) => `<th scope="col"${/^#/.test(h) ? ' class="num"' : ''}>${esc(h.replace(/^#/, ''))}</th>`).join('')}</tr></thead><tbody></tbody>`;
      t.dataset.head = sig;
      t.labels = headers.map((h) => h.replace(/^#/, ''));
    }
    return t.tBodies[0];
  }

  // patchRows makes tbody hold one row per entry of rows, in that order,
  // each {key, cls, attrs, cells}. Rows are matched by key; a cell's HTML
  // is replaced only when it changed, and a row moves only when the order
  // changed, so what the user focused, selected or scrolled stays put.
  function patchRows(tbody, rows) {
    const labels = tbody.parentNode.labels || [];
    const old = new Map();
    for (const tr of tbody.rows) old.set(tr.dataset.key, tr);
    let prev = null;
    for (const r of rows) {
      let tr = old.get(r.key);
      if (tr) old.delete(r.key);
      else {
        tr = document.createElement('tr');
        tr.dataset.key = r.key;
      }
      if (tr.className !== (r.cls || '')) tr.className = r.cls || '';
      for (const [k, v] of Object.entries(r.attrs || {})) if (tr.getAttribute(k) !== v) tr.setAttribute(k, v);
      while (tr.cells.length > r.cells.length) tr.lastChild.remove();
      let col = 0;
      r.cells.forEach((c, i) => {
        let td = tr.cells[i];
        if (!td) td = tr.appendChild(document.createElement('td'));
        if (td.className !== c.cls) td.className = c.cls;
        if (c.span) td.colSpan = c.span; else if (td.colSpan !== 1) td.colSpan = 1;
        const label = c.span ? '' : labels[col] || '';
        if (td.dataset.label !== label) td.dataset.label = label;
        if (td.sluiceHTML !== c.html) {
          td.innerHTML = c.html;
          td.sluiceHTML = c.html;
        }
        col += c.span || 1;
      });
      const want = prev ? prev.nextSibling : tbody.firstChild;
      if (want !== tr) tbody.insertBefore(tr, want);
      prev = tr;
    }
    for (const tr of old.values()) tr.remove();
  }

  // setHTML replaces an element's content only when it changed.
  function setHTML(el, html) {
    if (el && el.sluiceHTML !== html) {
      el.innerHTML = html;
      el.sluiceHTML = html;
    }
  }

  // say announces a change to screen readers (the live region).
  let lastSaid = '';
  function say(text) {
    if (text && text !== lastSaid) {
      $('live').textContent = text;
      lastSaid = text;
    }
  }

  // ---- polling ----

  let polling = false;
  let again = false;
  async function poll() {
    if (polling) { again = true; return; }
    polling = true;
    const t0 = performance.now();
    try {
      // Caddy logs every admin request at INFO: the slow-moving overview
      // and change feed are read every OVERVIEW_MS, not every poll.
      const fresh = Date.now() - model.overviewAt >= OVERVIEW_MS;
      const [state, overview, changes] = await Promise.all([
        getJSON(`${API}state`),
        fresh ? getJSON(`${API}ui/overview.json`).catch(() => null) : undefined,
        fresh ? getJSON(`${API}ui/changes.json`).catch((e) => e.message) : undefined,
      ]);
      model.state = state;
      if (fresh) {
        model.overview = overview;
        model.changes = changes;
        model.overviewAt = Date.now();
      }
      observe(state, fresh ? overview : undefined);
      await refreshRules(state);
      const r0 = performance.now();
      render();
      const r1 = performance.now();
      stats.polls++;
      stats.lastRenderMs = r1 - r0;
      stats.maxRenderMs = Math.max(stats.maxRenderMs, stats.lastRenderMs);
      stats.lastUpdateMs = r1 - t0;
      stats.maxUpdateMs = Math.max(stats.maxUpdateMs, stats.lastUpdateMs);
      $('updated').textContent = `updated ${new Date().toLocaleTimeString()}`;
      $('error').hidden = true;
    } catch (e) {
      stats.errors++;
      $('error').textContent = `Cannot read the Sluice API: ${e.message}`;
      $('error').hidden = false;
    } finally {
      polling = false;
      if (again) { again = false; setTimeout(poll, 0); }
    }
  }

  // refreshRules re-reads every rule when the versions in force changed, and
  // every RULES_REFRESH_MS anyway (the versions may be missing from the state).
  async function refreshRules(state) {
    const versions = state && state.rulestore && state.rulestore.versions;
    const sig = versions ? JSON.stringify(versions) : '';
    if (sig === model.rulesSig && Date.now() - model.rulesAt < RULES_REFRESH_MS) return;
    const counted = Object.keys((state && state.rulestore && state.rulestore.rules) || {});
    kinds = BUILTIN_KINDS.concat(counted.filter((k) => !BUILTIN_KINDS.includes(k)).sort());
    const lists = await Promise.all(kinds.map((k) => getJSON(`${API}rules/${k}`).catch(() => [])));
    const rules = {};
    kinds.forEach((k, i) => {
      rules[k] = {};
      for (const r of lists[i] || []) rules[k][r.id] = r;
    });
    model.rules = rules;
    model.rulesSig = sig;
    model.rulesAt = Date.now();
    rulesDirty = true;
  }

  // observe keeps what only a series of polls shows: counter rates, and
  // what to announce.
  function observe(state, overview) {
    const now = Date.now();
    for (const r of section(state, 'ratelimit')) {
      let refused = 0;
      let allowed = 0;
      for (const [res, n] of Object.entries(r.requests || {})) {
        if (REFUSING.includes(res)) refused += n; else allowed += n;
      }
      const samples = model.rl.get(r.rule) || [];
      samples.push({ t: now, allowed, refused });
      while (samples.length > 2 && samples[1].t < now - SPARK_SECONDS * 1000) samples.shift();
      model.rl.set(r.rule, samples);
    }
    for (const r of section(state, 'circuitbreaker')) {
      const st = breakerSummary(r).state;
      const prev = model.cbPrev.get(r.rule);
      if (prev && prev !== st) say(`Breaker ${r.rule}: ${prev} → ${st}`);
      model.cbPrev.set(r.rule, st);
    }
    const p = overview && overview.propagation;
    if (p) {
      const q = model.propPrev;
      if (q && p.count > q.count) model.propMean = (p.sum_seconds - q.sum_seconds) / (p.count - q.count);
      else if (!q && p.count > 0) model.propMean = p.sum_seconds / p.count;
      model.propPrev = p;
    }
  }

  const section = (state, name) => (state && state[name] && Array.isArray(state[name].rules) ? state[name].rules : []);
  const store = () => (model.state && model.state.rulestore) || {};
  const redisDown = () => !!store().redis && !store().connected;

  // ---- one notion of health ----

  // health lists every rule id not in force as its writer expects:
  // rejected (the last version in Redis failed validation), missing (a
  // handler refers to it, the store has none), skipped (its key has an
  // invalid id), and, while Redis is unreachable, stale (a rule from Redis
  // that may have changed since).
  function health() {
    const out = new Map();
    for (const p of store().invalid || []) out.set(`${p.kind}/${p.id}`, p);
    for (const p of (model.overview && model.overview.skipped) || []) out.set(`${p.kind}/${p.id}`, p);
    return out;
  }
  let healthMap = new Map();
  function problemOf(kind, id) {
    const p = healthMap.get(`${kind}/${id}`);
    if (p) return p;
    const r = (model.rules[kind] || {})[id];
    if (redisDown() && r && r.source === 'redis') return { kind, id, problem: 'stale', reason: 'Redis is unreachable: this is the last version read, it may have changed since' };
    return null;
  }
  // healthBadge marks a rule's row on every tab.
  function healthBadge(kind, id) {
    const p = problemOf(kind, id);
    if (!p) return '';
    return ` <a class="badge ${esc(p.problem)}" data-health="${esc(p.problem)}" href="${ruleHref(kind, id)}" title="${esc(p.reason || '')}">${esc(p.problem)}</a>`;
  }

  // ---- rendering ----

  let rulesDirty = true;
  let activeTab = 'overview';

  let healthSig = '';
  function render() {
    healthMap = health();
    // The rules tab re-renders when the rules or their health change.
    const sig = `${redisDown()}|${[...healthMap.keys()].join(',')}`;
    if (sig !== healthSig) { healthSig = sig; rulesDirty = true; }
    renderBanner();
    switch (activeTab) {
      case 'overview': renderOverview(); break;
      case 'ratelimits': renderRateLimits(); break;
      case 'breakers': renderBreakers(); break;
      case 'canaries': renderCanaries(); break;
      case 'rules': if (rulesDirty) renderRules(); break;
      case 'detail': renderDetailLive(); break;
      default:
    }
  }

  // renderBanner shows, on every tab, that Redis is unreachable or that
  // this site is read-only.
  function renderBanner() {
    const parts = [];
    if (redisDown()) parts.push('<b>Redis is unreachable.</b> Rules from Redis are the last versions read (marked stale); rule writes are refused until it is back.');
    if (!model.writes) parts.push('This site serves the status page read-only (sluice_status without allow_writes).');
    const el = $('redis-banner');
    setHTML(el, parts.join(' '));
    el.hidden = parts.length === 0;
    el.classList.toggle('bad', redisDown());
  }

  function card(label, value, cls = '', title = '') {
    return `<div class="card" title="${esc(title)}"><div class="label">${esc(label)}</div><div class="value ${cls}">${value}</div></div>`;
  }

  function ago(iso) {
    if (!iso) return '';
    const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
    return s < 120 ? `${s} s ago` : s < 7200 ? `${Math.round(s / 60)} min ago` : `${Math.round(s / 3600)} h ago`;
  }

  function renderOverview() {
    const rs = store();
    const ov = model.overview || {};
    let redis = '<span class="muted">not configured</span>';
    if (rs.redis) redis = rs.connected ? '<span class="good">connected</span>' : '<span class="bad">unreachable</span>';
    const total = Object.values(rs.rules || {}).reduce((a, b) => a + b, 0);
    const prop = model.propMean;
    const probs = [...healthMap.values()];
    // Distinct rules whose newest version in Redis was refused (a resync
    // re-reading the same bad rule does not count it again).
    const rejected = probs.filter((p) => p.problem === 'rejected').length;
    const missing = probs.filter((p) => p.problem !== 'rejected').length;
    let openKeys = 0;
    let openRules = 0;
    for (const r of section(model.state, 'circuitbreaker')) {
      const s = breakerSummary(r);
      openKeys += r.open_keys || 0;
      if (s.state !== 'closed') openRules++;
    }
    const cards = [
      card('Redis', redis, '', 'whether this instance follows Redis for rule changes'),
      card('Writes go to', esc(rs.writes || '—')),
      card('Last resync', rs.last_resync ? `${esc(new Date(rs.last_resync).toLocaleTimeString())}<div class="label">${ago(rs.last_resync)}</div>` : '—'),
      card('Resyncs', num(rs.resyncs)),
      card('Propagation delay', prop === null ? '—' : `${(prop * 1000).toFixed(1)} ms`, '', 'mean delay from an admin API write to this instance applying it, over the latest changes'),
      card('Live instances', num(ov.live_instances), '', 'Caddy instances following the same Redis and prefix (heartbeats)'),
      card('Rules', num(total)),
      card('Rejected from Redis', num(rejected), rejected ? 'bad' : '', 'distinct rules whose version in Redis is refused as invalid (the last good version stays in force)'),
      card('Missing or skipped', num(missing), missing ? 'bad' : '', 'rules a handler refers to that do not exist, and rule keys with an invalid id'),
      card('Breakers not closed', `${num(openRules)}<div class="label">${num(openKeys)} keys open</div>`, openRules ? 'bad' : ''),
    ];
    setHTML($('overview-cards'), cards.join(''));

    const bySource = {};
    for (const [kind, ids] of Object.entries(rs.versions || {})) {
      bySource[kind] = {};
      for (const v of Object.values(ids)) bySource[kind][v.source] = (bySource[kind][v.source] || 0) + 1;
    }
    patchRows(table('kinds', ['Kind', '#In force', 'By source', '#Invalid or missing']), kinds.map((kind) => {
      const bad = probs.filter((p) => p.kind === kind).length;
      const src = Object.entries(bySource[kind] || {}).map(([s, n]) => `${esc(s)} ${n}`).join(', ');
      return { key: kind, attrs: { 'data-kind': kind }, cells: [cell(esc(kind)), cell(num((rs.rules || {})[kind] ?? 0), 'num'), cell(src || '<span class="muted">—</span>'), cell(bad, `num ${bad ? 'bad' : ''}`)] };
    }));

    setHTML($('problems'), probs.length === 0 ? '' : `<h2 class="bad">Rules not in force as written</h2>${probs.map((p) => {
      const why = [fieldPrefix(p) && `field ${esc(p.field)}`, esc(p.reason || '')].filter(Boolean).join(': ');
      const link = p.problem === 'skipped' ? `<code>${esc(p.id)}</code>` : ruleLink(p.kind, p.id);
      return `<div class="problem" data-problem="${esc(`${p.kind}/${p.id}`)}"><b>${link}</b> <span>${esc(p.kind)} · ${esc(p.problem)}</span> — ${why} <span class="muted">since ${esc(ago(p.since))}</span></div>`;
    }).join('')}`);
    renderChanges();
  }

  // renderChanges lists the fleet's recent rule changes: who, what, diff.
  function renderChanges() {
    const tb = table('changes', ['When', 'Rule', 'Change', 'Who']);
    if (typeof model.changes === 'string') {
      patchRows(tb, [{ key: 'error', cells: [cell(`Cannot read the change log: ${esc(model.changes)}`, 'bad', 4)] }]);
      return;
    }
    const list = model.changes || [];
    if (list.length === 0) {
      patchRows(tb, [{ key: 'none', cells: [cell('No change written through Sluice yet.', 'muted', 4)] }]);
      return;
    }
    patchRows(tb, list.map((c, i) => {
      const diff = (c.diff || []).map((d) => `<div><code>${esc(d.field)}</code> ${esc(d.old ?? '(unset)')} → ${esc(d.new ?? '(unset)')}</div>`).join('');
      return {
        key: `${c.kind}/${c.id}/${c.version}/${c.at}/${i}`,
        attrs: { 'data-change': `${c.kind}/${c.id}` },
        cells: [cell(esc(new Date(c.at).toLocaleTimeString())), cell(`${esc(c.kind)} ${ruleLink(c.kind, c.id)}${healthBadge(c.kind, c.id)}`),
          cell(`${esc(c.op)}${diff || (c.op === 'delete' ? '' : ' <span class="muted">(no diff recorded)</span>')}`), cell(`${esc(c.via || '')} <span class="muted">${esc(c.instance || '')}</span>`)],
      };
    }));
  }

  // spark draws allowed (solid) and refused (dashed, with dots) per second
  // over the last SPARK_SECONDS: told apart by line style, not colour alone.
  function spark(samples) {
    const W = 240;
    const H = 36;
    const now = Date.now();
    const from = now - SPARK_SECONDS * 1000;
    const pts = { allowed: [], refused: [] };
    let peak = 1;
    for (let i = 1; i < samples.length; i++) {
      const a = samples[i - 1];
      const b = samples[i];
      const dt = (b.t - a.t) / 1000;
      if (dt <= 0 || b.t < from) continue;
      const x = (((b.t - from) / (SPARK_SECONDS * 1000)) * W).toFixed(1);
      const ra = Math.max(0, (b.allowed - a.allowed) / dt);
      const rr = Math.max(0, (b.refused - a.refused) / dt);
      peak = Math.max(peak, ra, rr);
      pts.allowed.push([x, ra]);
      pts.refused.push([x, rr]);
    }
    const line = (p) => p.map(([x, v]) => `${x},${(H - 1 - (v / peak) * (H - 2)).toFixed(1)}`).join(' ');
    return `<svg class="spark" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img" aria-label="allowed (solid) and refused (dashed) per second, last 5 minutes, peak ${Math.round(peak)}/s">`
      + `<line class="axis" x1="0" y1="${H - 0.5}" x2="${W}" y2="${H - 0.5}"/>`
      + `<polyline class="allowed" points="${line(pts.allowed)}"/><polyline class="refused" points="${line(pts.refused)}"/>`
      + `<title>peak ${Math.round(peak)}/s</title></svg>`;
  }

  function rates(samples) {
    if (!samples || samples.length < 2) return { allowed: null, refused: null };
    const a = samples[samples.length - 2];
    const b = samples[samples.length - 1];
    const dt = (b.t - a.t) / 1000;
    return { allowed: (b.allowed - a.allowed) / dt, refused: (b.refused - a.refused) / dt };
  }

  // extras shows fields a section gained after this page was written
  // (adaptive limits, queues, analysis verdicts...), as key: value.
  function extras(obj, known) {
    const parts = [];
    for (const [k, v] of Object.entries(obj || {})) {
      if (known.includes(k) || v === null || v === undefined || v === '') continue;
      const shown = typeof v === 'object' ? JSON.stringify(v) : String(v);
      parts.push(`<span class="extra" data-field="${esc(k)}"><span class="muted">${esc(k)}</span> ${esc(shown.length > 120 ? `${shown.slice(0, 117)}…` : shown)}</span>`);
    }
    return parts.join('<br>');
  }

  // matchesFilter: a row matches when every word of the filter is in its
  // text (id, kind, fields, source, health...).
  function matchesFilter(filter, text) {
    if (!filter) return true;
    const t = text.toLowerCase();
    return filter.split(/\s+/).every((w) => t.includes(w));
  }

  function renderRateLimits() {
    const rules = section(model.state, 'ratelimit');
    const tb = table('rl-table', ['Rule', 'Type · scope', 'Last 5 min', '#Allowed/s', '#Refused/s', '#Refused total', '#In flight', '#Keys', 'Top keys (share of quota in use)', 'More']);
    if (rules.length === 0) {
      patchRows(tb, [{ key: 'none', cells: [cell('No rate-limit rule is used by a handler on this instance yet.', 'muted', 10)] }]);
      return;
    }
    patchRows(tb, rules.map((r) => {
      const samples = model.rl.get(r.rule) || [];
      const now = rates(samples);
      const last = samples[samples.length - 1] || { refused: 0 };
      const top = (r.top_keys || []).slice(0, 5).map((k) => `<div><code>${esc(k.key)}</code> ${bar(k.used || 0)} ${k.limited ? '<span class="bad">limited</span>' : ''}</div>`).join('');
      return {
        key: r.rule,
        cls: problemOf('rate_limit', r.rule) ? 'unhealthy' : '',
        attrs: { 'data-rule': r.rule, 'data-kind': 'rate_limit' },
        cells: [cell(`${ruleLink('rate_limit', r.rule)}${healthBadge('rate_limit', r.rule)}`), cell(`${esc(r.type)} · ${esc(r.scope)}`),
          cell(spark(samples)), cell(num(now.allowed), 'num allowed-rate'), cell(num(now.refused), `num refused-rate ${now.refused > 0 ? 'bad' : ''}`),
          cell(num(last.refused), 'num refused-total'), cell(num(r.in_flight), 'num'), cell(num(r.keys), 'num'),
          cell(top || '<span class="muted">—</span>'), cell(extras(r, ['rule', 'type', 'scope', 'requests', 'keys', 'in_flight', 'top_keys']))],
      };
    }));
  }

  // breakerSummary is a rule's state as its row shows it: the worst of its
  // default breaker and its keys, and how many keys are open or half-open.
  function breakerSummary(r) {
    const own = (r.breaker && r.breaker.state) || 'closed';
    const open = r.open_keys || 0;
    const half = r.half_open_keys || 0;
    let state = own;
    if (own === 'closed' || own === 'half_open') {
      if (open > 0) state = 'open';
      else if (half > 0 || own === 'half_open') state = 'half_open';
    }
    const keys = r.keys ? `${num(open)} of ${num(r.keys)} keys open${half ? `, ${num(half)} half-open` : ''}` : '';
    return { state, keys };
  }

  // threshold formats a rule field that is a percentage or count, "" when unset.
  function threshold(fields, name) {
    const v = fields && fields[name];
    return v ? ` <span class="muted">/ ${esc(v)}${/%$/.test(v) || name.endsWith('_threshold') ? '' : '%'}</span>` : '';
  }

  function breakerCells(b, fields, shown) {
    const w = b.window;
    const fr = w && w.calls ? w.failures / w.calls : null;
    const sr = w && w.calls ? w.slow / w.calls : null;
    const st = shown || b.state;
    const half = b.probe_due ? 'next call probes' : b.state === 'open' && b.open_for_seconds ? `${b.open_for_seconds.toFixed(1)} s` : b.state === 'half_open' ? `probing (${num(b.half_open_probes)})` : '';
    return [cell(`<span class="badge ${esc(st)}">${esc(st)}</span>${b.ramping ? ' <span class="muted">ramping</span>' : ''}`, 'state'),
      cell(half || '<span class="muted">—</span>', 'num half-open'),
      cell(`${pct(fr)}${threshold(fields, 'failure_rate')}`, 'num'),
      cell(`${pct(sr)}${threshold(fields, 'slow_call_rate')}`, 'num'),
      cell(`${num(b.consecutive_failures)}${threshold(fields, 'failure_threshold')}`, 'num'),
      cell(w ? num(w.calls) : '—', 'num')];
  }

  const BREAKER_HEAD = ['Rule · key', 'State', '#Half-open in', '#Failure rate / threshold', '#Slow calls / threshold', '#Consecutive failures', '#Window calls', 'Mode', '#Rejected', 'Calls', 'Actions'];

  function renderBreakers() {
    const rules = section(model.state, 'circuitbreaker');
    const defs = model.rules.circuit_breaker || {};
    const tb = table('cb-table', BREAKER_HEAD);
    const rows = [];
    let open = 0;
    let half = 0;
    let keys = 0;
    if (rules.length === 0) rows.push({ key: 'none', cells: [cell('No circuit-breaker rule is used by a handler on this instance yet.', 'muted', 11)] });
    for (const r of rules) {
      const fields = (defs[r.rule] || {}).fields || {};
      const s = breakerSummary(r);
      open += r.open_keys || 0;
      half += r.half_open_keys || 0;
      keys += r.keys || 0;
      const calls = Object.entries(r.calls || {}).map(([k, v]) => `${esc(k)} ${num(v)}`).join(' · ');
      const mode = r.override ? `<b class="warn">override: ${esc(r.override)}</b>` : esc(r.rule_state);
      const id = esc(r.rule);
      const nt = (r.transitions || []).length;
      const cells = breakerCells(r.breaker || {}, fields, s.state);
      if (s.keys) cells[0].html += ` <span class="keys-open">${esc(s.keys)}</span>`;
      rows.push({
        key: `rule|${r.rule}`,
        cls: problemOf('circuit_breaker', r.rule) ? 'unhealthy' : '',
        attrs: { 'data-breaker': r.rule },
        cells: [cell(`${ruleLink('circuit_breaker', r.rule)}${healthBadge('circuit_breaker', r.rule)}${r.keys ? ` <span class="muted">${num(r.keys)} keys</span>` : ''}`
          + ` <a href="#breakers" data-action="transitions" data-id="${id}" class="small">${num(nt)} transitions (1 h)</a>`),
        ...cells, cell(mode, 'mode'), cell(num(r.rejected), 'num'), cell(calls),
        cell(`<button type="button" data-action="breaker" data-id="${id}" data-op="force_open" class="danger"${model.writes ? '' : ' disabled'}>Force open</button> `
          + `<button type="button" data-action="breaker" data-id="${id}" data-op="force_closed"${model.writes ? '' : ' disabled'}>Force closed</button> `
          + `<button type="button" data-action="breaker" data-id="${id}" data-op="reset"${model.writes ? '' : ' disabled'}>Auto</button>`
          + `${r.keys ? ` <button type="button" data-action="keys" data-id="${id}">All ${num(r.keys)} keys…</button>` : ''}`, 'actions')],
      });
      for (const k of r.key_states || []) {
        rows.push({ key: `key|${r.rule}|${k.key}`, cls: 'sub', attrs: { 'data-breaker-key': `${r.rule}|${k.key}` },
          cells: [cell(`<code class="key">${esc(k.key)}</code>`), ...breakerCells(k, fields), cell('', '', 4)] });
      }
      if (r.keys > (r.key_states || []).length) {
        rows.push({ key: `more|${r.rule}`, cls: 'sub', cells: [cell(`${num(r.keys - (r.key_states || []).length)} more keys: <button type="button" data-action="keys" data-id="${id}">browse all keys</button>`, 'muted', 11)] });
      }
    }
    patchRows(tb, rows);
    setHTML($('cb-summary'), `${num(rules.length)} breaker rules · <span class="${open ? 'bad' : ''}" data-summary="open">${num(open)} keys open</span> · <span class="${half ? 'warn' : ''}" data-summary="half_open">${num(half)} half-open</span> · ${num(keys)} keys in all`);
    renderKeyBrowser();
    renderTransitions(rules);
  }

  // renderTransitions lists the state changes the server kept for the
  // last hour, newest first (for one rule after its row's link).
  function renderTransitions(rules) {
    const list = [];
    for (const r of rules) {
      if (model.transRule && r.rule !== model.transRule) continue;
      for (const t of r.transitions || []) list.push({ rule: r.rule, ...t });
    }
    list.sort((a, b) => Date.parse(b.at) - Date.parse(a.at));
    setHTML($('cb-transitions-title'), model.transRule ? `Transitions of ${esc(model.transRule)}, last hour <button type="button" data-action="transitions" data-id="">show all</button>` : 'Transitions, last hour');
    const tb = table('cb-transitions', ['When', 'Rule · key', 'From', 'To', 'Reason']);
    if (list.length === 0) {
      patchRows(tb, [{ key: 'none', cells: [cell('None in the last hour.', 'muted', 5)] }]);
      return;
    }
    patchRows(tb, list.slice(0, TRANSITIONS_SHOWN).map((t) => ({
      key: `${t.rule}|${t.key || ''}|${t.at}|${t.to}`,
      attrs: { 'data-transition': t.rule },
      cells: [cell(esc(new Date(t.at).toLocaleTimeString())), cell(`${ruleLink('circuit_breaker', t.rule)}${t.key ? ` · <code>${esc(t.key)}</code>` : ''}`),
        cell(`<span class="badge ${esc(t.from)}">${esc(t.from)}</span>`), cell(`<span class="badge ${esc(t.to)}">${esc(t.to)}</span>`), cell(esc(t.reason || ''))],
    })));
  }

  // The key browser: every key of one keyed rule, worst first, searchable
  // and paged (GET ui/breaker_keys.json).
  async function loadKeys() {
    const k = model.keys;
    if (!k) return;
    try {
      k.page = await getJSON(`${API}ui/breaker_keys.json?rule=${encodeURIComponent(k.rule)}&q=${encodeURIComponent(k.q)}&offset=${k.offset}&limit=${KEY_PAGE}`);
      k.error = null;
    } catch (e) {
      k.error = e.message;
    }
    k.at = Date.now();
    renderKeyBrowser();
  }

  function renderKeyBrowser() {
    const k = model.keys;
    const box = $('cb-keys');
    box.hidden = !k;
    if (!k) return;
    if (Date.now() - (k.at || 0) > POLL_MS && !k.loading) {
      k.loading = true;
      loadKeys().finally(() => { k.loading = false; });
    }
    $('cb-keys-title').textContent = `Keys of ${k.rule}, worst first`;
    const p = k.page;
    const tb = table('cb-keys-table', ['Key', 'State', '#Half-open in', '#Failure rate', '#Slow calls', '#Consecutive failures', '#Window calls']);
    if (k.error) {
      patchRows(tb, [{ key: 'error', cells: [cell(esc(k.error), 'bad', 7)] }]);
    } else if (p) {
      patchRows(tb, p.keys.map((b) => ({ key: b.key, attrs: { 'data-key': b.key }, cells: [cell(`<code class="key">${esc(b.key)}</code>`), ...breakerCells(b, {})] })));
      $('cb-keys-count').textContent = p.matched === 0 ? 'no key matches' : `${num(p.offset + 1)}–${num(p.offset + p.keys.length)} of ${num(p.matched)} matching (${num(p.total)} keys)`;
      $('cb-keys-prev').disabled = p.offset === 0;
      $('cb-keys-next').disabled = p.offset + p.keys.length >= p.matched;
    }
  }

  // Go durations as rules write them: 90s, 1h30m, 500ms.
  function parseDuration(s) {
    const units = { ns: 1e-6, us: 1e-3, 'µs': 1e-3, ms: 1, s: 1e3, m: 60e3, h: 3600e3 };
    let ms = 0;
    let matched = '';
    for (const m of String(s).matchAll(/(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g)) { ms += parseFloat(m[1]) * units[m[2]]; matched += m[0]; }
    return matched === s && ms > 0 ? ms : null;
  }

  // ramp computes a gray rule's weight in force and progress from its ramp
  // field, as every instance does from the same clock.
  function ramp(spec) {
    const w = String(spec || '').trim().split(/\s+/);
    const start = Date.parse(w[0]);
    const d = parseDuration(w[1]);
    if (!spec || Number.isNaN(start) || !d) return null;
    const el = Date.now() - start;
    if (w.length === 2) {
      const p = Math.min(Math.max(el / d, 0), 1);
      return { weight: p * 100, progress: p, note: `linear over ${w[1]}` };
    }
    const steps = (w[2] || '').split(',').map((x) => parseFloat(x));
    if (el < 0) return { weight: 0, progress: 0, note: `starts ${new Date(start).toLocaleString()}` };
    const i = Math.min(Math.floor(el / d), steps.length - 1);
    return { weight: steps[i], progress: (i + 1) / steps.length, note: `step ${i + 1} of ${steps.length}, every ${w[1]}` };
  }

  // ms formats seconds as milliseconds ("—" when not measured).
  const ms = (s) => (s > 0 ? `${(s * 1000).toFixed(s < 0.01 ? 2 : 1)} ms` : '—');

  // verdict shows a canary analysis's newest interval: outcome, action and
  // why, then errors and latency per version and the scores against the
  // line (the fields of /sluice/state's grayroute.analysis).
  function verdict(a) {
    const iv = a.intervals || [];
    const v = iv[iv.length - 1];
    if (!v) return `<div class="analysis" data-analysis="${esc(a.rule)}"><span class="muted">analysing, no interval judged yet</span></div>`;
    const errs = (n, e, r) => `${num(n)} req · ${num(e)} errors (${pct(r)})`;
    return `<div class="analysis" data-analysis="${esc(a.rule)}">`
      + `<span class="badge ${esc(v.outcome)}">${esc(v.outcome)}</span> <b class="action">${esc(v.action)}</b>`
      + `${v.action === 'advance' ? ` → ${num(v.new_weight)}%` : ''} <span class="muted reason">${esc(v.reason)}</span>`
      + `<div data-version="${esc(a.target)}"><code>${esc(a.target)}</code> canary: <span class="canary-errors">${errs(v.canary_requests, v.canary_errors, v.canary_error_rate)}</span> · latency ${ms(v.canary_latency_seconds)}</div>`
      + `<div data-version="${esc(a.fallback)}"><code>${esc(a.fallback)}</code> baseline: ${errs(v.baseline_requests, v.baseline_errors, v.baseline_error_rate)} · latency ${ms(v.baseline_latency_seconds)}${v.latency_limit_seconds > 0 ? ` <span class="muted">(limit ${ms(v.latency_limit_seconds)})</span>` : ''}</div>`
      + `<div class="muted">scores: errors ${num(v.error_evidence)}, latency ${num(v.latency_evidence)} / ${num(v.fail_bound)} · failing intervals ${num(v.failing_intervals)} · ${esc(v.scope)}${v.written ? ' · written here' : ''} · ${esc(ago(v.at))}</div></div>`;
  }


  // matchText says which requests a gray rule takes: its match condition
  // (every request when it has none).
  function matchText(f) {
    if (!f.match_tag && !f.match_value) return 'every request';
    const src = f.match_source ? `${f.match_source} ` : '';
    return `${src}${f.match_tag || ''}${f.match_value ? ` = ${f.match_value}` : ''}`;
  }

  function renderCanaries() {
    const defs = model.rules.gray || {};
    const splits = {};
    for (const s of section(model.state, 'grayroute')) splits[s.rule] = s;
    const analyses = {};
    const gs = model.state && model.state.grayroute;
    for (const a of (gs && Array.isArray(gs.analysis) ? gs.analysis : [])) (analyses[a.rule] = analyses[a.rule] || []).push(a);
    // Rules a route binding lists count as in use even before a request.
    const bound = new Set();
    for (const b of Object.values(model.rules.binding || {})) for (const id of String((b.fields || {}).gray || '').split(/[\s,]+/)) if (id) bound.add(id);
    const totalOf = (s) => Object.values((s && s.versions) || {}).reduce((a, b) => a + b, 0);
    let all = 0;
    for (const s of Object.values(splits)) all += totalOf(s);
    const unmatched = totalOf(splits['']);
    setHTML($('gray-summary'), all === 0 ? 'No gray decision on this instance yet.'
      : `<span data-summary="unmatched">${num(unmatched)} of ${num(all)} requests (${pct(unmatched / all)}) matched no gray rule</span> and went to the default upstream${unmatched ? ` (${Object.entries(splits[''].versions).map(([v, n]) => `${esc(v || 'default')} ${num(n)}`).join(', ')})` : ''}.`);
    const filter = $('gray-filter').value.trim().toLowerCase();
    const ids = [...new Set([...Object.keys(defs), ...Object.keys(splits).filter((x) => x !== '')])];
    const used = (id) => totalOf(splits[id]) > 0 || (analyses[id] || []).length > 0 || bound.has(id);
    // The rules the store holds first, those in use before the rest, the
    // busiest first; last, counters of rules no longer held (since start).
    const rank = (id) => (defs[id] ? 0 : 2) + (used(id) ? 0 : 1);
    ids.sort((a, b) => (rank(a) - rank(b)) || (totalOf(splits[b]) - totalOf(splits[a])) || (a < b ? -1 : 1));
    const tb = table('gray-table', ['Rule', 'Match', 'Target · fallback', 'State', '#Weight in force', 'Ramp', 'Requests per version', 'Analysis (last interval)', 'More', 'Actions']);
    const rows = [];
    for (const id of ids) {
      const f = (defs[id] || {}).fields || {};
      const p = problemOf('gray', id);
      // The analysis reports the rule as held now; else the page computes
      // the weight from ramp as every instance does, or reads weight.
      const an = (analyses[id] || []).filter((a) => !f.target_version || a.target === f.target_version);
      const rp = ramp(f.ramp);
      const weight = an.length ? an[0].weight : rp ? rp.weight : f.weight !== undefined ? parseFloat(f.weight) : null;
      const inUse = used(id);
      const state = an.length ? an[0].state : f.state || 'running';
      const s = splits[id] || {};
      const vs = s.versions || {};
      const total = totalOf(s);
      const text = `${id} gray ${matchText(f)} ${f.target_version || ''} ${f.fallback_version || ''} ${state} ${inUse ? 'used' : 'unused'} ${p ? `${p.problem} problem` : ''} ${JSON.stringify(f)}`;
      if (!matchesFilter(filter, text)) continue;
      const per = Object.entries(vs).sort().map(([v, n]) => `<span data-version="${esc(v)}"><code>${esc(v)}</code> ${num(n)}${total ? ` <span class="muted">(${((n / total) * 100).toFixed(1)}%)</span>` : ''}</span>`).join(' · ');
      const ramping = rp ? `${bar(rp.progress)} ${Math.round(rp.progress * 100)}% <span class="muted">${esc(rp.note)}</span>` : '<span class="muted">—</span>';
      rows.push({
        key: id,
        cls: [p ? 'unhealthy' : '', inUse ? '' : 'unused'].join(' ').trim(),
        attrs: { 'data-gray': id },
        cells: [cell(`${defs[id] ? ruleLink('gray', id) : esc(id)}${healthBadge('gray', id)}${inUse ? '' : ' <span class="badge unused" title="no request was decided by it on this instance and no route binding lists it">unused</span>'}`),
          cell(`<code>${esc(matchText(f))}</code>`, 'match'),
          cell(`<code>${esc(f.target_version || '')}</code> · <span class="fallback">${f.fallback_version ? `<code>${esc(f.fallback_version)}</code>` : '<span class="muted">default upstream</span>'}</span>`),
          cell(p && p.problem === 'rejected' ? `<span class="badge rejected">${esc(state)}, last good version</span>` : `<span class="badge ${esc(inUse ? state : 'unused')}">${esc(inUse ? state : 'unused')}</span>`, 'state'),
          cell(weight === null || Number.isNaN(weight) ? '—' : `${weight.toFixed(2).replace(/\.?0+$/, '')}%`, 'num weight'), cell(ramping),
          cell(`${per || '<span class="muted">no requests yet</span>'}${s.random ? ` · random ${num(s.random)}` : ''}`),
          cell(an.length ? an.map(verdict).join('') : '<span class="muted">off</span>'),
          cell(extras(s, ['rule', 'versions', 'random'])),
          cell(defs[id] ? `<button type="button" data-action="weight" data-id="${esc(id)}"${model.writes && !redisDown() ? '' : ' disabled'}>Set weight</button>` : '', 'actions')],
      });
    }
    if (rows.length === 0) rows.push({ key: 'none', cells: [cell(ids.length ? 'No gray rule matches the filter.' : 'No gray rules.', 'muted', 10)] });
    patchRows(tb, rows);
  }

  // fieldPrefix: name the field before the reason, unless the reason
  // already starts with it ("field qps=…: want a number").
  const fieldPrefix = (p) => !!p.field && !(p.reason || '').startsWith(`field ${p.field}`);

  function renderRules() {
    rulesDirty = false;
    const filter = $('rule-filter').value.trim().toLowerCase();
    const onlyProblems = $('problems-only').checked;
    const rows = [];
    let n = 0;
    let shown = 0;
    const row = (kind, id, r, p) => {
      const fields = r ? Object.entries(r.fields || {}).map(([k, v]) => `${k}=${v}`).join(' ') : '';
      const text = `${kind} ${id} ${r ? r.source : ''} ${fields} ${p ? `${p.problem} problem ${p.field || ''} ${p.reason || ''}` : ''}`;
      if ((onlyProblems && !p) || !matchesFilter(filter, text)) return;
      shown++;
      rows.push({
        key: `${kind}/${id}`,
        cls: p ? 'unhealthy' : '',
        attrs: { 'data-rule': id, 'data-kind': kind },
        cells: [cell(esc(kind)), cell(`${r ? ruleLink(kind, id) : `<code>${esc(id)}</code>`}${healthBadge(kind, id)}${p ? ` <span class="bad reason">${esc(fieldPrefix(p) ? `field ${p.field}: ` : '')}${esc(p.reason || '')}</span>` : ''}`),
          cell(esc(r ? r.source : '—')), cell(r ? `<code>${esc(r.version)}</code>` : '<span class="muted">none in force</span>', 'version'),
          cell(`<code>${esc(fields.length > 140 ? `${fields.slice(0, 137)}…` : fields)}</code>`, 'fields')],
      });
    };
    for (const kind of kinds) {
      for (const id of Object.keys(model.rules[kind] || {}).sort()) {
        n++;
        row(kind, id, model.rules[kind][id], problemOf(kind, id));
      }
    }
    // Rules the store names as missing, rejected or skipped but does not hold.
    for (const p of healthMap.values()) {
      if (!(model.rules[p.kind] || {})[p.id]) { n++; row(p.kind, p.id, null, p); }
    }
    patchRows(table('rules-table', ['Kind', 'Rule', 'Source', 'Version', 'Fields']), rows);
    $('rule-count').textContent = `${num(shown)} of ${num(n)} rules shown`;
  }

  // ---- rule detail ----

  async function openDetail(kind, id) {
    model.detail = { kind, id, rule: null, etag: null, history: null, error: null, result: '' };
    $('detail-body').innerHTML = '<p class="muted">loading…</p>';
    try {
      const r = await request('GET', rulePath(kind, id));
      Object.assign(model.detail, { rule: r.data, etag: r.etag });
    } catch (e) {
      model.detail.error = e.message;
    }
    model.detail.history = await loadHistory(kind, id);
    renderDetail();
  }

  // loadHistory reads the rule's recorded changes, newest first; a string
  // is why they could not be read (Redis unreachable, say).
  async function loadHistory(kind, id) {
    try {
      const h = await getJSON(`${rulePath(kind, id)}/history`);
      return Array.isArray(h) ? h : [];
    } catch (e) {
      return e.message;
    }
  }

  const fieldList = (f) => Object.entries(f || {}).sort().map(([k, v]) => `${k}=${v}`).join(' ');

  // healthBox says, on the rule's own page, why it is not in force as
  // written: the stored bad value beside the last good one.
  function healthBox(kind, id, rule) {
    const p = problemOf(kind, id);
    if (!p) return '<p class="good" data-health="ok">In force as written.</p>';
    const good = rule ? `<code>${esc(fieldList(rule.fields))}</code> <span class="muted">(version ${esc(rule.version)})</span>` : '<span class="muted">none: no version of this rule is in force</span>';
    return `<div class="problem" data-health="${esc(p.problem)}"><b>${esc(p.problem)}</b>${p.field ? ` · field <code>${esc(p.field)}</code>` : ''}: ${esc(p.reason || '')}`
      + `${p.since ? ` <span class="muted">since ${esc(ago(p.since))}</span>` : ''}`
      + `${p.stored ? `<div>Stored in Redis (refused): <code class="stored">${esc(fieldList(p.stored))}</code>${p.version ? ` <span class="muted">(version ${esc(p.version)})</span>` : ''}</div>` : ''}`
      + `<div>In force (last good): <span class="last-good">${good}</span></div></div>`;
  }

  // writeBlocked says why the editor cannot write now ('' when it can).
  function writeBlocked() {
    if (!model.writes) return 'This site is read-only (sluice_status without allow_writes).';
    if (redisDown()) return 'Redis is unreachable: writes are refused until it is back.';
    return '';
  }

  function renderDetail() {
    const d = model.detail;
    if (!d) return;
    if (d.error && !d.rule) {
      $('detail-body').innerHTML = `<h2>${esc(d.kind)} ${esc(d.id)}</h2><div id="detail-health">${healthBox(d.kind, d.id, null)}</div><div class="problem">${esc(d.error)}</div>`;
      return;
    }
    const r = d.rule;
    // Where each field comes from: on a rule declared in the config
    // (static), the fields held in Redis or memory (overlay) win and the
    // rest are as declared; a rule not declared has one source throughout.
    const from = (k) => (r.static && r.overlay ? (k in r.overlay ? `${r.source} overlay` : 'static') : r.source);
    const fields = Object.entries(r.fields || {}).sort().map(([k, v]) => `<tr><td><code>${esc(k)}</code></td><td><code>${esc(v)}</code></td><td>${esc(from(k))}</td></tr>`).join('');
    const hist = typeof d.history === 'string'
      ? `<div class="problem">Cannot read the history: ${esc(d.history)}</div>`
      : d.history.length === 0 ? '<p class="muted">No recorded changes.</p>'
        : `<table id="detail-history"><tr><th>When</th><th>Op</th><th>Version</th><th>Via</th><th>Fields</th></tr>${d.history.map((h) => `<tr><td>${esc(h.at ? new Date(h.at).toLocaleString() : '')}</td><td>${esc(h.op)}</td><td><code>${esc(h.version)}</code></td><td>${esc(h.via || '')} ${esc(h.instance || '')}</td><td><code>${esc(Object.entries(h.fields || {}).map(([k, v]) => `${k}=${v}`).join(' '))}</code></td></tr>`).join('')}</table>`;
    $('detail-body').innerHTML = `<h2>${esc(r.kind)} <code>${esc(r.id)}</code></h2>`
      + `<div id="detail-health"></div>`
      + `<p>Source: <b>${esc(r.source)}</b> · version <code>${esc(r.version)}</code>${d.etag ? ` · ETag <code>${esc(d.etag)}</code>` : ''}</p>`
      + `<table id="detail-fields"><tr><th>Field</th><th>Value</th><th>From</th></tr>${fields}</table>`
      + '<h2>Live</h2><div id="detail-live"></div>'
      + (r.kind === 'rate_limit' ? quotaBox(r) : '')
      + `<h2>Edit</h2><p class="muted">The rule's fields as JSON. Apply writes only the fields you change (PATCH); a field you remove or set to null is unset${r.static ? ' from the overlay, back to its value in the config' : ''}. ${d.etag ? 'Validate runs a dry run; Apply writes only if the rule is still at the version shown (If-Match).' : 'This server has no dry run: Apply validates the rule and writes nothing if it is invalid.'}</p>`
      + `<label for="edit-fields" class="sr-only">Fields of ${esc(r.id)} as JSON</label><textarea id="edit-fields" spellcheck="false">${esc(JSON.stringify(r.fields || {}, null, 2))}</textarea>`
      + `<p><button type="button" data-action="validate">Validate</button> <button type="button" data-action="apply" class="primary">Apply…</button> <span id="write-blocked" class="warn"></span></p><div id="edit-result" role="status">${d.result}</div>`
      + `<h2>History</h2>${hist}`;
    renderDetailLive();
  }

  // quotaBox asks for one key's use of a rate_limit rule: GET quota, or
  // for a level of a nested quota GET quota_tree, its use at every level.
  function quotaBox(r) {
    const tree = !!(r.fields && r.fields.parent);
    return `<h2>Quota of a key</h2><p class="muted">${tree ? 'A key\'s use at every level of its tree: used, guaranteed, borrowed, ceiling.' : 'A key\'s use of this rule.'} Give the key as stored, or the request values a request would carry (<code>header.X-Team=a&amp;header.X-Org=acme</code>).</p>`
      + '<p><label for="quota-key">Key or request values</label> <input id="quota-key" type="search"> <button type="button" data-action="quota">Show</button></p><div id="quota-result" role="status"></div>';
  }

  async function onQuota() {
    const d = model.detail;
    const input = $('quota-key');
    if (!d || !d.rule || !input) return;
    const v = input.value.trim();
    const view = d.rule.fields && d.rule.fields.parent ? 'quota_tree' : 'quota';
    const path = `${API}${view}/${encodeURIComponent(d.id)}${v.includes('=') ? `?${v}` : `/${encodeURIComponent(v)}`}`;
    try {
      setHTML($('quota-result'), quotaHTML(await getJSON(path)));
    } catch (e) {
      setHTML($('quota-result'), `<div class="problem">${esc(e.message)}</div>`);
    }
  }

  // quotaHTML is a key's use, one row per level (a flat rule is one level).
  function quotaHTML(q) {
    const levels = q.levels || [{ rule: q.rule, key: q.key, ceiling: q.limit, used: q.used, remaining: q.remaining }];
    const row = (l) => `<tr><td><code>${esc(l.rule)}</code></td><td><code class="key">${esc(l.key)}</code></td><td class="num">${num(l.used)}</td>`
      + `<td class="num">${l.guarantee_percent ? `${num(l.guarantee_percent)}%` : '—'}</td><td class="num">${l.guarantee_percent ? num(l.guaranteed_used) : '—'}</td>`
      + `<td class="num">${l.guarantee_percent ? num(Math.max(l.used - l.guaranteed_used, 0)) : '—'}</td><td class="num">${num(l.remaining)}</td><td class="num">${num(l.ceiling)}</td></tr>`;
    return `<table id="quota-levels"><tr><th>Level</th><th>Key</th><th>Used</th><th>Guarantee</th><th>Guaranteed used</th><th>Borrowed</th><th>Remaining</th><th>Ceiling</th></tr>${levels.map(row).join('')}</table>`;
  }

  // renderDetailLive refreshes what changes under an open rule page: its
  // health, whether Apply can write, and its live state.
  function renderDetailLive() {
    const d = model.detail;
    const el = $('detail-live');
    if (!d || !el) return;
    setHTML($('detail-health'), healthBox(d.kind, d.id, d.rule));
    const blocked = writeBlocked();
    const apply = document.querySelector('#detail-body button[data-action="apply"]');
    if (apply) apply.disabled = !!blocked;
    $('write-blocked').textContent = blocked;
    const find = (name) => section(model.state, name).find((x) => x.rule === d.id);
    const live = d.kind === 'rate_limit' ? find('ratelimit') : d.kind === 'circuit_breaker' ? find('circuitbreaker') : d.kind === 'gray' ? find('grayroute') : null;
    setHTML(el, live ? `<pre>${esc(JSON.stringify(live, null, 2))}</pre>` : '<p class="muted">No live state on this instance (the rule is not used by a handler here, or has no state).</p>');
  }

  function readEdit() {
    const text = $('edit-fields').value;
    const f = JSON.parse(text);
    if (!f || typeof f !== 'object' || Array.isArray(f)) throw new Error('want a JSON object of fields');
    return f;
  }

  // editPatch turns the edited fields into the single-field changes a PATCH
  // sends, so the store holds exactly what the user changed: a field whose
  // value differs (or is new) is set; one removed from the JSON, or set to
  // null, is unset (null). On a rule declared in the config a field can only
  // be unset from the overlay (it then reads as declared): a declared field
  // the overlay does not hold cannot be removed here and is listed in kept.
  function editPatch(rule, edited) {
    const before = rule.fields || {};
    const overlay = rule.overlay || {};
    const patch = {};
    const kept = [];
    const unset = (k) => {
      if (rule.static && !(k in overlay)) kept.push(k);
      else patch[k] = null;
    };
    for (const [k, v] of Object.entries(edited)) {
      if (v === null) {
        if (k in before) unset(k);
      } else if (typeof v === 'object') {
        throw new Error(`field ${k}: want a string, number or boolean (or null to unset it)`);
      } else if (before[k] !== String(v)) {
        patch[k] = v;
      }
    }
    for (const k of Object.keys(before)) if (!(k in edited)) unset(k);
    return { patch, kept: kept.sort() };
  }

  // editNote says what an edit leaves alone: declared fields it cannot
  // remove, or that it changes nothing.
  function editNote(patch, kept) {
    const parts = [];
    if (kept.length) parts.push(`<p class="warn">Declared in the config, kept as declared (change them there): ${kept.map((k) => `<code>${esc(k)}</code>`).join(', ')}.</p>`);
    if (Object.keys(patch).length === 0) parts.push('<p class="muted">No change to write.</p>');
    return parts.join('');
  }

  const rulePath = (kind, id) => `${API}rules/${encodeURIComponent(kind)}/${encodeURIComponent(id)}`;

  // dryRun validates a write with ?dry_run=true. Only servers that send an
  // ETag implement it; older ones would write, so they are not asked. A
  // rate_limit rule's dry run also replays the last 10 minutes of its
  // traffic on every live instance (impact=10m): what the change would
  // have refused or allowed.
  async function dryRun(kind, id, fields, etag, method = 'PUT') {
    if (!etag) return null;
    const headers = { 'If-Match': etag };
    const impact = kind === 'rate_limit' ? '&impact=10m' : '';
    const r = await request(method, `${rulePath(kind, id)}?dry_run=true${impact}`, { body: fields, headers });
    return r.data || {};
  }

  // impactHTML shows a dry run's impact (none: '').
  function impactHTML(res) {
    const m = res && res.impact;
    if (!m) return '';
    const n = (v) => Number(v || 0).toLocaleString('en');
    const top = (m.top_keys || []).filter((k) => k.newly_refused || k.newly_allowed).slice(0, 5)
      .map((k) => `<li><code>${esc(k.key)}</code>: ${n(k.newly_refused)} newly refused, ${n(k.newly_allowed)} newly allowed</li>`).join('');
    const approx = (m.approximate || []).map((a) => `<li>${esc(a)}</li>`).join('');
    return `<div class="impact"><p>Impact on the last ${esc(m.window)} of traffic (${n(m.instances && m.instances.answered)} of ${n(m.instances && m.instances.asked)} instances answered): `
      + `${n(m.requests)} requests, ${n(m.refused_now)} refused now, ${n(m.refused_proposed)} refused after the change; `
      + `<strong>${n(m.newly_refused)} newly refused</strong> (${n(m.keys_newly_refused)} keys), <strong>${n(m.newly_allowed)} newly allowed</strong> (${n(m.keys_newly_allowed)} keys).</p>`
      + (top ? `<ul>${top}</ul>` : '') + (approx ? `<p class="muted">Approximate:</p><ul class="muted">${approx}</ul>` : '') + '</div>';
  }

  function diffText(before, after, res) {
    if (res && Array.isArray(res.diff)) {
      return res.diff.map((c) => `${c.change || ''} ${c.field}: ${c.old ?? ''} → ${c.new ?? ''}`).join('\n') || 'no change';
    }
    const lines = [];
    for (const k of [...new Set([...Object.keys(before || {}), ...Object.keys(after)])].sort()) {
      const a = (before || {})[k];
      const b = after[k];
      if (a !== b) lines.push(`${k}: ${a ?? '(unset)'} → ${b ?? '(unset)'}`);
    }
    return lines.join('\n') || 'no change';
  }

  // patched is before with a PATCH applied locally (null unsets), for the
  // diff where the server has no dry run to answer it.
  function patched(before, fields) {
    const out = { ...before, ...fields };
    for (const [k, v] of Object.entries(fields)) if (v === null) delete out[k];
    return out;
  }

  // applyRule: dry run where supported, confirm with the diff, then write
  // (PUT the fields, or PATCH single ones) with If-Match where the server
  // gave an ETag. note is shown in the confirm under the diff.
  async function applyRule(kind, id, fields, before, etag, method = 'PUT', note = '') {
    const res = await dryRun(kind, id, fields, etag, method);
    const after = method === 'PATCH' ? patched(before, fields) : fields;
    const ok = await confirmDialog(`Write ${kind} rule ${id}?`,
      `<p>${res ? 'The dry run passed. Changes:' : 'Changes (the server validates on write):'}</p><pre class="diff">${esc(diffText(before, after, res))}</pre>${impactHTML(res)}${note}`);
    if (!ok) return null;
    const headers = etag ? { 'If-Match': etag } : {};
    const r = await request(method, rulePath(kind, id), { body: fields, headers });
    model.rulesAt = 0; // re-read the rules at the next poll
    return r.data;
  }

  // untilVersion waits (up to 5 s) until this instance serves the version
  // just written: a write through Redis applies when its publish comes back.
  async function untilVersion(kind, id, version) {
    for (let i = 0; version && i < 50; i++) {
      try {
        if ((await getJSON(rulePath(kind, id))).version === version) return;
      } catch { /* not there yet */ }
      await new Promise((r) => { setTimeout(r, 100); });
    }
  }

  // ---- actions ----

  // The confirm dialog gives focus back to what opened it when it closes.
  let confirmResolve = null;
  let confirmOpener = null;
  function confirmDialog(title, bodyHTML) {
    if (!$('confirm').open) confirmOpener = document.activeElement;
    $('confirm-title').textContent = title;
    $('confirm-body').innerHTML = bodyHTML;
    if (!$('confirm').open) $('confirm').showModal();
    return new Promise((resolve) => { confirmResolve = resolve; });
  }
  function closeConfirm(ok) {
    $('confirm').close();
    const opener = confirmOpener;
    confirmOpener = null;
    if (opener && opener.isConnected && typeof opener.focus === 'function') opener.focus();
    if (confirmResolve) { const r = confirmResolve; confirmResolve = null; r(ok); }
  }

  function notice(text, bad = false) {
    const el = bad ? $('error') : $('notice');
    el.textContent = text;
    el.hidden = false;
    clearTimeout(el.timer);
    el.timer = setTimeout(() => { el.hidden = true; }, 8000);
  }

  const breakerOps = { force_open: 'Force open', force_closed: 'Force closed', reset: 'Auto (drop the override)' };

  async function onBreaker(id, op) {
    const ok = await confirmDialog(`${breakerOps[op]}: ${id}?`,
      `<p>Runs <code>POST ${esc(API)}breakers/${esc(id)}/${esc(op)}</code> on this Caddy instance only (not on the rest of the fleet). ${op === 'force_open' ? 'Every request through the breaker is refused until you choose Auto.' : ''}</p>`);
    if (!ok) return;
    try {
      const r = await request('POST', `${API}breakers/${encodeURIComponent(id)}/${op}`);
      const st = r.data && r.data.state && r.data.state.breaker ? r.data.state.breaker.state : '';
      notice(`Breaker ${id}: ${op} done${st ? `, state ${st}` : ''}.`);
    } catch (e) {
      notice(`Breaker ${id}: ${op} failed: ${e.message}`, true);
    }
    poll();
  }

  async function onWeight(id) {
    let current;
    try {
      current = await request('GET', rulePath('gray', id));
    } catch (e) { notice(`Gray rule ${id}: ${e.message}`, true); return; }
    const f = current.data.fields || {};
    const ok = await confirmDialog(`Set the weight of ${id}`,
      `<p>Share of requests sent to <code>${esc(f.target_version || '')}</code>, 0 to 100 (two decimals at most).${f.ramp ? ' <b class="warn">This rule has a ramp, which sets its weight: remove the ramp in the rule editor to hold a fixed weight.</b>' : ''}</p>`
      + `<p><label>Weight % <input id="weight-input" type="number" min="0" max="100" step="0.01" value="${esc(f.weight ?? '0')}"></label></p>`);
    if (!ok) return;
    // PATCH the weight alone: on a rule declared in the Caddyfile only the
    // weight joins its Redis overlay, and the declared fields stay the config's.
    const fields = { weight: String($('weight-input').value) };
    try {
      const res = await applyRule('gray', id, fields, f, current.etag, 'PATCH');
      if (res) notice(`Gray rule ${id}: weight ${fields.weight}% written (${res.stored || 'ok'}).`);
    } catch (e) {
      notice(`Gray rule ${id}: ${e.message}`, true);
    }
    poll();
  }

  async function onValidate() {
    const d = model.detail;
    try {
      const { patch, kept } = editPatch(d.rule, readEdit());
      if (Object.keys(patch).length === 0) {
        d.result = editNote(patch, kept);
      } else {
        const res = await dryRun(d.kind, d.id, patch, d.etag, 'PATCH');
        d.result = (res
          ? `<p class="good">Valid.</p><pre class="diff">${esc(diffText(d.rule.fields, patched(d.rule.fields, patch), res))}</pre>${impactHTML(res)}`
          : '<p class="muted">This server has no dry run; Apply validates and writes nothing if the rule is invalid.</p>') + editNote(patch, kept);
      }
    } catch (e) {
      d.result = `<div class="problem">${esc(e.message)}</div>`;
    }
    $('edit-result').innerHTML = d.result;
  }

  async function onApply() {
    const d = model.detail;
    if (writeBlocked()) return;
    try {
      // Only the changed fields, as a PATCH: on a rule declared in the
      // config the overlay then holds exactly what was edited, and the
      // other fields keep following the config.
      const { patch, kept } = editPatch(d.rule, readEdit());
      if (Object.keys(patch).length === 0) {
        d.result = editNote(patch, kept);
        $('edit-result').innerHTML = d.result;
        return;
      }
      const res = await applyRule(d.kind, d.id, patch, d.rule.fields, d.etag, 'PATCH', editNote(patch, kept));
      if (!res) return;
      notice(`${d.kind} rule ${d.id} written (${res.stored || 'ok'}, version ${res.version || ''}).`);
      await untilVersion(d.kind, d.id, res.version);
      await openDetail(d.kind, d.id);
    } catch (e) {
      d.result = `<div class="problem">${esc(e.status === 412 ? `The rule changed since you opened it: reload it. ${e.message}` : e.message)}</div>`;
      $('edit-result').innerHTML = d.result;
    }
  }

  function showKeys(id) {
    model.keys = id ? { rule: id, q: '', offset: 0, page: null, error: null, at: 0 } : null;
    $('cb-keys-q').value = '';
    renderKeyBrowser();
    if (id) $('cb-keys-q').focus();
  }

  // ---- navigation and events ----

  // hashValue decodes the fragment; a malformed one (#%E0%A4%A) is read as
  // it stands rather than stopping the page.
  function hashValue() {
    const raw = location.hash.slice(1);
    try { return decodeURIComponent(raw); } catch { return raw; }
  }

  function route() {
    const h = hashValue() || 'overview';
    let tab = h;
    if (h.startsWith('rule/')) {
      const [, kind, ...rest] = h.split('/');
      tab = 'detail';
      openDetail(kind, rest.join('/'));
    }
    if (!document.getElementById(tab) || !document.getElementById(tab).classList.contains('tab')) tab = 'overview';
    const changed = tab !== activeTab;
    activeTab = tab;
    for (const s of document.querySelectorAll('.tab')) s.classList.toggle('active', s.id === tab);
    for (const a of document.querySelectorAll('#tabs a')) {
      const on = a.dataset.tab === tab || (tab === 'detail' && a.dataset.tab === 'rules');
      a.classList.toggle('active', on);
      a.setAttribute('aria-selected', String(on));
      a.tabIndex = on ? 0 : -1;
    }
    // A tab link must not scroll the tabs away: the page starts at the top.
    if (changed) window.scrollTo(0, 0);
    rulesDirty = true;
    if (model.state) render();
  }

  document.addEventListener('click', (ev) => {
    const b = ev.target.closest('[data-action]');
    if (!b) return;
    switch (b.dataset.action) {
      case 'breaker': onBreaker(b.dataset.id, b.dataset.op); break;
      case 'weight': onWeight(b.dataset.id); break;
      case 'validate': onValidate(); break;
      case 'apply': onApply(); break;
      case 'keys': showKeys(b.dataset.id); break;
      case 'quota': onQuota(); break;
      case 'transitions':
        ev.preventDefault();
        model.transRule = b.dataset.id;
        renderBreakers();
        if (b.dataset.id) $('cb-transitions-title').scrollIntoView();
        break;
      default:
    }
  });
  // Arrow keys move between the tabs (the tablist pattern).
  $('tabs').addEventListener('keydown', (ev) => {
    if (ev.key !== 'ArrowRight' && ev.key !== 'ArrowLeft') return;
    const tabs = [...document.querySelectorAll('#tabs a')];
    const i = tabs.indexOf(document.activeElement);
    if (i < 0) return;
    const next = tabs[(i + (ev.key === 'ArrowRight' ? 1 : tabs.length - 1)) % tabs.length];
    next.focus();
    next.click();
  });
  $('confirm-ok').addEventListener('click', () => closeConfirm(true));
  $('confirm-cancel').addEventListener('click', () => closeConfirm(false));
  $('confirm').addEventListener('cancel', (ev) => { ev.preventDefault(); closeConfirm(false); });
  $('rule-filter').addEventListener('input', () => { rulesDirty = true; renderRules(); });
  $('problems-only').addEventListener('change', () => { rulesDirty = true; renderRules(); });
  $('gray-filter').addEventListener('input', () => { if (model.state) renderCanaries(); });
  $('cb-keys-q').addEventListener('input', () => { if (model.keys) { model.keys.q = $('cb-keys-q').value; model.keys.offset = 0; loadKeys(); } });
  $('cb-keys-prev').addEventListener('click', () => { if (model.keys) { model.keys.offset = Math.max(0, model.keys.offset - KEY_PAGE); loadKeys(); } });
  $('cb-keys-next').addEventListener('click', () => { if (model.keys) { model.keys.offset += KEY_PAGE; loadKeys(); } });
  $('cb-keys-close').addEventListener('click', () => showKeys(null));
  window.addEventListener('hashchange', route);

  route();
  poll();
  setInterval(poll, POLL_MS);
})();
