// Tollgate approval console. Plain browser JavaScript, no dependencies, no build step.
//
// Safety rules this file keeps (the CSP enforces the first with Trusted Types):
//  * data from the API is only ever written with textContent / DOM nodes, never as markup;
//  * the admin token lives in sessionStorage of this tab and travels only in the
//    Authorization header, never in a URL;
//  * behind a login proxy (server.admin_auth) no token is needed: the page first asks the API
//    without one and shows the sign-in form only when the API answers 401;
//  * the page only talks to its own origin (/api/v1/approvals, /api/v1/pins).
(function () {
  'use strict';

  var TOKEN_KEY = 'tollgate.adminToken';
  var API = '/api/v1/approvals';
  var POLL_MS = 2000;
  var PAGE_SIZE = 100;
  var SUMMARY = API + '/summary';
  var WHOAMI = API + '/whoami';
  var PINS = '/api/v1/pins'; // governance.pins: quarantined tools (404 when off, 403 when not ours to decide)
  var TIMEOUT_MS = 10000;
  var TITLES = {
    pending: 'Pending approvals',
    approved: 'Approved',
    rejected: 'Rejected',
    all: 'All approval requests'
  };

  var state = {
    filter: 'pending',
    sort: 'newest', // humans first see what just arrived; 'expiry' shows what times out first
    tool: '',
    owner: '',
    workflow: '',
    cursors: [''], // cursor of each page visited, so Previous goes back (the API pages forward)
    page: 0,
    next: '', // nextCursor of the page shown
    summary: null,
    listError: false, // the message banner shows a refused listing (400)
    items: [],
    selectedId: '',
    selected: null, // last known View of the selected request
    timer: 0,
    loading: false,
    deciding: false,
    generation: 0, // bumps on sign-out / filter change so stale replies are dropped
    proxied: '', // the approver a login proxy signed this browser in as ('' = token sign-in)
    me: null, // GET /api/v1/approvals/whoami of this sign-in: {approver, signIn, groups}
    signIns: 0, // bumps at each sign-in and sign-out so a stale whoami answer is dropped
    meLoading: false,
    pins: [], // GET /api/v1/pins: tools awaiting a decision (and rejected ones)
    pinsKey: '', // what the pins view shows, so a poll that changed nothing keeps it (and its scroll)
    pinDeciding: false,
    pinsShown: false // scrolled to the pins view once for a notification's #pins link
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
  // Without a token no Authorization header is sent (an empty one would count as a wrong
  // token); cookies of this origin travel, since a login proxy in front keys its session on one.
  function api(method, path, payload) {
    var headers = { 'Accept': 'application/json' };
    if (token()) { headers['Authorization'] = 'Bearer ' + token(); }
    var init = {
      method: method, headers: headers, cache: 'no-store', credentials: 'same-origin',
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
        return { status: resp.status, body: body, approver: proxyApprover(resp) };
      });
    });
  }

  // proxyApprover is the approver a login proxy signed the request in as (Tollgate-Approver,
  // percent-encoded), '' for a token.
  function proxyApprover(resp) {
    var v = resp.headers.get('Tollgate-Approver') || '';
    try { return decodeURIComponent(v); } catch (e) { return ''; }
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

  // previousRejectionText: the same call (same requester, tool and arguments) was rejected
  // before and the requester told; this is its request again (docs/contract.md §3).
  function previousRejectionText(v) {
    var p = v && v.previousRejection;
    if (!p) { return ''; }
    var txt = 'by ' + (p.by || 'unknown');
    if (p.at) { txt += ' at ' + localTime(p.at); }
    txt += ' (task ' + p.taskId + ')';
    if (p.reason) { txt += ' — reason: ' + p.reason; }
    return txt;
  }

  // cannotRun is why a pending call could no longer run if approved now (its session ended,
  // its stdio process exited, its tool is quarantined or no longer listed), or null. Approve is
  // disabled for it (approving would only fail the task); Reject stays, to tell the requester.
  function cannotRun(v) { return isPending(v) && v.cannotRun ? v.cannotRun : null; }

  // notWaitingText: nobody waits for this held call any more (its requester's call settled
  // undecided, timed out or went away); approved, its outcome is kept until resultKeptUntil
  // for the same call made again. '' otherwise.
  function notWaitingText(v, now) {
    var n = isPending(v) && v.requesterNotWaiting;
    if (!n) { return ''; }
    var until = parseTime(n.resultKeptUntil);
    var left = until === null ? '' : duration(Math.max(until - now, 0));
    return 'Requester no longer waiting; the result will be kept for ' + (left || 'a while') +
      ' (until ' + localTime(n.resultKeptUntil) + ') for the same call made again.';
  }

  // A task in one of these states changes no more; any other view may be stale.
  var FINAL = { completed: 1, failed: 1, rejected: 1, expired: 1, timed_out: 1, cancelled: 1 };
  function isFinal(v) { return !!v && FINAL.hasOwnProperty(v.state); }

  // statusText says in words where the call is: "approved (working)" read as if it still ran
  // after it had completed.
  var STATES = {
    awaiting_approval: 'awaiting approval',
    approved: 'approved — starting',
    executing: 'approved — running',
    completed: 'completed',
    failed: 'failed',
    rejected: 'rejected',
    expired: 'expired',
    timed_out: 'approval timed out',
    cancelled: 'cancelled'
  };
  function statusText(v) { return STATES[v.state] || v.state || '?'; }

  // "1 of 2 approvals (alice)" for a call that needs several distinct approvers
  // (approval.<name>.min_approvals); '' when one approval decides.
  function approvalsText(v) {
    var need = (v && v.requiredApprovals) || 1;
    if (need < 2) { return ''; }
    var votes = v.approvals || [];
    var txt = votes.length + ' of ' + need + ' approvals';
    if (votes.length) { txt += ' (' + votes.map(function (a) { return a.by; }).join(', ') + ')'; }
    return txt;
  }

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
        el('td', '', [el('span', 'state ' + (v.state || ''), [v.state || '?']),
          isPending(v) && approvalsText(v) ? el('div', 'small', [approvalsText(v).replace(/ \(.*\)$/, '')]) : '',
          cannotRun(v) ? el('div', 'cannot-run-badge small', ['cannot run']) : '',
          notWaitingText(v, now) ? el('div', 'not-waiting-badge small', ['requester not waiting']) : ''])
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
    // A row with large arguments carries only their summary: the detail view has them whole.
    if (state.selected && state.selected.argumentsTruncated) { loadSelected(state.generation, id); }
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
    field(dl, 'Status', statusText(v));
    field(dl, 'Workflow', v.workflow);
    field(dl, 'Requested by', v.requestedBy);
    field(dl, 'Owner (hash)', v.owner);
    field(dl, 'Created', localTime(v.createdAt));
    if (v.approvalDeadline) { field(dl, 'Approval deadline', localTime(v.approvalDeadline)); }
    if (v.expiresAt) { field(dl, 'Task expires', localTime(v.expiresAt)); }
    field(dl, 'Arguments hash', v.argsHash);
    field(dl, 'Approvals', approvalsText(v));
    field(dl, 'Rejected before', previousRejectionText(v));
    field(dl, 'Status message', v.statusMessage);
    if (v.failure) { field(dl, 'Failure', (v.failure.name || 'error') + ' (' + v.failure.code + ')'); }
    $('d-fields').replaceWith(dl);

    // argumentsText is the call as the upstream gets it; JSON.stringify of the parsed
    // arguments would show numbers rounded through float64 (9007199254740993 as …992).
    var args = v.argumentsText;
    if (v.argumentsTruncated) {
      args = v.argumentsPreview + '…\n(loading all ' + v.argumentsBytes + ' bytes of the arguments)';
    } else if (typeof args !== 'string') {
      try { args = JSON.stringify(v.arguments === undefined ? null : v.arguments, null, 2); } catch (e) { args = '(unreadable)'; }
    }
    $('args').textContent = args;

    if ($('d-why').dataset.task !== v.taskId) {
      $('d-why').dataset.task = v.taskId;
      $('d-why').open = false;
      $('why').textContent = 'Loading…';
    }

    var dt = decisionText(v);
    $('d-decision').hidden = !dt;
    $('d-decision-text').textContent = dt;

    var open = isPending(v) && !state.deciding && !v.argumentsTruncated; // decide on what was read
    var cr = cannotRun(v);
    $('d-cannot-run').hidden = !cr;
    $('d-cannot-run').textContent = cr ? 'Cannot run any more: ' + cr.message + ' [' + cr.reason + ']. Approve is disabled; reject to tell the requester.' : '';
    var nw = notWaitingText(v, Date.now());
    $('d-not-waiting').hidden = !nw;
    $('d-not-waiting').textContent = nw;
    $('approve').disabled = !open || !!cr;
    $('approve').title = cr ? 'This call can no longer run: ' + cr.message : '';
    $('reject').disabled = !open;
    $('reason').disabled = !isPending(v);
    $('decide').hidden = !isPending(v) && !state.deciding;
  }

  // whyText renders GET /api/v1/approvals/{id}/explain: no argument values, only ids.
  function whyText(r) {
    var x = r.explanation || {};
    var rule = x.rule || {};
    var lines = ['Rule: ' + (rule.index >= 0 ? 'governance.rules[' + rule.index + '] "' + rule.match + '"' : 'governance.defaults') +
      ' → ' + rule.action + (rule.mode === 'audit' ? ' (audit mode)' : '')];
    if (x.cedar) { lines.push('Cedar: ' + x.cedar); }
    (x.policies || []).forEach(function (p) {
      lines.push('  ' + p.outcome + '  ' + p.effect + (p.decision === 'approve' ? ' @decision(approve)' : '') +
        '  ' + p.id + '  ' + p.position + (p.error ? '  error: ' + p.error : ''));
    });
    lines.push('Outcome: ' + x.outcome + (x.would ? ' (audit mode: would ' + x.would + ')' : ''));
    lines.push('What would change it:');
    (x.what_would_change_it || []).forEach(function (c) { lines.push('  - ' + c); });
    lines.push('(re-evaluated with configuration revision ' + r.revision + ')');
    return lines.join('\n');
  }

  function loadWhy() {
    var id = $('d-why').dataset.task;
    if (!$('d-why').open || !id) { return; }
    api('GET', API + '/' + encodeURIComponent(id) + '/explain').then(function (r) {
      if ($('d-why').dataset.task !== id) { return; }
      $('why').textContent = r.status === 200 && r.body ? whyText(r.body) : (serverMessage(r) || 'No explanation (HTTP ' + r.status + ').');
    }, function () { $('why').textContent = 'The gateway could not be reached.'; });
  }

  // ---- quarantined tools (governance.pins) -------------------------------------------------

  // diffNode renders the API's field-by-field line diff: "+ " added, "- " removed, "  " kept.
  function diffNode(diff) {
    var pre = el('pre', 'diff', []);
    (diff || []).forEach(function (c) {
      pre.appendChild(el('span', 'field', [String(c.field) + ':']));
      (c.lines || []).forEach(function (l) {
        l = String(l);
        var kind = l.indexOf('+ ') === 0 ? 'add' : (l.indexOf('- ') === 0 ? 'del' : 'ctx');
        pre.appendChild(el('span', kind, [l]));
      });
    });
    if (!pre.firstChild) { pre.appendChild(el('span', 'ctx', ['(no field to show)'])); }
    return pre;
  }

  var REASONS = {
    changed: 'its definition changed',
    'new': 'a new tool',
    too_large: 'its definition is larger than governance.pins.max_definition_bytes'
  };

  function pinNode(p) {
    var tool = String(p.tool);
    var quarantined = p.status === 'quarantined';
    var facts = (REASONS[p.reason] || String(p.reason)) +
      (p.changes > 1 ? ' · ' + p.changes + ' different definitions seen' : '') +
      (p.first_seen ? ' · first seen ' + localTime(p.first_seen) : '');
    var box = el('article', 'pin', [
      el('div', 'row between', [
        el('h3', '', [el('code', '', [tool]), ' ', el('span', 'state ' + (quarantined ? 'quarantined' : 'rejected'), [String(p.status)])]),
        el('span', 'muted small', [facts])
      ]),
      el('p', 'muted small', ['New definition ' + String(p.digest) + (p.accepted_digest ? ' (accepted: ' + String(p.accepted_digest) + ')' : ' (none accepted yet)')]),
      diffNode(p.diff)
    ]);
    box.dataset.tool = tool;
    if (!quarantined) {
      box.appendChild(el('p', 'muted small', ['Rejected: refused while the upstream serves this definition; the tool is back when the upstream returns to the accepted one.']));
      return box;
    }
    var accept = el('button', 'approve', ['Accept new definition']);
    accept.type = 'button';
    accept.dataset.op = 'accept';
    var reject = el('button', 'reject', ['Reject']);
    reject.type = 'button';
    reject.dataset.op = 'reject';
    accept.disabled = state.pinDeciding || p.reason === 'too_large'; // the API refuses it (409)
    reject.disabled = state.pinDeciding;
    [accept, reject].forEach(function (b) { b.dataset.tool = tool; b.dataset.digest = String(p.digest); });
    box.appendChild(el('div', 'row', [accept, reject]));
    return box;
  }

  function renderPins() {
    var list = state.pins;
    var key = JSON.stringify(list) + '|' + state.pinDeciding;
    $('pins').hidden = list.length === 0;
    if (key === state.pinsKey) { return; }
    state.pinsKey = key;
    var nodes = list.map(pinNode);
    $('pins-list').replaceChildren.apply($('pins-list'), nodes);
  }

  // loadPins shows the tools awaiting a decision; the view stays hidden when pins are off
  // (404) or this approver may not decide them (403: governance.pins.workflow).
  function loadPins(gen) {
    return api('GET', PINS).then(function (r) {
      if (gen !== state.generation) { return; }
      $('pins').dataset.status = String(r.status); // 200, 404 (pins off) or 403 (not ours)
      state.pins = (r.status === 200 && r.body && Array.isArray(r.body.pins)) ? r.body.pins : [];
      renderPins();
      if (state.pins.length > 0 && location.hash === '#pins' && !state.pinsShown) {
        state.pinsShown = true; // a notification's link: show the list once
        $('pins').scrollIntoView();
      }
    }, function () { /* the list reports an unreachable gateway */ });
  }

  function decidePin(b) {
    if (state.pinDeciding) { return; }
    var tool = b.dataset.tool;
    var accept = b.dataset.op === 'accept';
    state.pinDeciding = true;
    renderPins();
    api('POST', PINS + '/' + encodeURIComponent(tool) + '/' + (accept ? 'accept' : 'reject'), { digest: b.dataset.digest }).then(function (r) {
      switch (r.status) {
        case 200:
          showMessage('ok', accept ? 'Accepted the new definition of ' + tool + ': it is back in the tool list.'
            : 'Rejected the new definition of ' + tool + ': it stays refused while the upstream serves it.');
          return;
        case 401:
          unauthorized();
          return;
        case 403:
          showMessage('error', 'Not allowed (403): ' + (serverMessage(r) || 'you may not decide pinned tool definitions') + '.');
          return;
        case 404:
          showMessage('warn', 'No definition of ' + tool + ' awaits a decision any more (404): someone decided it first.');
          return;
        case 409:
          showMessage('warn', 'Not recorded (409): ' + (serverMessage(r) || 'the definition changed since it was shown') + ' Look at the new diff.');
          return;
        default:
          showMessage('error', 'The decision was not recorded (HTTP ' + r.status + ')' + (serverMessage(r) ? ': ' + serverMessage(r) : '.'));
      }
    }, function () {
      showMessage('error', 'Could not reach the gateway; the decision was not recorded. Try again.');
    }).then(function () {
      state.pinDeciding = false;
      state.pinsKey = '';
      loadPins(state.generation);
    });
  }

  // ---- paging, filters and per-owner counts ------------------------------------------------

  function listPath() {
    var q = ['status=' + encodeURIComponent(state.filter), 'sort=' + encodeURIComponent(state.sort),
      'limit=' + PAGE_SIZE];
    ['tool', 'owner', 'workflow'].forEach(function (k) {
      if (state[k]) { q.push(k + '=' + encodeURIComponent(state[k])); }
    });
    var c = state.cursors[state.page];
    if (c) { q.push('cursor=' + encodeURIComponent(c)); }
    return API + '?' + q.join('&');
  }

  function renderPager() {
    $('prev').disabled = state.page === 0;
    $('next').disabled = !state.next;
    $('page').textContent = 'Page ' + (state.page + 1) + (state.next ? '' : ' (last)');
  }

  // A chip is a button that sets one filter; its text is data, so it is built with text nodes.
  function chip(kind, key, label) {
    var b = el('button', 'secondary' + (state[kind] === key ? ' active' : ''), [label]);
    b.type = 'button';
    b.dataset.kind = kind;
    b.dataset.key = key;
    return b;
  }

  function breakdown(id, kind, title, b) {
    var box = $(id);
    var nodes = [];
    if (b && Array.isArray(b.top) && b.top.length > 0) {
      nodes.push(el('span', 'muted', [title + ':']));
      b.top.forEach(function (c) {
        var key = String(c.key);
        var name = kind === 'owner' ? 'owner ' + (key || 'none') : (key || '—');
        nodes.push(chip(kind, key, name + ': ' + c.pending + ' pending'));
      });
      if (b.otherKeys > 0) {
        nodes.push(el('span', 'muted', ['and ' + b.otherKeys + ' more (' + b.otherPending + ' pending)']));
      }
    }
    box.replaceChildren.apply(box, nodes);
  }

  function renderSummary() {
    var s = state.summary;
    // Audit mode is never silent: calls it would deny or hold are forwarded meanwhile.
    var audit = s && typeof s.auditMode === 'string' ? s.auditMode : '';
    $('audit-mode').hidden = !audit;
    $('audit-mode').textContent = audit ? 'Audit mode is on — ' + audit.replace(/^audit mode: /, '') +
      '. Would-be decisions: GET /api/v1/decisions?would=true' : '';
    $('summary').hidden = !s;
    if (!s) { return; }
    $('summary-total').textContent = s.pending + ' pending in all' +
      (s.pending > 0 ? ' — pick an owner, workflow or tool to see only theirs' : '');
    breakdown('summary-owners', 'owner', 'By owner', s.owners);
    breakdown('summary-workflows', 'workflow', 'By workflow', s.workflows);
    breakdown('summary-tools', 'tool', 'By tool', s.tools);
  }

  function loadSummary(gen) {
    return api('GET', SUMMARY).then(function (r) {
      if (gen !== state.generation) { return; }
      state.summary = (r.status === 200 && r.body && typeof r.body.pending === 'number') ? r.body : null;
      renderSummary();
    }, function () { /* the list reports an unreachable gateway */ });
  }

  // newListing starts again at the first page (a new status, sort or filter).
  function newListing() {
    state.generation++;
    state.loading = false;
    state.cursors = [''];
    state.page = 0;
    state.next = '';
    state.items = [];
    renderList();
    renderPager();
    refresh();
  }

  function applyFilters() {
    state.tool = $('f-tool').value.trim();
    state.owner = $('f-owner').value.trim();
    state.workflow = $('f-workflow').value.trim();
    newListing();
  }

  function setFilter(kind, key) {
    state[kind] = state[kind] === key ? '' : key; // a second click on the same chip clears it
    $('f-' + kind).value = state[kind];
    newListing();
  }

  function turnPage(delta) {
    if (delta > 0 && !state.next) { return; }
    if (delta < 0 && state.page === 0) { return; }
    if (delta > 0) {
      state.cursors = state.cursors.slice(0, state.page + 1);
      state.cursors.push(state.next);
    }
    state.page += delta;
    state.generation++;
    state.loading = false;
    state.next = '';
    renderPager();
    refresh();
  }

  // ---- refresh loop ------------------------------------------------------------------------

  function refresh() {
    if (state.loading || (!token() && !state.proxied)) { return; }
    state.loading = true;
    var gen = state.generation;
    api('GET', listPath()).then(function (r) {
      if (gen !== state.generation) { return; }
      if (r.status === 401) { unauthorized(); return; }
      if (r.status === 400) {
        $('refresh').textContent = 'Not listed: ' + (serverMessage(r) || 'HTTP 400');
        showMessage('error', 'The gateway did not accept this listing (400): ' + (serverMessage(r) || 'bad request'));
        state.listError = true;
        state.items = [];
        state.next = '';
        renderList();
        renderPager();
        return loadSummary(gen);
      }
      if (r.status !== 200 || !r.body || !Array.isArray(r.body.approvals)) {
        $('refresh').textContent = 'Refresh failed: HTTP ' + r.status + (serverMessage(r) ? ' — ' + serverMessage(r) : '');
        return;
      }
      showApp();
      if (state.listError) { clearMessage(); state.listError = false; }
      state.items = r.body.approvals;
      state.next = typeof r.body.nextCursor === 'string' ? r.body.nextCursor : '';
      var fresh = null;
      state.items.forEach(function (v) { if (v.taskId === state.selectedId) { fresh = v; } });
      if (fresh && fresh.argumentsTruncated && state.selected && state.selected.taskId === fresh.taskId &&
          !state.selected.argumentsTruncated) {
        // keep the whole arguments the detail view gave (a task's arguments never change)
        fresh.arguments = state.selected.arguments;
        fresh.argumentsText = state.selected.argumentsText;
        fresh.argumentsTruncated = false;
      }
      if (fresh) { state.selected = fresh; }
      renderList();
      renderDetail();
      renderPager();
      if ((!fresh && state.selected && !isFinal(state.selected)) || (fresh && fresh.argumentsTruncated)) {
        loadSelected(gen, state.selectedId);
      }
      $('refresh').textContent = 'Updated ' + new Date().toLocaleTimeString() + ' · ' + state.items.length +
        ' shown on page ' + (state.page + 1) + (state.next ? ' (more on the next page)' : '') + ' · refreshes every 2 s';
      return Promise.all([loadSummary(gen), loadPins(gen)]);
    }, function () {
      if (gen !== state.generation) { return; }
      $('refresh').textContent = 'Gateway unreachable at ' + new Date().toLocaleTimeString() + '; retrying.';
    }).then(function () { if (gen === state.generation) { state.loading = false; } });
  }

  // loadSelected refreshes the request shown in the detail when the page's listing no longer
  // holds it (an approved call leaves the pending list while it runs and completes).
  function loadSelected(gen, id) {
    api('GET', API + '/' + encodeURIComponent(id)).then(function (r) {
      if (gen !== state.generation || id !== state.selectedId || r.status !== 200 || !r.body) { return; }
      state.selected = r.body;
      renderDetail();
    }, function () { /* the list reports an unreachable gateway */ });
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
    // Signed in by the login proxy: it owns the session, so there is nothing to sign out of here.
    $('signout').hidden = !!state.proxied;
    renderWho();
    if (!state.me && !state.meLoading) { loadWho(); }
  }

  // renderWho names the approver and their groups once the gateway said who they are.
  function renderWho() {
    var me = state.me;
    var name = (me && me.approver) || state.proxied;
    $('whoami').textContent = !name ? (me ? 'signed in' : 'checking who you are…')
      : 'signed in as ' + name + (state.proxied || (me && me.signIn === 'login_proxy') ? ' (login proxy)' : '');
    var groups = (me && Array.isArray(me.groups)) ? me.groups : [];
    $('groups').textContent = groups.length ? 'groups: ' + groups.join(', ') : '';
    $('groups').hidden = groups.length === 0;
  }

  function loadWho() {
    var n = state.signIns;
    state.meLoading = true;
    api('GET', WHOAMI).then(function (r) {
      if (n !== state.signIns) { return; }
      state.meLoading = false;
      // An older gateway without whoami: say "signed in" rather than guess a name.
      state.me = (r.status === 200 && r.body && typeof r.body.approver === 'string') ? r.body : { approver: '', groups: [] };
      renderWho();
    }, function () { if (n === state.signIns) { state.meLoading = false; } });
  }
  function showLogin() {
    $('app').hidden = true;
    $('session').hidden = true;
    $('login').hidden = false;
    $('token').focus();
  }

  // forgetWho drops who the page was signed in as (sign-in, sign-out, a refused token).
  function forgetWho() {
    state.signIns++;
    state.me = null;
    state.meLoading = false;
  }

  function reset() {
    state.generation++;
    state.loading = false;
    state.cursors = [''];
    state.page = 0;
    state.next = '';
    state.summary = null;
    state.items = [];
    state.selectedId = '';
    state.selected = null;
    state.pins = [];
    state.pinsKey = '';
    renderList();
    renderDetail();
    renderPager();
    renderSummary();
    renderPins();
  }

  function unauthorized() {
    var wasProxied = !!state.proxied;
    stopPolling();
    setToken('');
    state.proxied = '';
    forgetWho();
    reset();
    showLogin();
    showMessage('error', wasProxied
      ? 'The gateway no longer sees your login-proxy sign-in (401 Unauthorized). Reload the page to sign in again, or enter an admin token.'
      : 'The gateway refused this admin token (401 Unauthorized). Check the token and sign in again.');
  }

  // probe asks the API without a token: behind a login proxy that signs approvers in, it
  // answers, and the console needs no token. Only a 401 asks for one.
  function probe() {
    api('GET', API + '?limit=1').then(function (r) {
      if (r.status === 200 && r.approver) {
        state.proxied = r.approver;
        showApp();
        startPolling();
        return;
      }
      showLogin();
      if (r.status === 403) {
        showMessage('error', 'Your login proxy signed you in, but the gateway refused it (403): ' + (serverMessage(r) || 'not allowed') +
          ' You can still sign in with an admin token.');
      }
    }, function () {
      showLogin();
    });
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
    forgetWho();
    reset();
    startPolling();
  }

  function signOut() {
    stopPolling();
    setToken('');
    forgetWho();
    reset();
    clearMessage();
    showLogin();
  }

  // ---- decisions ---------------------------------------------------------------------------

  function decide(approve) {
    var v = state.selected;
    if (!v || state.deciding) { return; }
    // The reason is optional for both decisions, as in the API and the CLI; when given it
    // reaches the requester and the audit log.
    var reason = $('reason').value.trim();
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
        if (approve && isPending(r.body)) {
          showMessage('ok', 'Your approval of ' + name + ' (' + id + ') is recorded: ' + approvalsText(r.body) +
            '. It runs once another approver approves.');
          return;
        }
        showMessage('ok', (approve ? 'Approved ' : 'Rejected ') + name + ' (' + id + ').');
        return;
      case 401:
        unauthorized();
        return;
      case 403:
        if (r.body && r.body.error === 'not_authorized') {
          // approval.<name>.approvers: someone else decides this workflow (a reload may have narrowed it)
          showMessage('error', 'Not allowed (403): ' + (serverMessage(r) || 'you may not decide this workflow\'s calls') + '. Ask one of its approvers.');
          return;
        }
        showMessage('error', 'Not allowed (403): you requested this call yourself, and the requester of a call cannot approve or reject it. Ask another approver.');
        return;
      case 404:
        showMessage('error', 'Task ' + id + ' was not found (404); it may have expired.');
        return;
      case 409: {
        var standing = r.body && r.body.approval;
        updateSelected(id, standing);
        if (r.body && r.body.error === 'already_approved') {
          showMessage('warn', 'You already approved this request (' + approvalsText(standing) + '); another approver must approve it.');
          return;
        }
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
    $('sort').addEventListener('change', function () {
      state.sort = $('sort').value;
      newListing();
    });
    $('filters').addEventListener('submit', function (ev) {
      ev.preventDefault(); // the CSP forbids form submission; the filters apply in place
      applyFilters();
    });
    $('f-clear').addEventListener('click', function () {
      ['f-tool', 'f-owner', 'f-workflow'].forEach(function (id) { $(id).value = ''; });
      applyFilters();
    });
    $('summary').addEventListener('click', function (ev) {
      var b = ev.target.closest ? ev.target.closest('button[data-kind]') : null;
      if (b) { setFilter(b.dataset.kind, b.dataset.key); }
    });
    $('prev').addEventListener('click', function () { turnPage(-1); });
    $('d-why').addEventListener('toggle', loadWhy);
    $('next').addEventListener('click', function () { turnPage(1); });
    var tbody = $('approvals').tBodies[0];
    tbody.addEventListener('click', onRowActivate);
    tbody.addEventListener('keydown', onRowActivate);
    $('pins-list').addEventListener('click', function (ev) {
      var b = ev.target.closest ? ev.target.closest('button[data-op]') : null;
      if (b && !b.disabled) { decidePin(b); }
    });
    $('approve').addEventListener('click', function () { decide(true); });
    $('reject').addEventListener('click', function () { decide(false); });

    if (token()) {
      showApp();
      startPolling();
    } else {
      probe();
    }
  }

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', init);
  } else {
    init();
  }
}());
