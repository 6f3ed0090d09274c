// The outbox operator's console: one page over the ops API (ops.v1.OutboxOps),
// reached through the console gateway as POST /ops.v1.OutboxOps/<Method> with
// protobuf JSON. Every string from the server is put in the page as text
// (textContent, text nodes): nothing here parses HTML.
'use strict';

(() => {
  const SAMPLE_MS = 5000;           // the overview's sampling period
  const KEEP = 3600000 / SAMPLE_MS; // one hour of samples per shard, in memory only
  const TOKEN_KEY = 'outbox-console-token';
  const SHARD_KEY = 'outbox-console-shard';

  const $ = (id) => document.getElementById(id);
  const state = {
    shards: [],          // [{name, addr}]
    shard: '',           // the selected shard's name
    samples: new Map(),  // shard name -> ring of {t, stats}
    last: new Map(),     // shard name -> latest Stats or an error
    chart: null,
    auditTokens: [''],   // page tokens of the audit pages seen, newest first
    auditIndex: 0,
    dlq: [],
  };

  // --- DOM, as text only

  function h(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }
  function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); return e; }
  function fill(tbody, rows) { clear(tbody); for (const r of rows) tbody.append(r); }
  function kvTable(table, pairs) {
    clear(table);
    for (const [k, v, cls] of pairs) {
      table.append(h('tr', {}, h('th', {}, k), h('td', { class: cls || '' }, v === undefined || v === '' ? '-' : v)));
    }
  }
  function num(v) { const n = Number(v || 0); return Number.isFinite(n) ? n : 0; }
  function when(ts) { return ts ? String(ts).replace('T', ' ').replace(/\.(\d{3})\d*Z$/, '.$1Z') : '-'; }
  function age(seconds) {
    const s = Math.round(num(seconds));
    if (s < 120) return s + ' s';
    if (s < 7200) return Math.round(s / 60) + ' min';
    return (s / 3600).toFixed(1) + ' h';
  }
  function messageLink(id) {
    return h('a', { href: '#message/' + encodeURIComponent(id), class: 'mono' }, id);
  }

  function showBanner(text) { const b = $('banner'); b.textContent = text; b.hidden = !text; }
  function showNotice(text) { const b = $('notice'); b.textContent = text; b.hidden = !text; }

  // --- the token: this tab only (sessionStorage), sent as a bearer header

  function token() { return sessionStorage.getItem(TOKEN_KEY); }
  function signedIn() { return token() !== null; }
  function signIn(value) {
    sessionStorage.setItem(TOKEN_KEY, value);
    $('token').value = '';
    showBanner('');
    layout();
    connect();
  }
  function signOut(reason) {
    sessionStorage.removeItem(TOKEN_KEY);
    showBanner(reason || '');
    layout();
  }
  function layout() {
    const inside = signedIn();
    $('login').hidden = inside;
    $('main').hidden = !inside;
    $('signout').hidden = !inside;
    $('who').textContent = inside ? (token() ? 'token set (this tab)' : 'no token') : '';
    if (!inside) $('token').focus();
  }

  // --- the ops API

  class ApiError extends Error {
    constructor(status, code, message) { super(message); this.status = status; this.code = code; }
  }

  // GET without a body, else POST of BODY as JSON.
  async function post(path, body, shard) {
    const headers = { 'Outbox-Shard': shard || state.shard };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const t = token();
    if (t) headers.Authorization = 'Bearer ' + t;
    let response;
    try {
      response = await fetch(path, body === undefined
        ? { method: 'GET', headers, cache: 'no-store', credentials: 'omit' }
        : { method: 'POST', headers, body: JSON.stringify(body), cache: 'no-store', credentials: 'omit' });
    } catch (e) {
      throw new ApiError(0, 'unavailable', 'the console gateway does not answer (' + e.message + ')');
    }
    let data = null;
    try { data = await response.json(); } catch (e) { data = null; }
    if (!response.ok) {
      const code = (data && data.code) || 'unknown';
      const message = (data && data.message) || ('HTTP ' + response.status);
      throw new ApiError(response.status, code, message);
    }
    return data || {};
  }
  const ops = (method, body, shard) => post('/ops.v1.OutboxOps/' + method, body || {}, shard);

  // A refused token signs the tab out with the reason; other errors are shown.
  function report(e, what) {
    const api = state.shard ? 'the ops API of shard "' + state.shard + '"' : 'the ops API';
    if (e.code === 'unauthenticated') {
      signOut('Not signed in: ' + api + ' wants an ops token ' +
              '(UNAUTHENTICATED: ' + e.message + '). Enter the ops token.');
    } else if (e.code === 'permission_denied') {
      signOut('Token refused: ' + api + ' does not accept this token ' +
              '(PERMISSION_DENIED: ' + e.message + '). Enter the right ops token.');
    } else {
      showBanner((what ? what + ': ' : '') + e.code.toUpperCase() + ': ' + e.message);
    }
  }

  // --- confirmation: every change is shown with its count first, with a
  // field for why (the audit trail keeps it)

  // Resolves to {reason} when confirmed, null when cancelled.
  function confirmAction(title, text, okLabel) {
    return new Promise((resolve) => {
      $('confirm-title').textContent = title;
      $('confirm-text').textContent = text;
      $('confirm-ok').textContent = okLabel || 'Confirm';
      $('confirm-reason').value = '';
      $('confirm').hidden = false;
      $('confirm-reason').focus();
      const done = (answer) => {
        $('confirm').hidden = true;
        $('confirm-ok').onclick = null;
        $('confirm-cancel').onclick = null;
        resolve(answer ? { reason: $('confirm-reason').value.trim() } : null);
      };
      $('confirm-ok').onclick = () => done(true);
      $('confirm-cancel').onclick = () => done(false);
    });
  }
  // The request with its reason, when one was given.
  function withReason(request, confirmed) {
    return confirmed.reason ? Object.assign({}, request, { reason: confirmed.reason }) : request;
  }

  // --- overview: a sample of GetStats per shard every few seconds, while the page is seen

  async function sampleAll() {
    if (!signedIn() || document.hidden) return;
    if (!state.shards.length) {  // signed in while no shard answered: once one does, the page too
      if (!(await loadShards())) return;
      route();
    }
    await Promise.all(state.shards.map(async (s) => {
      try {
        const stats = await ops('GetStats', {}, s.name);
        const ring = state.samples.get(s.name) || [];
        ring.push({ t: Date.now(), stats });
        if (ring.length > KEEP) ring.splice(0, ring.length - KEEP);
        state.samples.set(s.name, ring);
        state.last.set(s.name, stats);
      } catch (e) {
        state.last.set(s.name, { error: e });
        if (s.name === state.shard) report(e, 'GetStats');
      }
    }));
    if (currentPage() === 'overview') renderOverview();
  }

  function rates(ring) {
    if (ring.length < 2) return null;
    const a = ring[ring.length - 2], b = ring[ring.length - 1];
    const dt = (b.t - a.t) / 1000;
    if (dt <= 0) return null;
    const d = (f) => Math.max(0, (f(b.stats) - f(a.stats)) / dt);
    return {
      delivered: d((s) => num(s.sent) + num(s.archivedTotal)),
      republished: d((s) => num(s.republishedTotal)),
      failed: d((s) => num(s.failedTotal)),
    };
  }

  function card(label, value, cls) {
    return h('div', { class: 'card ' + (cls || '') }, h('div', { class: 'label' }, label),
             h('div', { class: 'value' }, value));
  }

  function renderOverview() {
    const stats = state.last.get(state.shard);
    const ring = state.samples.get(state.shard) || [];
    const cards = clear($('cards'));
    if (!stats) { cards.append(card('stats', 'waiting for the first sample', 'wide')); return; }
    if (stats.error) {
      cards.append(card('stats', stats.error.code.toUpperCase() + ': ' + stats.error.message, 'bad wide'));
    } else {
      const r = rates(ring);
      const hold = stats.deliveryHold || '';
      cards.append(
        card('SENDING', num(stats.sending), num(stats.sending) ? 'warn' : ''),
        card('SENT', num(stats.sent), 'good'),
        card('FAILED', num(stats.failed), num(stats.failed) ? 'bad' : ''),
        card('oldest SENDING', num(stats.sending) ? age(stats.oldestSendingAgeSeconds) : '-'),
        card('delivered / s', r ? r.delivered.toFixed(1) : '…'),
        card('re-published / s', r ? r.republished.toFixed(1) : '…'),
        card('PAY_QUEUE ready', num(stats.payQueueReady)),
        card('PAY_QUEUE consumers', num(stats.payQueueConsumers), num(stats.payQueueConsumers) ? '' : 'bad'),
        card('delivery hold', hold || 'none', hold ? 'warn text' : 'text'),
        card('alerts active', num(stats.alertsActive), num(stats.alertsActive) ? 'bad' : ''),
        card('lease holder', (stats.leaseHolder || 'nobody') + (stats.leaseHeld ? ' (this one)' : ''), 'text'));
      kvTable($('totals'), [
        ['re-published', num(stats.republishedTotal)],
        ['publish failures', num(stats.publishFailuresTotal)],
        ['rows turned FAILED', num(stats.failedTotal)],
        ['due rows held back', num(stats.deferredTotal)],
        ['archived', num(stats.archivedTotal)],
        ['alerts sent', num(stats.alertsSentTotal)],
        ['alerts resolved', num(stats.alertsResolvedTotal)],
      ]);
    }
    $('overview-updated').textContent = ring.length
      ? 'sampled ' + new Date(ring[ring.length - 1].t).toLocaleTimeString() + ', every ' + SAMPLE_MS / 1000 + ' s'
      : '';
    fill($('shards-table').tBodies[0], state.shards.map((s) => {
      const st = state.last.get(s.name);
      if (!st) return h('tr', {}, h('td', {}, s.name), h('td', { class: 'mono' }, s.addr), h('td', { colspan: 7 }, '…'));
      if (st.error) {
        return h('tr', {}, h('td', {}, s.name), h('td', { class: 'mono' }, s.addr),
                 h('td', { colspan: 7, class: 'status-FAILED' }, st.error.code.toUpperCase() + ': ' + st.error.message));
      }
      return h('tr', {}, h('td', {}, s.name), h('td', { class: 'mono' }, s.addr),
               h('td', { class: 'num' }, num(st.sending)), h('td', { class: 'num' }, num(st.sent)),
               h('td', { class: 'num' }, num(st.failed)),
               h('td', {}, num(st.sending) ? age(st.oldestSendingAgeSeconds) : '-'),
               h('td', {}, st.deliveryHold || 'none'), h('td', {}, st.leaseHolder || 'nobody'),
               h('td', { class: 'num' }, num(st.alertsActive)));
    }));
    drawChart(ring);
  }

  function series(ring) {
    const labels = [], sending = [], failed = [], delivered = [];
    for (let i = 0; i < ring.length; i++) {
      const s = ring[i];
      labels.push(new Date(s.t).toLocaleTimeString());
      sending.push(num(s.stats.sending));
      failed.push(num(s.stats.failed));
      delivered.push(i ? rates(ring.slice(i - 1, i + 1)).delivered : 0);
    }
    return { labels, sending, failed, delivered };
  }

  function drawChart(ring) {
    const data = series(ring);
    const canvas = $('chart');
    if (window.Chart) {
      if (!state.chart) {
        state.chart = new window.Chart(canvas.getContext('2d'), {
          type: 'line',
          data: { labels: [], datasets: [
            { label: 'SENDING rows', data: [], borderColor: '#9a6700', backgroundColor: '#9a6700', yAxisID: 'rows', pointRadius: 0, borderWidth: 2 },
            { label: 'FAILED rows', data: [], borderColor: '#b42318', backgroundColor: '#b42318', yAxisID: 'rows', pointRadius: 0, borderWidth: 2 },
            { label: 'delivered / s', data: [], borderColor: '#18794e', backgroundColor: '#18794e', yAxisID: 'rate', pointRadius: 0, borderWidth: 2 },
          ] },
          options: {
            animation: false, responsive: true, maintainAspectRatio: false,
            interaction: { mode: 'index', intersect: false },
            scales: {
              x: { ticks: { maxTicksLimit: 12, autoSkip: true } },
              rows: { type: 'linear', position: 'left', beginAtZero: true, title: { display: true, text: 'rows' } },
              rate: { type: 'linear', position: 'right', beginAtZero: true, grid: { drawOnChartArea: false },
                      title: { display: true, text: 'per second' } },
            },
          },
        });
      }
      state.chart.data.labels = data.labels;
      state.chart.data.datasets[0].data = data.sending;
      state.chart.data.datasets[1].data = data.failed;
      state.chart.data.datasets[2].data = data.delivered;
      state.chart.update('none');
      return;
    }
    paintChart(canvas, data);
  }

  // Without Chart.js: the same three lines, drawn on the canvas by hand.
  function paintChart(canvas, data) {
    const ratio = window.devicePixelRatio || 1;
    const w = canvas.clientWidth || 960, hgt = canvas.clientHeight || 280;
    canvas.width = w * ratio; canvas.height = hgt * ratio;
    const g = canvas.getContext('2d');
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.fillStyle = '#fff'; g.fillRect(0, 0, w, hgt);
    const left = 50, right = w - 50, top = 24, bottom = hgt - 28;
    g.strokeStyle = '#d8dee4'; g.lineWidth = 1;
    g.strokeRect(left, top, right - left, bottom - top);
    const rowsMax = Math.max(1, ...data.sending, ...data.failed);
    const rateMax = Math.max(1, ...data.delivered);
    g.fillStyle = '#5f6b76'; g.font = '11px sans-serif';
    g.fillText(String(rowsMax) + ' rows', 4, top + 4);
    g.fillText(rateMax.toFixed(1) + '/s', right + 4, top + 4);
    if (data.labels.length) {
      g.fillText(data.labels[0], left, hgt - 8);
      g.fillText(data.labels[data.labels.length - 1], right - 60, hgt - 8);
    }
    const n = data.labels.length;
    const x = (i) => left + (n <= 1 ? 0 : (i * (right - left)) / (n - 1));
    const line = (values, max, color) => {
      g.strokeStyle = color; g.lineWidth = 2; g.beginPath();
      values.forEach((v, i) => { const y = bottom - (v / max) * (bottom - top); if (i) g.lineTo(x(i), y); else g.moveTo(x(i), y); });
      g.stroke();
    };
    line(data.sending, rowsMax, '#9a6700');
    line(data.failed, rowsMax, '#b42318');
    line(data.delivered, rateMax, '#18794e');
    [['SENDING rows', '#9a6700'], ['FAILED rows', '#b42318'], ['delivered / s', '#18794e']].forEach(([label, color], i) => {
      g.fillStyle = color; g.fillRect(left + 10 + i * 130, 6, 12, 10);
      g.fillStyle = '#1d2329'; g.fillText(label, left + 26 + i * 130, 15);
    });
  }

  // --- failures

  async function loadFailures() {
    try {
      const kind = $('failures-kind').value;
      const answer = await ops('ListFailureGroups', kind ? { kind } : {});
      showBanner('');
      const groups = answer.groups || [];
      $('failures-empty').hidden = groups.length > 0;
      fill($('failures-table').tBodies[0], groups.map((g) => h('tr', { 'data-group': g.group },
        h('td', { class: 'mono nowrap' }, g.group), h('td', {}, g.kind), h('td', {}, g.topic),
        h('td', { class: 'mono' }, g.pattern),
        h('td', { class: 'num' }, num(g.count)), h('td', { class: 'num' }, num(g.acknowledged)),
        h('td', {}, when(g.firstSeen)), h('td', {}, when(g.lastSeen)),
        h('td', {}, g.exampleMessageId ? messageLink(g.exampleMessageId) : '-', h('br'),
          h('span', { class: 'example-error' }, g.exampleError || '')),
        h('td', { class: 'actions' },
          h('button', { type: 'button', class: 'rows', onclick: () => loadGroupRows(g.group) }, 'Rows'),
          h('button', { type: 'button', class: 'ack', disabled: num(g.acknowledged) >= num(g.count),
                        onclick: () => acknowledgeGroup(g) }, 'Acknowledge…'),
          h('button', { type: 'button', class: 'redrive danger', onclick: () => redriveGroup(g) }, 'Re-drive…')))));
    } catch (e) { report(e, 'ListFailureGroups'); }
  }

  async function acknowledgeGroup(g) {
    try {
      const dry = await ops('AcknowledgeFailure', { group: g.group, dryRun: true });
      const n = num(dry.count);
      const ok = await confirmAction('Acknowledge group ' + g.group,
        'Acknowledge ' + n + ' FAILED row(s) of group ' + g.group + ' (' + g.kind + ': ' + g.pattern + ')?\n' +
        'They stay FAILED and stop alerting. The audit trail records you.', 'Acknowledge ' + n + ' row(s)');
      if (!ok) { showNotice('Nothing changed.'); return; }
      const done = await ops('AcknowledgeFailure', withReason({ group: g.group }, ok));
      showNotice('Acknowledged ' + num(done.count) + ' row(s) of group ' + g.group + '.');
      loadFailures();
    } catch (e) { report(e, 'AcknowledgeFailure'); }
  }

  async function redriveGroup(g) {
    try {
      const dry = await ops('RedriveFailed', { group: g.group, dryRun: true });
      const n = num(dry.count);
      const ok = await confirmAction('Re-drive group ' + g.group,
        'Send ' + n + ' FAILED row(s) of group ' + g.group + ' (' + g.kind + ': ' + g.pattern + ') again?\n' +
        'They go back to SENDING with their attempts reset. The audit trail records you.', 'Re-drive ' + n + ' row(s)');
      if (!ok) { showNotice('Nothing changed.'); return; }
      const done = await ops('RedriveFailed', withReason({ group: g.group }, ok));
      showNotice('Re-drove ' + num(done.count) + ' row(s) of group ' + g.group + '.');
      loadFailures();
    } catch (e) { report(e, 'RedriveFailed'); }
  }

  // The ops API lists FAILED rows by page; the group's are picked out here.
  async function loadGroupRows(group) {
    $('group-rows').hidden = false;
    $('group-rows-id').textContent = group;
    const rows = [];
    let pageToken = '', scanned = 0;
    try {
      do {
        const answer = await ops('ListMessages', { status: 'FAILED', pageSize: 1000, pageToken });
        for (const m of answer.messages || []) if (m.failureGroup === group && rows.length < 500) rows.push(m);
        scanned += (answer.messages || []).length;
        pageToken = answer.nextPageToken || '';
      } while (pageToken && scanned < 20000 && rows.length < 500);
    } catch (e) { report(e, 'ListMessages'); return; }
    fill($('group-rows-table').tBodies[0], rows.map((m) => h('tr', {},
      h('td', {}, messageLink(m.messageId)), h('td', { class: 'mono' }, m.bizKey),
      h('td', { class: 'num' }, m.attempts + ' of ' + m.maxAttempts), h('td', {}, m.lastError),
      h('td', {}, m.acknowledgedBy || '-'), h('td', {}, when(m.updatedAt)))));
    $('group-rows-more').textContent = rows.length + ' row(s)' + (pageToken ? '; more FAILED rows were not scanned' : '');
  }

  // --- one message

  const BAD_EVENTS = new Set(['failed', 'rejected', 'publish_failed', 'expired']);
  const GOOD_EVENTS = new Set(['acknowledged', 'sent']);

  async function loadMessage(id) {
    $('search-id').value = id;
    $('message-view').hidden = true;
    if (!id) return;
    let history;
    try {
      history = await ops('GetHistory', { id });
    } catch (e) { report(e, 'GetHistory'); return; }
    showBanner('');
    const m = history.message || {};
    kvTable($('message-row'), [
      ['message id', m.messageId, 'mono'], ['business key', (m.bizType || '') + ' ' + (m.bizKey || ''), 'mono'],
      ['status', m.status, 'status-' + m.status],
      ['attempts', m.attempts + ' of ' + m.maxAttempts], ['topic', m.topic], ['type', m.messageType],
      ['reply to', m.replyTo], ['trace id', m.traceId, 'mono'], ['traceparent', m.traceparent, 'mono'],
      ['last error', m.lastError], ['failure', m.failureKind ? m.failureKind + ' (group ' + m.failureGroup + ')' : ''],
      ['acknowledged by', m.acknowledgedBy], ['created', when(m.createdAt)], ['last attempt', when(m.lastAttemptAt)],
      ['next retry', m.status === 'SENDING' ? when(m.nextRetryAt) : ''], ['sent', when(m.sentAt)],
      ['updated', when(m.updatedAt)],
    ]);
    // The timeline: created, what the history holds, where it is now.
    const items = [{ at: m.createdAt, event: 'created', instance: '', detail: 'payment committed with its outbox row' }];
    for (const ev of history.events || []) items.push(ev);
    if (m.status === 'SENT') items.push({ at: m.sentAt, event: 'sent', instance: '', detail: 'acknowledged by the consumer' });
    fill($('timeline'), items.map((ev) => h('li', { class: BAD_EVENTS.has(ev.event) ? 'bad' : GOOD_EVENTS.has(ev.event) ? 'good' : '' },
      h('span', { class: 'when' }, when(ev.at)), h('span', { class: 'event' }, ev.event),
      ev.instance ? h('span', { class: 'instance' }, 'by ' + ev.instance) : null,
      ev.detail ? h('span', { class: 'detail' }, ev.detail) : null)));
    const actions = clear($('message-actions'));
    if (m.status === 'FAILED') {
      actions.append(h('button', { type: 'button', class: 'redrive danger', onclick: () => redriveOne(m) }, 'Re-drive…'));
      if (!m.acknowledgedBy) actions.append(h('button', { type: 'button', class: 'ack', onclick: () => acknowledgeOne(m) }, 'Acknowledge…'));
    }
    $('message-view').hidden = false;
    showPayload($('payload'), $('payload-type'), m.messageType, m.payload);
  }

  async function showPayload(table, typeLabel, type, payload) {
    clear(table);
    typeLabel.textContent = '';
    if (!payload) { kvTable(table, [['payload', '(empty)']]); return; }
    try {
      const decoded = await post('/console/v1/DecodePayload', { type: type || '', payload });
      if (decoded.type) {
        typeLabel.textContent = decoded.type;
        kvTable(table, Object.entries(decoded.fields || {}).map(([k, v]) =>
          [k, typeof v === 'object' ? JSON.stringify(v) : String(v)]));
      } else {
        const flat = (fields, prefix) => fields.flatMap((f) => Array.isArray(f.value)
          ? flat(f.value, prefix + f.field + '.') : [[prefix + f.field, String(f.value)]]);
        if (decoded.raw && decoded.raw.length) {
          typeLabel.textContent = 'type unknown: fields by number';
          kvTable(table, flat(decoded.raw, 'field '));
        } else if (decoded.text !== undefined) {
          typeLabel.textContent = 'not protobuf: as text';
          kvTable(table, [['text', decoded.text]]);
        } else {
          typeLabel.textContent = 'not protobuf';
          kvTable(table, [['base64', decoded.base64 || payload, 'mono']]);
        }
      }
    } catch (e) {
      kvTable(table, [['base64', payload, 'mono']]);
    }
  }

  async function redriveOne(m) {
    const ok = await confirmAction('Re-drive message ' + m.messageId,
      'Send message ' + m.messageId + ' (' + m.bizKey + ') again?\nIt goes back to SENDING with its attempts reset.',
      'Re-drive 1 row');
    if (!ok) { showNotice('Nothing changed.'); return; }
    try {
      await ops('RedriveMessage', withReason({ messageId: m.messageId }, ok));
      showNotice('Re-drove message ' + m.messageId + '.');
      loadMessage(m.messageId);
    } catch (e) { report(e, 'RedriveMessage'); }
  }

  async function acknowledgeOne(m) {
    const ok = await confirmAction('Acknowledge message ' + m.messageId,
      'Leave message ' + m.messageId + ' FAILED and stop its alert?', 'Acknowledge 1 row');
    if (!ok) { showNotice('Nothing changed.'); return; }
    try {
      await ops('AcknowledgeFailure', withReason({ messageId: m.messageId }, ok));
      showNotice('Acknowledged message ' + m.messageId + '.');
      loadMessage(m.messageId);
    } catch (e) { report(e, 'AcknowledgeFailure'); }
  }

  // --- dead letters

  async function loadDeadLetters() {
    $('dlq-inspect').hidden = true;
    const queue = $('dlq-queue').value.trim();
    try {
      const answer = await ops('ListDeadLetters', { queue, limit: num($('dlq-limit').value) || 100 });
      showBanner('');
      state.dlq = answer.messages || [];
      $('dlq-total').textContent = num(answer.total) + ' message(s) parked in ' + queue + '.DLQ' +
        (state.dlq.length < num(answer.total) ? ', ' + state.dlq.length + ' shown' : '');
      fill($('dlq-table').tBodies[0], state.dlq.map((d, i) => h('tr', {},
        h('td', { class: 'mono' }, d.messageId || '-'), h('td', {}, d.type || '-'),
        h('td', { class: 'num' }, d.body ? atob(d.body).length : 0),
        h('td', {}, h('button', { type: 'button', onclick: () => inspectDeadLetter(i) }, 'Inspect')))));
    } catch (e) { report(e, 'ListDeadLetters'); }
  }

  function inspectDeadLetter(i) {
    const d = state.dlq[i];
    $('dlq-inspect').hidden = false;
    $('dlq-inspect-id').textContent = d.messageId || '';
    showPayload($('dlq-fields'), $('dlq-inspect-type'), d.type, d.body);
  }

  async function redriveDeadLetters() {
    const queue = $('dlq-queue').value.trim();
    let n;
    try {
      n = num((await ops('ListDeadLetters', { queue, limit: 1 })).total);
    } catch (e) { report(e, 'ListDeadLetters'); return; }
    showBanner('');
    try {
      if (!n) { showNotice(queue + '.DLQ is empty: nothing to re-drive.'); return; }
      const ok = await confirmAction('Re-drive ' + queue + '.DLQ',
        'Move the ' + n + ' message(s) parked in ' + queue + '.DLQ back to ' + queue + '?\n' +
        'Each keeps its own signature; one still malformed is dead-lettered again.', 'Re-drive ' + n + ' message(s)');
      if (!ok) { showNotice('Nothing changed.'); return; }
      const done = await ops('RedriveDeadLetters', withReason({ queue, limit: n }, ok));
      showNotice('Moved ' + num(done.count) + ' message(s) back to ' + queue + '.');
      loadDeadLetters();
    } catch (e) { report(e, 'RedriveDeadLetters'); }
  }

  // --- audit

  async function loadAudit() {
    const pageToken = state.auditTokens[state.auditIndex] || '';
    try {
      const answer = await ops('ListAudit', { pageSize: 50, pageToken });
      showBanner('');
      const records = answer.records || [];
      fill($('audit-table').tBodies[0], records.map((r) => h('tr', {},
        h('td', { class: 'num' }, r.id), h('td', {}, when(r.at)), h('td', { class: 'actor' }, r.actor),
        h('td', {}, r.action), h('td', { class: 'mono' }, r.target), h('td', {}, r.dryRun ? 'dry run' : ''),
        h('td', { class: 'num' }, num(r.rows)), h('td', {}, r.outcome), h('td', { class: 'reason' }, r.reason || ''))));
      if (answer.nextPageToken) state.auditTokens[state.auditIndex + 1] = answer.nextPageToken;
      $('audit-older').disabled = !answer.nextPageToken;
      $('audit-newer').disabled = state.auditIndex === 0;
      $('audit-page').textContent = 'page ' + (state.auditIndex + 1) + (records.length ? '' : ' (no records)');
    } catch (e) { report(e, 'ListAudit'); }
  }

  // --- pages

  function currentPage() {
    const page = (location.hash || '#overview').slice(1).split('/')[0];
    return ['overview', 'failures', 'message', 'dead-letters', 'audit'].includes(page) ? page : 'overview';
  }

  function route() {
    const page = currentPage();
    for (const s of document.querySelectorAll('.page')) s.hidden = s.id !== 'page-' + page;
    for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.dataset.page === page);
    showNotice('');
    if (!signedIn()) return;
    showBanner('');
    if (page === 'overview') renderOverview();
    else if (page === 'failures') loadFailures();
    else if (page === 'message') openMessageLink();
    else if (page === 'dead-letters') loadDeadLetters();
    else if (page === 'audit') { state.auditTokens = ['']; state.auditIndex = 0; loadAudit(); }
  }

  // #message/<id>, the id percent-encoded; a link that is not (a truncated
  // or mangled one) is said so, and the rest of the page goes on.
  function openMessageLink() {
    const encoded = location.hash.split('/').slice(1).join('/');
    let id;
    try {
      id = decodeURIComponent(encoded);
    } catch (e) {
      $('search-id').value = '';
      $('message-view').hidden = true;
      showBanner('This link names no message: "' + encoded + '" is not a percent-encoded id (' + e.message + ').');
      return;
    }
    loadMessage(id);
  }

  // The shard list (it asks for the token too); false when it failed, said so.
  async function loadShards() {
    let shards;
    try {
      shards = (await post('/console/v1/shards')).shards || [];
    } catch (e) { report(e, 'the shard list'); return false; }
    state.shards = shards;
    const saved = sessionStorage.getItem(SHARD_KEY);
    state.shard = shards.some((s) => s.name === saved) ? saved : (shards[0] || {}).name || '';
    const select = clear($('shard'));
    for (const s of shards) select.append(h('option', { value: s.name }, s.name));
    select.value = state.shard;
    select.disabled = shards.length < 2;
    return shards.length > 0;
  }

  // Signed in: the shards, then the page and the first sample.
  async function connect() {
    if (!(await loadShards())) return;
    route();
    sampleAll();
  }

  async function start() {
    $('login-form').addEventListener('submit', (e) => { e.preventDefault(); signIn($('token').value.trim()); });
    $('login-open').addEventListener('click', () => signIn(''));
    $('signout').addEventListener('click', () => signOut('Token forgotten.'));
    $('failures-form').addEventListener('submit', (e) => { e.preventDefault(); loadFailures(); });
    $('search-form').addEventListener('submit', (e) => {
      e.preventDefault();
      const id = $('search-id').value.trim();
      const target = '#message/' + encodeURIComponent(id);
      if (location.hash === target) loadMessage(id); else location.hash = target;
    });
    $('dlq-form').addEventListener('submit', (e) => { e.preventDefault(); loadDeadLetters(); });
    $('dlq-redrive').addEventListener('click', redriveDeadLetters);
    $('overview-refresh').addEventListener('click', sampleAll);
    $('audit-older').addEventListener('click', () => { state.auditIndex++; loadAudit(); });
    $('audit-newer').addEventListener('click', () => { state.auditIndex = Math.max(0, state.auditIndex - 1); loadAudit(); });
    $('shard').addEventListener('change', () => {
      state.shard = $('shard').value;
      sessionStorage.setItem(SHARD_KEY, state.shard);
      route();
    });
    window.addEventListener('hashchange', route);
    document.addEventListener('visibilitychange', () => { if (!document.hidden) sampleAll(); });
    document.addEventListener('keydown', (e) => { if (e.key === 'Escape' && !$('confirm').hidden) $('confirm-cancel').click(); });

    setInterval(sampleAll, SAMPLE_MS);
    layout();
    if (signedIn()) connect();
    else route();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
