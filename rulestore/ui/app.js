// Sluice status page. Polls the admin API of the Caddy that serves it
// (same origin, so Caddy's admin Host and Origin checks pass) once a second
// and renders the active tab. No framework, no build step.
'use strict';
(() => {
  const POLL_MS = 1000;
  const SPARK_SECONDS = 300;
  const RULES_REFRESH_MS = 10000;
  const OVERVIEW_MS = 5000;
  const TRANSITIONS_KEPT = 100;
  // Rate-limit results that refused the request; every other result let it through.
  const REFUSING = ['rejected', 'concurrency_rejected', 'empty_key_rejected', 'redis_unavailable'];
  const KINDS = ['rate_limit', 'circuit_breaker', 'gray', 'binding'];

  const $ = (id) => document.getElementById(id);
  const esc = (s) => String(s ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
  const num = (n) => (n === undefined || n === null || Number.isNaN(n) ? '—' : Number(n).toLocaleString('en-US', { maximumFractionDigits: 1 }));
  const pct = (x) => (x === null || x === undefined || !Number.isFinite(x) ? '—' : `${(x * 100).toFixed(1)}%`);
  // bar is a 0..1 share as a small SVG bar (the page's CSP allows no inline styles).
  const bar = (f) => `<svg class="bar" width="120" height="8" viewBox="0 0 120 8"><rect class="bar-bg" width="120" height="8" rx="4"/><rect class="bar-fg" width="${(Math.min(Math.max(f, 0), 1) * 120).toFixed(1)}" height="8" rx="4"/></svg>`;
  const ruleLink = (kind, id) => `<a href="#rule/${encodeURIComponent(kind)}/${encodeURIComponent(id)}">${esc(id)}</a>`;

  const model = {
    state: null,
    overview: null,
    overviewAt: 0,
    rules: {},            // kind -> id -> rule view {kind,id,source,version,fields}
    rulesSig: '',
    rulesAt: 0,
    rl: new Map(),        // rate-limit rule id -> [{t, allowed, refused}] counter samples
    cbPrev: new Map(),    // "rule|key" -> state seen at the previous poll
    transitions: [],      // newest first: {at, rule, key, from, to}
    propPrev: null,       // propagation totals at the previous poll
    propMean: null,       // mean delay of the changes applied since then (s)
    detail: null,         // the rule shown in the detail view
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
    const r = await fetch(path, init);
    const text = await r.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch { data = text; }
    if (!r.ok) throw new APIError(r.status, (data && data.error) || text || r.statusText);
    return { data, etag: r.headers.get('ETag'), status: r.status };
  }
  const getJSON = async (path) => (await request('GET', path)).data;

  // ---- polling ----

  let polling = false;
  let again = false;
  async function poll() {
    if (polling) { again = true; return; }
    polling = true;
    const t0 = performance.now();
    try {
      // Caddy logs every admin request at INFO: the slow-moving overview is
      // read every OVERVIEW_MS, not every poll.
      const fresh = Date.now() - model.overviewAt >= OVERVIEW_MS;
      const [state, overview] = await Promise.all([
        getJSON('/sluice/state'),
        fresh ? getJSON('/sluice/ui/overview.json').catch(() => null) : undefined,
      ]);
      model.state = state;
      if (fresh) {
        model.overview = overview;
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
      $('updated').textContent = `updated ${new Date().toLocaleTimeString()} · render ${stats.lastRenderMs.toFixed(1)} ms`;
      $('error').hidden = true;
    } catch (e) {
      stats.errors++;
      $('error').textContent = `Cannot read the admin API: ${e.message}`;
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
    const lists = await Promise.all(KINDS.map((k) => getJSON(`/sluice/rules/${k}`).catch(() => [])));
    const rules = {};
    KINDS.forEach((k, i) => {
      rules[k] = {};
      for (const r of lists[i] || []) rules[k][r.id] = r;
    });
    model.rules = rules;
    model.rulesSig = sig;
    model.rulesAt = Date.now();
    rulesDirty = true;
  }

  // observe keeps what only a series of polls shows: counter rates and
  // breaker transitions.
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
      const seen = [['', r.breaker && r.breaker.state], ...(r.key_states || []).map((k) => [k.key, k.state])];
      for (const [key, st] of seen) {
        if (!st) continue;
        const id = `${r.rule}|${key}`;
        const prev = model.cbPrev.get(id);
        if (prev && prev !== st) model.transitions.unshift({ at: new Date(now), rule: r.rule, key, from: prev, to: st });
        model.cbPrev.set(id, st);
      }
    }
    model.transitions.length = Math.min(model.transitions.length, TRANSITIONS_KEPT);
    const p = overview && overview.propagation;
    if (p) {
      const q = model.propPrev;
      if (q && p.count > q.count) model.propMean = (p.sum_seconds - q.sum_seconds) / (p.count - q.count);
      else if (!q && p.count > 0) model.propMean = p.sum_seconds / p.count;
      model.propPrev = p;
    }
  }

  const section = (state, name) => (state && state[name] && Array.isArray(state[name].rules) ? state[name].rules : []);

  // problems finds the store's invalid and missing rules wherever the state
  // lists them: any array of objects with an id (and a reason or error).
  function problems(rs) {
    const out = [];
    if (!rs) return out;
    for (const [name, v] of Object.entries(rs)) {
      if (!Array.isArray(v)) continue;
      for (const p of v) {
        if (typeof p === 'string') out.push({ list: name, id: p, reason: name });
        else if (p && typeof p === 'object' && p.id) out.push({ list: name, ...p });
      }
    }
    return out;
  }
  const problemKey = (kind, id) => `${kind}/${id}`;

  // ---- rendering ----

  let rulesDirty = true;
  let activeTab = 'overview';

  function render() {
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

  function card(label, value, cls = '', title = '') {
    return `<div class="card" title="${esc(title)}"><div class="label">${esc(label)}</div><div class="value ${cls}">${value}</div></div>`;
  }

  function ago(iso) {
    if (!iso) return '';
    const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
    return s < 120 ? `${s} s ago` : s < 7200 ? `${Math.round(s / 60)} min ago` : `${Math.round(s / 3600)} h ago`;
  }

  function renderOverview() {
    const rs = (model.state && model.state.rulestore) || {};
    const ov = model.overview || {};
    const instances = ov.live_instances ?? rs.live_instances ?? rs.instances;
    let redis = '<span class="muted">not configured</span>';
    if (rs.redis) redis = rs.connected ? '<span class="good">connected</span>' : '<span class="bad">disconnected</span>';
    const total = Object.values(rs.rules || {}).reduce((a, b) => a + b, 0);
    const prop = model.propMean;
    const rejected = Array.isArray(rs.rejected) ? rs.rejected.length : rs.rejected || 0;
    const cards = [
      card('Redis', redis, '', 'whether this instance follows Redis for rule changes'),
      card('Writes go to', esc(rs.writes || '—')),
      card('Last resync', rs.last_resync ? `${esc(new Date(rs.last_resync).toLocaleTimeString())}<div class="label">${ago(rs.last_resync)}</div>` : '—'),
      card('Resyncs', num(rs.resyncs)),
      card('Propagation delay', prop === null ? '—' : `${(prop * 1000).toFixed(1)} ms`, '', 'mean delay from an admin API write to this instance applying it, over the latest changes'),
      card('Live instances', num(instances), '', 'Caddy instances following the same Redis and prefix (heartbeats)'),
      card('Rules', num(total)),
      card('Rejected from Redis', num(rejected), rejected ? 'bad' : '', 'rules from Redis refused as invalid since start (the last good version stays in force)'),
    ];
    $('overview-cards').innerHTML = cards.join('');

    const probs = problems(rs);
    const bySource = {};
    for (const [kind, ids] of Object.entries(rs.versions || {})) {
      bySource[kind] = {};
      for (const v of Object.values(ids)) bySource[kind][v.source] = (bySource[kind][v.source] || 0) + 1;
    }
    let rows = '<tr><th>Kind</th><th class="num">In force</th><th>By source</th><th class="num">Invalid or missing</th></tr>';
    for (const kind of KINDS) {
      const bad = probs.filter((p) => (p.kind || '') === kind).length;
      const src = Object.entries(bySource[kind] || {}).map(([s, n]) => `${esc(s)} ${n}`).join(', ');
      rows += `<tr data-kind="${esc(kind)}"><td>${esc(kind)}</td><td class="num">${num((rs.rules || {})[kind] ?? 0)}</td><td>${src || '<span class="muted">—</span>'}</td><td class="num ${bad ? 'bad' : ''}">${bad}</td></tr>`;
    }
    $('kinds').innerHTML = rows;

    $('problems').innerHTML = probs.length === 0 ? '' : `<h2 class="bad">Invalid or missing rules</h2>${probs.map((p) => {
      const what = p.problem || p.state || p.list;
      const why = [p.field && `field ${esc(p.field)}`, esc(p.reason || p.error || p.message || '')].filter(Boolean).join(': ');
      const since = p.since || p.at;
      return `<div class="problem" data-problem="${esc(problemKey(p.kind, p.id))}"><b>${p.kind ? ruleLink(p.kind, p.id) : esc(p.id)}</b> <span>${esc(p.kind || '')} · ${esc(what)}</span> — ${why}${since ? ` <span class="muted">since ${esc(ago(since))}</span>` : ''}</div>`;
    }).join('')}`;
  }

  // spark draws allowed and refused per second over the last SPARK_SECONDS.
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
    return `<svg class="spark" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img" aria-label="allowed and refused per second, last 5 minutes, peak ${Math.round(peak)}/s">`
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

  function renderRateLimits() {
    const rules = section(model.state, 'ratelimit');
    let rows = '<tr><th>Rule</th><th>Type · scope</th><th>Last 5 min</th><th class="num">Allowed/s</th><th class="num">Refused/s</th><th class="num">Refused total</th><th class="num">In flight</th><th class="num">Keys</th><th>Top keys (share of quota in use)</th><th>More</th></tr>';
    if (rules.length === 0) rows += '<tr><td colspan="10" class="muted">No rate-limit rule is used by a handler on this instance yet.</td></tr>';
    for (const r of rules) {
      const samples = model.rl.get(r.rule) || [];
      const now = rates(samples);
      const last = samples[samples.length - 1] || { refused: 0 };
      const top = (r.top_keys || []).slice(0, 5).map((k) => `<div><code>${esc(k.key)}</code> ${bar(k.used || 0)} ${k.limited ? '<span class="bad">limited</span>' : ''}</div>`).join('');
      rows += `<tr data-rule="${esc(r.rule)}" data-kind="rate_limit"><td>${ruleLink('rate_limit', r.rule)}</td><td>${esc(r.type)} · ${esc(r.scope)}</td>`
        + `<td>${spark(samples)}</td><td class="num allowed-rate">${num(now.allowed)}</td><td class="num refused-rate ${now.refused > 0 ? 'bad' : ''}">${num(now.refused)}</td>`
        + `<td class="num refused-total">${num(last.refused)}</td><td class="num">${num(r.in_flight)}</td><td class="num">${num(r.keys)}</td>`
        + `<td>${top || '<span class="muted">—</span>'}</td><td>${extras(r, ['rule', 'type', 'scope', 'requests', 'keys', 'in_flight', 'top_keys'])}</td></tr>`;
    }
    $('rl-table').innerHTML = rows;
  }

  // threshold formats a rule field that is a percentage or count, "" when unset.
  function threshold(fields, name) {
    const v = fields && fields[name];
    return v ? ` <span class="muted">/ ${esc(v)}${/%$/.test(v) || name.endsWith('_threshold') ? '' : '%'}</span>` : '';
  }

  function breakerCells(b, fields) {
    const w = b.window;
    const fr = w && w.calls ? w.failures / w.calls : null;
    const sr = w && w.calls ? w.slow / w.calls : null;
    const half = b.state === 'open' && b.open_for_seconds ? `${b.open_for_seconds.toFixed(1)} s` : b.state === 'half_open' ? `probing (${num(b.half_open_probes)})` : '';
    return `<td><span class="badge ${esc(b.state)}">${esc(b.state)}</span>${b.ramping ? ' <span class="muted">ramping</span>' : ''}</td>`
      + `<td class="num half-open">${half || '<span class="muted">—</span>'}</td>`
      + `<td class="num">${pct(fr)}${threshold(fields, 'failure_rate')}</td>`
      + `<td class="num">${pct(sr)}${threshold(fields, 'slow_call_rate')}</td>`
      + `<td class="num">${num(b.consecutive_failures)}${threshold(fields, 'failure_threshold')}</td>`
      + `<td class="num">${w ? num(w.calls) : '—'}</td>`;
  }

  function renderBreakers() {
    const rules = section(model.state, 'circuitbreaker');
    const defs = model.rules.circuit_breaker || {};
    let rows = '<tr><th>Rule · key</th><th>State</th><th class="num">Half-open in</th><th class="num">Failure rate / threshold</th><th class="num">Slow calls / threshold</th><th class="num">Consecutive failures</th><th class="num">Window calls</th><th>Mode</th><th class="num">Rejected</th><th>Calls</th><th>Actions</th></tr>';
    if (rules.length === 0) rows += '<tr><td colspan="11" class="muted">No circuit-breaker rule is used by a handler on this instance yet.</td></tr>';
    for (const r of rules) {
      const fields = (defs[r.rule] || {}).fields || {};
      const calls = Object.entries(r.calls || {}).map(([k, v]) => `${esc(k)} ${num(v)}`).join(' · ');
      const mode = r.override ? `<b class="warn">override: ${esc(r.override)}</b>` : esc(r.rule_state);
      const id = esc(r.rule);
      rows += `<tr data-breaker="${id}"><td>${ruleLink('circuit_breaker', r.rule)}${r.keys ? ` <span class="muted">${num(r.keys)} keys</span>` : ''}</td>`
        + `${breakerCells(r.breaker || {}, fields)}<td class="mode">${mode}</td><td class="num">${num(r.rejected)}</td><td>${calls}</td>`
        + `<td><button data-action="breaker" data-id="${id}" data-op="force_open" class="danger">Force open</button> `
        + `<button data-action="breaker" data-id="${id}" data-op="force_closed">Force closed</button> `
        + `<button data-action="breaker" data-id="${id}" data-op="reset">Auto</button></td></tr>`;
      for (const k of r.key_states || []) {
        rows += `<tr class="sub" data-breaker-key="${esc(`${r.rule}|${k.key}`)}"><td>&nbsp;&nbsp;<code>${esc(k.key)}</code></td>${breakerCells(k, fields)}<td colspan="4"></td></tr>`;
      }
      if (r.keys > (r.key_states || []).length) {
        rows += `<tr class="sub"><td colspan="11" class="muted">&nbsp;&nbsp;${num(r.keys - (r.key_states || []).length)} more keys not listed by the state endpoint</td></tr>`;
      }
    }
    $('cb-table').innerHTML = rows;
    const server = [];
    for (const r of rules) for (const t of r.transitions || []) server.push({ rule: r.rule, ...t });
    const list = server.length ? server : model.transitions;
    let trs = '<tr><th>When</th><th>Rule · key</th><th>From</th><th>To</th><th>Reason</th></tr>';
    if (list.length === 0) trs += '<tr><td colspan="5" class="muted">None since this page opened.</td></tr>';
    for (const t of list.slice(0, 30)) {
      const at = t.at instanceof Date ? t.at : new Date(t.at || t.time || Date.now());
      trs += `<tr><td>${esc(at.toLocaleTimeString())}</td><td>${esc(t.rule)}${t.key ? ` · <code>${esc(t.key)}</code>` : ''}</td><td><span class="badge ${esc(t.from)}">${esc(t.from)}</span></td><td><span class="badge ${esc(t.to)}">${esc(t.to)}</span></td><td>${esc(t.reason || '')}</td></tr>`;
    }
    $('cb-transitions').innerHTML = trs;
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

  function renderCanaries() {
    const defs = model.rules.gray || {};
    const splits = {};
    for (const s of section(model.state, 'grayroute')) splits[s.rule] = s;
    const analyses = {};
    const gs = model.state && model.state.grayroute;
    for (const a of (gs && Array.isArray(gs.analysis) ? gs.analysis : [])) (analyses[a.rule] = analyses[a.rule] || []).push(a);
    const ids = [...new Set([...Object.keys(defs), ...Object.keys(splits).filter((x) => x !== '')])].sort();
    let rows = '<tr><th>Rule</th><th>Target</th><th>State</th><th class="num">Weight in force</th><th>Ramp</th><th>Requests per version</th><th>Analysis (last interval)</th><th>More</th><th>Actions</th></tr>';
    if (ids.length === 0) rows += '<tr><td colspan="9" class="muted">No gray rules.</td></tr>';
    for (const id of ids) {
      const f = (defs[id] || {}).fields || {};
      // The analysis reports the rule as held now; else the page computes
      // the weight from ramp as every instance does, or reads weight.
      const an = (analyses[id] || []).filter((a) => !f.target_version || a.target === f.target_version);
      const rp = ramp(f.ramp);
      const weight = an.length ? an[0].weight : rp ? rp.weight : f.weight !== undefined ? parseFloat(f.weight) : null;
      const state = an.length ? an[0].state : f.state || 'running';
      const s = splits[id] || {};
      const vs = s.versions || {};
      const total = Object.values(vs).reduce((a, b) => a + b, 0);
      const per = Object.entries(vs).sort().map(([v, n]) => `<span data-version="${esc(v)}"><code>${esc(v)}</code> ${num(n)}${total ? ` <span class="muted">(${((n / total) * 100).toFixed(1)}%)</span>` : ''}</span>`).join(' · ');
      const ramping = rp ? `${bar(rp.progress)} ${Math.round(rp.progress * 100)}% <span class="muted">${esc(rp.note)}</span>` : '<span class="muted">—</span>';
      rows += `<tr data-gray="${esc(id)}"><td>${defs[id] ? ruleLink('gray', id) : esc(id)}</td><td><code>${esc(f.target_version || '')}</code></td>`
        + `<td class="state"><span class="badge ${esc(state)}">${esc(state)}</span></td>`
        + `<td class="num weight">${weight === null || Number.isNaN(weight) ? '—' : `${weight.toFixed(2).replace(/\.?0+$/, '')}%`}</td><td>${ramping}</td>`
        + `<td>${per || '<span class="muted">no requests yet</span>'}${s.random ? ` · random ${num(s.random)}` : ''}</td>`
        + `<td>${an.length ? an.map(verdict).join('') : '<span class="muted">off</span>'}</td>`
        + `<td>${extras(s, ['rule', 'versions', 'random'])}</td>`
        + `<td>${defs[id] ? `<button data-action="weight" data-id="${esc(id)}">Set weight</button>` : ''}</td></tr>`;
    }
    $('gray-table').innerHTML = rows;
  }

  function renderRules() {
    rulesDirty = false;
    const filter = $('rule-filter').value.trim().toLowerCase();
    const probs = new Map(problems(model.state && model.state.rulestore).map((p) => [problemKey(p.kind, p.id), p]));
    const parts = ['<tr><th>Kind</th><th>Rule</th><th>Source</th><th>Version</th><th>Fields</th></tr>'];
    let n = 0;
    for (const kind of KINDS) {
      for (const id of Object.keys(model.rules[kind] || {}).sort()) {
        if (filter && !id.toLowerCase().includes(filter) && !kind.includes(filter)) continue;
        const r = model.rules[kind][id];
        const p = probs.get(problemKey(kind, id));
        const fields = Object.entries(r.fields || {}).map(([k, v]) => `${k}=${v}`).join(' ');
        parts.push(`<tr data-rule="${esc(id)}" data-kind="${esc(kind)}"${p ? ' class="bad"' : ''}><td>${esc(kind)}</td><td>${ruleLink(kind, id)}${p ? ` <span class="bad">${esc(p.problem || p.list)}: ${esc(p.reason || p.error || '')}</span>` : ''}</td><td>${esc(r.source)}</td><td><code>${esc(r.version)}</code></td><td><code>${esc(fields.length > 140 ? `${fields.slice(0, 137)}…` : fields)}</code></td></tr>`);
        n++;
      }
    }
    // Rules the store names as missing or rejected but does not hold.
    for (const [key, p] of probs) {
      const [kind, id] = key.split('/');
      if (model.rules[kind] && model.rules[kind][id]) continue;
      parts.push(`<tr class="bad" data-rule="${esc(id)}" data-kind="${esc(kind)}"><td>${esc(kind)}</td><td>${esc(id)} <span class="bad">${esc(p.problem || p.list)}: ${esc(p.reason || p.error || '')}</span></td><td colspan="3"></td></tr>`);
    }
    $('rules-table').innerHTML = parts.join('');
    $('rule-count').textContent = `${n} rules`;
  }

  // ---- rule detail ----

  async function openDetail(kind, id) {
    model.detail = { kind, id, rule: null, etag: null, history: null, error: null, result: '' };
    $('detail-body').innerHTML = '<p class="muted">loading…</p>';
    try {
      const r = await request('GET', `/sluice/rules/${encodeURIComponent(kind)}/${encodeURIComponent(id)}`);
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

  function renderDetail() {
    const d = model.detail;
    if (!d) return;
    if (d.error && !d.rule) {
      $('detail-body').innerHTML = `<h2>${esc(d.kind)} ${esc(d.id)}</h2><div class="problem">${esc(d.error)}</div>`;
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
      + `<p>Source: <b>${esc(r.source)}</b> · version <code>${esc(r.version)}</code>${d.etag ? ` · ETag <code>${esc(d.etag)}</code>` : ''}</p>`
      + `<table id="detail-fields"><tr><th>Field</th><th>Value</th><th>From</th></tr>${fields}</table>`
      + '<h2>Live</h2><div id="detail-live"></div>'
      + `<h2>Edit</h2><p class="muted">The rule's fields as JSON. Apply writes only the fields you change (PATCH); a field you remove or set to null is unset${r.static ? ' from the overlay, back to its value in the config' : ''}. ${d.etag ? 'Validate runs a dry run; Apply writes only if the rule is still at the version shown (If-Match).' : 'This server has no dry run: Apply validates the rule and writes nothing if it is invalid.'}</p>`
      + `<textarea id="edit-fields" spellcheck="false">${esc(JSON.stringify(r.fields || {}, null, 2))}</textarea>`
      + `<p><button data-action="validate">Validate</button> <button data-action="apply" class="primary">Apply…</button></p><div id="edit-result">${d.result}</div>`
      + `<h2>History</h2>${hist}`;
    renderDetailLive();
  }

  function renderDetailLive() {
    const d = model.detail;
    const el = $('detail-live');
    if (!d || !el) return;
    const find = (name) => section(model.state, name).find((x) => x.rule === d.id);
    const live = d.kind === 'rate_limit' ? find('ratelimit') : d.kind === 'circuit_breaker' ? find('circuitbreaker') : d.kind === 'gray' ? find('grayroute') : null;
    el.innerHTML = live ? `<pre>${esc(JSON.stringify(live, null, 2))}</pre>` : '<p class="muted">No live state on this instance (the rule is not used by a handler here, or has no state).</p>';
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

  const rulePath = (kind, id) => `/sluice/rules/${encodeURIComponent(kind)}/${encodeURIComponent(id)}`;

  // dryRun validates a write with ?dry_run=true. Only servers that send an
  // ETag implement it; older ones would write, so they are not asked.
  async function dryRun(kind, id, fields, etag, method = 'PUT') {
    if (!etag) return null;
    const headers = { 'If-Match': etag };
    const r = await request(method, `${rulePath(kind, id)}?dry_run=true`, { body: fields, headers });
    return r.data || {};
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
      `<p>${res ? 'The dry run passed. Changes:' : 'Changes (the server validates on write):'}</p><pre class="diff">${esc(diffText(before, after, res))}</pre>${note}`);
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

  let confirmResolve = null;
  function confirmDialog(title, bodyHTML) {
    $('confirm-title').textContent = title;
    $('confirm-body').innerHTML = bodyHTML;
    $('confirm').showModal();
    return new Promise((resolve) => { confirmResolve = resolve; });
  }
  function closeConfirm(ok) {
    $('confirm').close();
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
      `<p>Runs <code>POST /sluice/breakers/${esc(id)}/${esc(op)}</code> on this Caddy instance only (not on the rest of the fleet). ${op === 'force_open' ? 'Every request through the breaker is refused until you choose Auto.' : ''}</p>`);
    if (!ok) return;
    try {
      const r = await request('POST', `/sluice/breakers/${encodeURIComponent(id)}/${op}`);
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
          ? `<p class="good">Valid.</p><pre class="diff">${esc(diffText(d.rule.fields, patched(d.rule.fields, patch), res))}</pre>`
          : '<p class="muted">This server has no dry run; Apply validates and writes nothing if the rule is invalid.</p>') + editNote(patch, kept);
      }
    } catch (e) {
      d.result = `<div class="problem">${esc(e.message)}</div>`;
    }
    $('edit-result').innerHTML = d.result;
  }

  async function onApply() {
    const d = model.detail;
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

  // ---- navigation and events ----

  function route() {
    const h = decodeURIComponent(location.hash.slice(1)) || 'overview';
    let tab = h;
    if (h.startsWith('rule/')) {
      const [, kind, ...rest] = h.split('/');
      tab = 'detail';
      openDetail(kind, rest.join('/'));
    }
    if (!document.getElementById(tab) || !document.getElementById(tab).classList.contains('tab')) tab = 'overview';
    activeTab = tab;
    for (const s of document.querySelectorAll('.tab')) s.classList.toggle('active', s.id === tab);
    for (const a of document.querySelectorAll('#tabs a')) a.classList.toggle('active', a.dataset.tab === tab);
    rulesDirty = true;
    if (model.state) render();
  }

  document.addEventListener('click', (ev) => {
    const b = ev.target.closest('button[data-action]');
    if (!b) return;
    switch (b.dataset.action) {
      case 'breaker': onBreaker(b.dataset.id, b.dataset.op); break;
      case 'weight': onWeight(b.dataset.id); break;
      case 'validate': onValidate(); break;
      case 'apply': onApply(); break;
      default:
    }
  });
  $('confirm-ok').addEventListener('click', () => closeConfirm(true));
  $('confirm-cancel').addEventListener('click', () => closeConfirm(false));
  $('confirm').addEventListener('cancel', () => closeConfirm(false));
  $('rule-filter').addEventListener('input', () => { rulesDirty = true; renderRules(); });
  window.addEventListener('hashchange', route);

  route();
  poll();
  setInterval(poll, POLL_MS);
})();
