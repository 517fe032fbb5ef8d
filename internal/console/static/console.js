// Tollgate approval console. Plain browser JavaScript, no dependencies, no build step.
//
// Safety rules this file keeps (the CSP enforces the first with Trusted Types):
//  * data from the API is only ever written with textContent / DOM nodes, never as markup;
//  * the admin token lives in sessionStorage of this tab and travels only in the
//    Authorization header, never in a URL;
//  * the page only talks to its own origin (/api/v1/approvals).
(function () {
  'use strict';

  var TOKEN_KEY = 'tollgate.adminToken';
  var API = '/api/v1/approvals';
  var POLL_MS = 2000;
  var TIMEOUT_MS = 10000;
  var TITLES = {
    pending: 'Pending approvals',
    approved: 'Approved',
    rejected: 'Rejected',
    all: 'All approval requests'
  };

  var state = {
    filter: 'pending',
    items: [],
    selectedId: '',
    selected: null, // last known View of the selected request
    timer: 0,
    loading: false,
    deciding: false,
    generation: 0 // bumps on sign-out / filter change so stale replies are dropped
  };

  function $(id) { return document.getElementById(id); }

  // el builds an element whose children are nodes or plain text (never markup).
  function el(tag, className, children) {
    var e = document.createElement(tag);
    if (className) { e.className = className; }
    (children || []).forEach(function (c) {
      e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
    });
    return e;
  }

  function getToken() {
    try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch (e) { return ''; }
  }
  function setToken(t) {
    try {
      if (t) { sessionStorage.setItem(TOKEN_KEY, t); } else { sessionStorage.removeItem(TOKEN_KEY); }
    } catch (e) { /* storage disabled: the token then lives only in memory until reload */ }
    memoryToken = t;
  }
  var memoryToken = '';
  function token() { return getToken() || memoryToken; }

  // ---- messages ----------------------------------------------------------------------------

  function showMessage(kind, text) {
    var m = $('message');
    m.className = 'banner ' + kind;
    m.dataset.kind = kind;
    m.textContent = text;
    m.hidden = false;
  }
  function clearMessage() {
    var m = $('message');
    m.hidden = true;
    m.textContent = '';
    m.dataset.kind = '';
  }

  // ---- HTTP --------------------------------------------------------------------------------

  // api returns {status, body}; body is the parsed JSON or null. Network failures reject.
  function api(method, path, payload) {
    var headers = { 'Authorization': 'Bearer ' + token(), 'Accept': 'application/json' };
    var init = {
      method: method, headers: headers, cache: 'no-store', credentials: 'omit',
      referrerPolicy: 'no-referrer', redirect: 'error'
    };
    if (payload !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(payload);
    }
    if (typeof AbortSignal !== 'undefined' && AbortSignal.timeout) {
      init.signal = AbortSignal.timeout(TIMEOUT_MS);
    }
    return fetch(path, init).then(function (resp) {
      return resp.text().then(function (txt) {
        var body = null;
        try { body = txt ? JSON.parse(txt) : null; } catch (e) { body = null; }
        return { status: resp.status, body: body };
      });
    });
  }

  function serverMessage(r) {
    return (r.body && typeof r.body.message === 'string') ? r.body.message : '';
  }

  // ---- time formatting ---------------------------------------------------------------------

  function parseTime(s) {
    var t = s ? Date.parse(s) : NaN;
    return isNaN(t) ? null : t;
  }
  function duration(ms) {
    var s = Math.max(0, Math.round(ms / 1000));
    if (s < 60) { return s + 's'; }
    var m = Math.floor(s / 60);
    if (m < 60) { return m + 'm ' + (s % 60) + 's'; }
    var h = Math.floor(m / 60);
    if (h < 48) { return h + 'h ' + (m % 60) + 'm'; }
    return Math.floor(h / 24) + 'd ' + (h % 24) + 'h';
  }
  function localTime(s) {
    var t = parseTime(s);
    return t === null ? '—' : new Date(t).toLocaleString() + ' (' + s + ')';
  }

  function decisionText(v) {
    var d = v && v.decision;
    if (!d) { return ''; }
    var txt = (d.approved ? 'Approved' : 'Rejected') + ' by ' + (d.by || 'unknown');
    if (d.at) { txt += ' at ' + localTime(d.at); }
    if (d.reason) { txt += ' — reason: ' + d.reason; }
    return txt;
  }

  function isPending(v) { return !!v && v.state === 'awaiting_approval'; }

  // ---- list --------------------------------------------------------------------------------

  function deadlineCell(v, now) {
    if (!isPending(v)) {
      return el('td', 'muted', [v.decision ? (v.decision.approved ? 'approved' : 'rejected') : '—']);
    }
    var t = parseTime(v.approvalDeadline);
    if (t === null) { return el('td', 'muted', ['none']); }
    var td = t > now ? el('td', '', ['in ' + duration(t - now)]) : el('td', 'overdue', ['overdue ' + duration(now - t)]);
    td.title = v.approvalDeadline;
    return td;
  }

  function renderList() {
    var now = Date.now();
    var rows = state.items.map(function (v) {
      var created = parseTime(v.createdAt);
      var age = el('td', '', [created === null ? '—' : duration(now - created)]);
      age.title = v.createdAt || '';
      var who = (v.requestedBy || '—') + (v.owner ? ' · owner ' + v.owner : '');
      var tr = el('tr', v.taskId === state.selectedId ? 'selected' : '', [
        el('td', '', [el('code', '', [v.tool || '?'])]),
        el('td', '', [v.workflow || '—']),
        age,
        deadlineCell(v, now),
        el('td', 'small', [who]),
        el('td', '', [el('span', 'state ' + (v.state || ''), [v.state || '?'])])
      ]);
      tr.dataset.taskId = v.taskId;
      tr.tabIndex = 0;
      return tr;
    });
    $('approvals').tBodies[0].replaceChildren.apply($('approvals').tBodies[0], rows);
    $('empty').hidden = rows.length > 0;
  }

  function onRowActivate(ev) {
    var tr = ev.target.closest ? ev.target.closest('tr[data-task-id]') : null;
    if (!tr) { return; }
    if (ev.type === 'keydown' && ev.key !== 'Enter' && ev.key !== ' ') { return; }
    if (ev.type === 'keydown') { ev.preventDefault(); }
    select(tr.dataset.taskId);
  }

  function select(id) {
    if (id !== state.selectedId) {
      $('reason').value = '';
    }
    state.selectedId = id;
    state.selected = null;
    state.items.forEach(function (v) { if (v.taskId === id) { state.selected = v; } });
    renderList();
    renderDetail();
  }

  // ---- detail ------------------------------------------------------------------------------

  function field(dl, name, value) {
    if (value === undefined || value === null || value === '') { return; }
    dl.appendChild(el('dt', '', [name]));
    dl.appendChild(el('dd', '', [String(value)]));
  }

  function renderDetail() {
    var v = state.selected;
    $('detail').hidden = !v;
    if (!v) { return; }
    $('d-id').textContent = v.taskId;
    var dl = el('dl', '', []);
    dl.id = 'd-fields';
    field(dl, 'Tool', v.tool);
    field(dl, 'Status', v.state + (v.status && v.status !== v.state ? ' (' + v.status + ')' : ''));
    field(dl, 'Workflow', v.workflow);
    field(dl, 'Requested by', v.requestedBy);
    field(dl, 'Owner (hash)', v.owner);
    field(dl, 'Created', localTime(v.createdAt));
    if (v.approvalDeadline) { field(dl, 'Approval deadline', localTime(v.approvalDeadline)); }
    if (v.expiresAt) { field(dl, 'Task expires', localTime(v.expiresAt)); }
    field(dl, 'Arguments hash', v.argsHash);
    field(dl, 'Status message', v.statusMessage);
    if (v.failure) { field(dl, 'Failure', (v.failure.name || 'error') + ' (' + v.failure.code + ')'); }
    $('d-fields').replaceWith(dl);

    // argumentsText is the call as the upstream gets it; JSON.stringify of the parsed
    // arguments would show numbers rounded through float64 (9007199254740993 as …992).
    var args = v.argumentsText;
    if (typeof args !== 'string') {
      try { args = JSON.stringify(v.arguments === undefined ? null : v.arguments, null, 2); } catch (e) { args = '(unreadable)'; }
    }
    $('args').textContent = args;

    var dt = decisionText(v);
    $('d-decision').hidden = !dt;
    $('d-decision-text').textContent = dt;

    var open = isPending(v) && !state.deciding;
    $('approve').disabled = !open;
    $('reject').disabled = !open;
    $('reason').disabled = !isPending(v);
    $('decide').hidden = !isPending(v) && !state.deciding;
  }

  // ---- refresh loop ------------------------------------------------------------------------

  function refresh() {
    if (state.loading || !token()) { return; }
    state.loading = true;
    var gen = state.generation;
    api('GET', API + '?status=' + encodeURIComponent(state.filter)).then(function (r) {
      if (gen !== state.generation) { return; }
      if (r.status === 401) { unauthorized(); return; }
      if (r.status !== 200 || !r.body || !Array.isArray(r.body.approvals)) {
        $('refresh').textContent = 'Refresh failed: HTTP ' + r.status + (serverMessage(r) ? ' — ' + serverMessage(r) : '');
        return;
      }
      showApp();
      state.items = r.body.approvals;
      var fresh = null;
      state.items.forEach(function (v) { if (v.taskId === state.selectedId) { fresh = v; } });
      if (fresh) { state.selected = fresh; }
      renderList();
      renderDetail();
      $('refresh').textContent = 'Updated ' + new Date().toLocaleTimeString() + ' · ' + state.items.length +
        ' shown' + (r.body.truncated ? ' (list truncated)' : '') + ' · refreshes every 2 s';
    }, function () {
      if (gen !== state.generation) { return; }
      $('refresh').textContent = 'Gateway unreachable at ' + new Date().toLocaleTimeString() + '; retrying.';
    }).then(function () { state.loading = false; });
  }

  function startPolling() {
    stopPolling();
    refresh();
    state.timer = setInterval(refresh, POLL_MS);
  }
  function stopPolling() {
    if (state.timer) { clearInterval(state.timer); }
    state.timer = 0;
  }

  // ---- sign in / out -----------------------------------------------------------------------

  function showApp() {
    $('login').hidden = true;
    $('app').hidden = false;
    $('session').hidden = false;
  }
  function showLogin() {
    $('app').hidden = true;
    $('session').hidden = true;
    $('login').hidden = false;
    $('token').focus();
  }

  function reset() {
    state.generation++;
    state.loading = false;
    state.items = [];
    state.selectedId = '';
    state.selected = null;
    renderList();
    renderDetail();
  }

  function unauthorized() {
    stopPolling();
    setToken('');
    reset();
    showLogin();
    showMessage('error', 'The gateway refused this admin token (401 Unauthorized). Check the token and sign in again.');
  }

  function signIn() {
    var t = $('token').value.trim();
    $('token').value = '';
    if (!t) {
      showMessage('error', 'Enter an admin token.');
      return;
    }
    clearMessage();
    setToken(t);
    reset();
    startPolling();
  }

  function signOut() {
    stopPolling();
    setToken('');
    reset();
    clearMessage();
    showLogin();
  }

  // ---- decisions ---------------------------------------------------------------------------

  function decide(approve) {
    var v = state.selected;
    if (!v || state.deciding) { return; }
    var reason = $('reason').value.trim();
    if (!approve && !reason) {
      showMessage('error', 'A reason is required to reject.');
      $('reason').focus();
      return;
    }
    var verb = approve ? 'approve' : 'reject';
    var id = v.taskId;
    state.deciding = true;
    renderDetail();
    var payload = reason ? { reason: reason } : {};
    api('POST', API + '/' + encodeURIComponent(id) + '/' + verb, payload).then(function (r) {
      handleDecision(id, approve, r);
    }, function () {
      showMessage('error', 'Could not reach the gateway; the decision was not recorded. Try again.');
    }).then(function () {
      state.deciding = false;
      renderDetail();
      refresh();
    });
  }

  function updateSelected(id, view) {
    if (view && id === state.selectedId) {
      state.selected = view;
    }
  }

  function handleDecision(id, approve, r) {
    var name = (state.selected && state.selected.tool) || 'request';
    switch (r.status) {
      case 200:
        updateSelected(id, r.body);
        $('reason').value = '';
        showMessage('ok', (approve ? 'Approved ' : 'Rejected ') + name + ' (' + id + ').');
        return;
      case 401:
        unauthorized();
        return;
      case 403:
        showMessage('error', 'Not allowed (403): you requested this call yourself, and the requester of a call cannot approve or reject it. Ask another approver.');
        return;
      case 404:
        showMessage('error', 'Task ' + id + ' was not found (404); it may have expired.');
        return;
      case 409: {
        var standing = r.body && r.body.approval;
        updateSelected(id, standing);
        var txt = decisionText(standing);
        showMessage('warn', 'Someone else decided first (409 Conflict). ' +
          (txt ? 'Standing decision: ' + txt + '.' : (serverMessage(r) || 'The request is no longer awaiting approval.')));
        return;
      }
      default:
        showMessage('error', 'The decision was not recorded (HTTP ' + r.status + ')' +
          (serverMessage(r) ? ': ' + serverMessage(r) : '.'));
    }
  }

  // ---- wiring ------------------------------------------------------------------------------

  function init() {
    $('signin').addEventListener('click', signIn);
    $('token').addEventListener('keydown', function (ev) {
      if (ev.key === 'Enter') { ev.preventDefault(); signIn(); }
    });
    $('signout').addEventListener('click', signOut);
    $('filter').addEventListener('change', function () {
      state.filter = $('filter').value;
      $('list-title').textContent = TITLES[state.filter] || 'Approvals';
      reset();
      refresh();
    });
    var tbody = $('approvals').tBodies[0];
    tbody.addEventListener('click', onRowActivate);
    tbody.addEventListener('keydown', onRowActivate);
    $('approve').addEventListener('click', function () { decide(true); });
    $('reject').addEventListener('click', function () { decide(false); });

    if (token()) {
      showApp();
      startPolling();
    } else {
      showLogin();
    }
  }

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', init);
  } else {
    init();
  }
}());
