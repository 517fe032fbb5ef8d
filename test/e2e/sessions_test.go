package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store/storetest"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// Sessions are accepted only when Tollgate saw them initialized or the upstream confirmed them
// (docs/SECURITY.md, Sessions): a made-up Mcp-Session-Id owns nothing.

// forgedCall sends an approval-gated task call under a session id nobody issued.
func forgedCall(t *testing.T, g *testkit.Gateway, sid string) testkit.Reply {
	t.Helper()
	c := &testkit.RPC{T: t, URL: g.MCP, Session: sid}
	return c.Post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_user","arguments":{"user_id":"u-001"},"task":{"ttl":60000}}}`)
}

func wantSessionNotFound(t *testing.T, r testkit.Reply, what string) {
	t.Helper()
	if r.Status != http.StatusNotFound {
		t.Fatalf("%s: HTTP %d, want 404 (spec: the client must initialize again)\n%s", what, r.Status, r.Body)
	}
	if _, name := testkit.ErrorOf(r.Message(t)); name != "SessionNotFound" {
		t.Errorf("%s: error %q, want SessionNotFound", what, name)
	}
}

func TestForgedSessionIDRefused(t *testing.T) {
	_, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, approvalRules), approverEnv, nil)
	g.WaitReady(t)
	wantSessionNotFound(t, forgedCall(t, g, "forged-session-1"), "task call on a forged session")
	if n := len(pendingApprovals(t, g)); n != 0 {
		t.Errorf("%d approvals pending for a forged session, want none", n)
	}
	// A GET stream on a forged id is refused the same way.
	if st, _ := testkit.OpenStream(t, g.MCP, "forged-session-2"); st != http.StatusNotFound {
		t.Errorf("GET stream on a forged session: HTTP %d, want 404", st)
	}
	// A real session still works.
	g.NewClient(t).CallTask(2, "delete_user", `{"user_id":"u-002"}`)
}

// Forged ids must not fill the global pending quota: legitimate callers keep getting tasks.
func TestForgedSessionsCannotFillQuota(t *testing.T) {
	_, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, approvalRules+"tasks:\n  quotas: {max_pending_total: 20}\n"), approverEnv, nil)
	g.WaitReady(t)
	for i := range 40 {
		r := forgedCall(t, g, fmt.Sprintf("forged-%d", i))
		if r.Status == http.StatusOK {
			if _, name := testkit.ErrorOf(r.Message(t)); name == "" {
				t.Fatalf("forged session %d got a task: %s", i, r.Body)
			}
		}
	}
	tid := g.NewClient(t).CallTask(1, "delete_user", `{"user_id":"u-002"}`)
	t.Logf("legitimate caller got %s after 40 forged attempts", tid)
}

// A session the client ended with DELETE owns no new tasks.
func TestEndedSessionGetsNoTask(t *testing.T) {
	_, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, approvalRules), approverEnv, nil)
	g.WaitReady(t)
	c := g.NewClient(t)
	req, _ := http.NewRequest(http.MethodDelete, g.MCP, nil)
	req.Header.Set("Mcp-Session-Id", c.Session)
	resp, err := testkit.HTTPClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("DELETE: HTTP %d", resp.StatusCode)
	}
	wantSessionNotFound(t, forgedCall(t, g, c.Session), "task call on an ended session")
	if n := len(pendingApprovals(t, g)); n != 0 {
		t.Errorf("%d approvals pending for an ended session, want none", n)
	}
}

// TestSessionKnownAfterRestart: a session created before a restart still works after it (the
// file store keeps the ids Tollgate saw created); one the client ended does not, nor does a
// forged one, though the upstream answers a ping on both.
func TestSessionKnownAfterRestart(t *testing.T) {
	_, upURL := testkit.StartDemo(t)
	cfg := testkit.BasicConfig(upURL, approvalRules)
	env := map[string]string{"TOLLGATE_DATA_DIR": t.TempDir()}
	for k, v := range approverEnv {
		env[k] = v
	}
	a := testkit.StartGateway(t, cfg, env, nil)
	a.WaitReady(t)
	c := a.NewClient(t)
	ended := a.NewClient(t)
	deleteSession(t, a, ended.Session)
	a.Stop()

	b := testkit.StartGateway(t, cfg, env, nil)
	b.WaitReady(t)
	c.URL = b.MCP
	tid := c.CallTask(1, "delete_user", `{"user_id":"u-002"}`)
	if !strings.HasPrefix(tid, "tg_") {
		t.Fatalf("session from before the restart got no task: %s", tid)
	}
	wantSessionNotFound(t, forgedCall(t, b, ended.Session), "session ended before the restart")
	wantSessionNotFound(t, forgedCall(t, b, "mcp-session-"+uuid.NewString()), "forged session after a restart")
	if strings.Contains(b.Logs.String(), c.Session) || strings.Contains(a.Logs.String(), c.Session) {
		t.Error("a session id is in the logs")
	}
}

// TestSessionKnownToOtherReplica: two replicas in front of one upstream share a Redis store; a
// session initialized through one is accepted by the other, a forged one by neither.
func TestSessionKnownToOtherReplica(t *testing.T) {
	url := storetest.RedisURL(t) // skips loudly without redis-server
	_, upURL := testkit.StartDemo(t)
	cfg := testkit.BasicConfig(upURL, approvalRules+"tasks:\n  store: {type: redis, url: \""+url+"?key_prefix=sess-e2e-"+t.Name()+":\"}\n")
	a := testkit.StartGateway(t, cfg, approverEnv, nil)
	b := testkit.StartGateway(t, cfg, approverEnv, nil)
	a.WaitReady(t)
	b.WaitReady(t)
	c := a.NewClient(t)
	c.URL = b.MCP
	if tid := c.CallTask(1, "delete_user", `{"user_id":"u-002"}`); !strings.HasPrefix(tid, "tg_") {
		t.Fatalf("session from replica A got no task on replica B: %s", tid)
	}
	wantSessionNotFound(t, forgedCall(t, b, "mcp-session-"+uuid.NewString()), "forged session on replica B")
	// Ended through B, where it was created, it is refused by A too.
	ended := b.NewClient(t)
	deleteSession(t, b, ended.Session)
	wantSessionNotFound(t, forgedCall(t, a, ended.Session), "session ended on the other replica")
}

func deleteSession(t *testing.T, g *testkit.Gateway, sid string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, g.MCP, nil)
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := testkit.HTTPClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("DELETE: HTTP %d", resp.StatusCode)
	}
}

// An upstream without sessions: Tollgate mints tgs_ ids; nothing else is a session, also
// before any client initialized through this process.
func TestSessionlessUpstreamRefusesOtherIDs(t *testing.T) {
	up := sessionlessUpstream(t)
	cfg := testkit.BasicConfig(up.URL(), approvalRules)

	// Fresh process, nobody initialized yet: the upstream answers a ping on any id, so Tollgate
	// learns it has no sessions and refuses the id.
	g := testkit.StartGateway(t, cfg, approverEnv, nil)
	g.WaitReady(t)
	wantSessionNotFound(t, forgedCall(t, g, "made-up-1"), "made-up id, session-less upstream, before any initialize")

	c := g.NewClient(t)
	if !strings.HasPrefix(c.Session, "tgs_") {
		t.Fatalf("session-less upstream: session %q, want a tgs_ id", c.Session)
	}
	c.CallTask(1, "delete_user", `{"user_id":"u-002"}`)
	wantSessionNotFound(t, forgedCall(t, g, "made-up-2"), "made-up id, session-less upstream")
	wantSessionNotFound(t, forgedCall(t, g, "tgs_00000000-0000-4000-8000-000000000000"), "tgs_ id this process never minted")
}

// New sessions per source are rate limited.
func TestSessionRatePerSource(t *testing.T) {
	_, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, "server:\n  limits: {sessions_per_second: 0.01, session_burst: 3}\n"), nil, nil)
	g.WaitReady(t)
	for range 3 {
		g.NewClient(t)
	}
	c := &testkit.RPC{T: t, URL: g.MCP}
	r := c.Post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
		t.Fatalf("4th initialize from one source: HTTP %d (Retry-After %q), want 429\n%s", r.Status, r.Header.Get("Retry-After"), r.Body)
	}
	if code, name := testkit.ErrorOf(r.Message(t)); code != -32009 || name != "SessionRateLimited" {
		t.Errorf("error %v %q, want -32009 SessionRateLimited", code, name)
	}
}

// A session with an open stream or a pending task is never evicted for a new one; when every
// session is busy, a new one is refused, and the busy ones keep their notifications.
func TestBusySessionsNotEvicted(t *testing.T) {
	_, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, approvalRules+"server:\n  limits: {max_sessions: 2, session_burst: 1000}\n"), approverEnv, nil)
	g.WaitReady(t)
	a := g.NewClient(t)
	if st, _ := testkit.OpenStream(t, g.MCP, a.Session); st != 200 {
		t.Fatalf("stream: %d", st)
	}
	b := g.NewClient(t)
	tidB := b.CallTask(1, "delete_user", `{"user_id":"u-002"}`) // b is busy with a pending task

	c := &testkit.RPC{T: t, URL: g.MCP}
	r := c.Post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if r.Status != http.StatusServiceUnavailable {
		t.Fatalf("initialize with every session busy: HTTP %d, want 503\n%s", r.Status, r.Body)
	}
	if code, name := testkit.ErrorOf(r.Message(t)); code != -32013 || name != "SessionLimit" {
		t.Errorf("error %v %q, want -32013 SessionLimit", code, name)
	}

	// b's task and a's stream survived: b can still read its task, and a hears about its own.
	if m := b.TaskRPC(2, "tasks/get", tidB).Message(t); testkit.Dig(m, "result", "status") != "working" {
		t.Errorf("busy session lost its task: %v", m)
	}
	_, lines := testkit.OpenStream(t, g.MCP, b.Session)
	if st, _ := g.AdminRequest(t, "POST", "/api/v1/approvals/"+tidB+"/approve", "alice-secret-token", `{}`); st != 200 {
		t.Fatal("approve failed")
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("stream ended before the task's notification")
			}
			if strings.Contains(l, "notifications/tasks/status") && strings.Contains(l, tidB) && strings.Contains(l, `"completed"`) {
				return
			}
		case <-deadline:
			t.Fatal("busy session did not receive its task notification")
		}
	}
}

// Open GET streams are bounded per session and overall.
func TestStreamLimits(t *testing.T) {
	_, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, "server:\n  limits: {max_streams: 2, max_streams_per_session: 1, max_streams_per_source: 2}\n"), nil, nil)
	g.WaitReady(t)
	a, b, c := g.NewClient(t), g.NewClient(t), g.NewClient(t)
	if st, _ := testkit.OpenStream(t, g.MCP, a.Session); st != 200 {
		t.Fatalf("first stream: %d", st)
	}
	if st, _ := testkit.OpenStream(t, g.MCP, a.Session); st != http.StatusTooManyRequests {
		t.Errorf("second stream of one session: HTTP %d, want 429", st)
	}
	if st, _ := testkit.OpenStream(t, g.MCP, b.Session); st != 200 {
		t.Fatalf("another session's stream: %d", st)
	}
	if st, _ := testkit.OpenStream(t, g.MCP, c.Session); st != http.StatusTooManyRequests {
		t.Errorf("stream beyond server.limits.max_streams: HTTP %d, want 429", st)
	}
}

// TestForgedWellFormedSessionIDs: the demo upstream (mcp-go) answers a ping on any id of the
// form mcp-session-<uuid>, so a ping proves nothing. Ids Tollgate did not see created get 404
// and no task, however well-formed (300 tries, the session rate raised so it is not what
// stops them).
func TestForgedWellFormedSessionIDs(t *testing.T) {
	_, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, approvalRules+
		"server:\n  limits: {sessions_per_second: 10000, session_burst: 10000}\n"), approverEnv, nil)
	g.WaitReady(t)
	real := g.NewClient(t) // the upstream issues sessions, and Tollgate has seen one
	if !strings.HasPrefix(real.Session, "mcp-session-") {
		t.Fatalf("demo session id %q: want the mcp-session-<uuid> form the forgeries copy", real.Session)
	}
	tasks, notFound := 0, 0
	for range 300 {
		r := forgedCall(t, g, "mcp-session-"+uuid.NewString())
		if r.Status == http.StatusNotFound {
			notFound++
		}
		if r.Status == http.StatusOK && testkit.Dig(r.Message(t), "result", "task", "taskId") != nil {
			tasks++
		}
	}
	if tasks != 0 || notFound != 300 {
		t.Errorf("300 forged mcp-session-<uuid> ids: %d created tasks, %d got 404; want 0 and 300", tasks, notFound)
	}
	if n := len(pendingApprovals(t, g)); n != 0 {
		t.Errorf("%d approvals pending for forged sessions, want none", n)
	}
	real.CallTask(1, "delete_user", `{"user_id":"u-002"}`)
}

// sessionlessUpstream is an upstream without sessions: Tollgate mints tgs_ ids for its clients
// and the upstream never answers 404 for an ended one.
func sessionlessUpstream(t *testing.T) *testkit.RawUpstream {
	up, _ := countingSessionlessUpstream(t)
	return up
}

// countingSessionlessUpstream is sessionlessUpstream counting the tools/call requests it got.
func countingSessionlessUpstream(t *testing.T) (*testkit.RawUpstream, *atomic.Int64) {
	calls := &atomic.Int64{}
	return testkit.NewRawUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if strings.Contains(string(body), `"method":"tools/call"`) {
			calls.Add(1)
		}
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		if strings.Contains(string(body), `"method":"notifications/`) {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		id := "1"
		if i := strings.Index(string(body), `"id":`); i >= 0 {
			rest := string(body)[i+5:]
			id = rest[:strings.IndexAny(rest, ",}")]
		}
		result := `{}`
		if strings.Contains(string(body), `"method":"initialize"`) {
			result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"1"}}`
		} else if strings.Contains(string(body), `"method":"tools/list"`) {
			result = `{"tools":[{"name":"delete_user","inputSchema":{"type":"object"}}]}`
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result)
	}), calls
}

// TestSessionEndedOnOtherReplica: two replicas share a Redis store in front of an upstream
// that never refuses a session (Tollgate's own tgs_ sessions). A session the client ended
// through one replica is refused (404, so the client initializes again) by the other, which
// held it in memory; a DELETE through a replica that does not hold it ends it everywhere. On
// the old code the other replica kept serving the ended session, and the DELETE through a
// replica that did not hold it was sent to the upstream (405) and ended nothing.
func TestSessionEndedOnOtherReplica(t *testing.T) {
	url := storetest.RedisURL(t) // skips loudly without redis-server
	up := sessionlessUpstream(t)
	cfg := testkit.BasicConfig(up.URL(), approvalRules+"tasks:\n  store: {type: redis, url: \""+url+"?key_prefix=sess-end-"+t.Name()+":\"}\n")
	a := testkit.StartGateway(t, cfg, approverEnv, nil)
	b := testkit.StartGateway(t, cfg, approverEnv, nil)
	a.WaitReady(t)
	b.WaitReady(t)
	ping := `{"jsonrpc":"2.0","id":7,"method":"ping"}`

	// Ended through A after B served it.
	c := a.NewClient(t)
	if !strings.HasPrefix(c.Session, "tgs_") {
		t.Fatalf("session %q, want a tgs_ id", c.Session)
	}
	onB := &testkit.RPC{T: t, URL: b.MCP, Session: c.Session}
	if r := onB.Post(ping); r.Status != http.StatusOK {
		t.Fatalf("replica B does not serve the session from A: HTTP %d %s", r.Status, r.Body)
	}
	deleteSession(t, a, c.Session)
	wantSessionNotFound(t, forgedCall(t, b, c.Session), "session ended on replica A, held by replica B")
	wantSessionNotFound(t, onB.Post(ping), "ended session, again")

	// Ended through B, which never held it: A, which does, refuses it.
	d := a.NewClient(t)
	deleteSession(t, b, d.Session)
	wantSessionNotFound(t, forgedCall(t, a, d.Session), "session ended through replica B, held by replica A")

	// A live session is not affected.
	e := a.NewClient(t)
	if r := (&testkit.RPC{T: t, URL: b.MCP, Session: e.Session}).Post(ping); r.Status != http.StatusOK {
		t.Errorf("a live session on replica B: HTTP %d", r.Status)
	}
}

// TestApprovedAfterSessionEndedOnOtherReplica: a call held in a session that the client then
// ended through another replica is not run when approved: the replica that holds the session
// and runs the call reads the end in the store and fails the task with SessionGone.
func TestApprovedAfterSessionEndedOnOtherReplica(t *testing.T) {
	url := storetest.RedisURL(t)
	up, calls := countingSessionlessUpstream(t)
	cfg := testkit.BasicConfig(up.URL(), approvalRules+"tasks:\n  store: {type: redis, url: \""+url+"?key_prefix=sess-end-exec-"+t.Name()+":\"}\n")
	a := testkit.StartGateway(t, cfg, approverEnv, nil)
	b := testkit.StartGateway(t, cfg, approverEnv, nil)
	a.WaitReady(t)
	b.WaitReady(t)
	c := a.NewClient(t)
	tid := c.CallTask(1, "delete_user", `{"user_id":"u-002"}`)
	deleteSession(t, b, c.Session)
	if st, _ := a.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/approve", "alice-secret-token", `{}`); st != 200 {
		t.Fatalf("approve: %d", st)
	}
	status, view := waitTaskDone(t, a, tid)
	if status != "failed" || testkit.Dig(view, "failure", "name") != "SessionGone" {
		t.Errorf("task %s, failure %v; want failed with SessionGone", status, view["failure"])
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the upstream got %d tools/call; the session had ended", n)
	}
}

// TestSessionBindingOnOtherReplica: with server.identity_header, a session is bound to the
// identity that opened it on every replica sharing the store, not only the one that saw
// initialize: another identity holding its id gets 404 on the other replica too (and its
// DELETE there ends nothing), while its own identity is served. Before, the store kept ids
// only, and the first identity to use the id on another replica took the session.
func TestSessionBindingOnOtherReplica(t *testing.T) {
	url := storetest.RedisURL(t)
	up := sessionlessUpstream(t)
	cfg := testkit.BasicConfig(up.URL(), approvalRules+"server:\n  identity_header: X-Forwarded-User\ntasks:\n  store: {type: redis, url: \""+url+"?key_prefix=sess-bind-"+t.Name()+":\"}\n")
	a := testkit.StartGateway(t, cfg, approverEnv, nil)
	b := testkit.StartGateway(t, cfg, approverEnv, nil)
	a.WaitReady(t)
	b.WaitReady(t)
	alice := &testkit.RPC{T: t, URL: a.MCP, Header: http.Header{"X-Forwarded-User": {"alice"}}}
	alice.Initialize()
	ping := `{"jsonrpc":"2.0","id":7,"method":"ping"}`
	as := func(g *testkit.Gateway, user string) *testkit.RPC {
		return &testkit.RPC{T: t, URL: g.MCP, Session: alice.Session, Header: http.Header{"X-Forwarded-User": {user}}}
	}
	wantSessionNotFound(t, as(b, "mallory").Post(ping), "alice's session used by mallory on replica B")
	req, _ := http.NewRequest(http.MethodDelete, b.MCP, nil)
	req.Header.Set("Mcp-Session-Id", alice.Session)
	req.Header.Set("X-Forwarded-User", "mallory")
	if resp, err := testkit.HTTPClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("mallory's DELETE of alice's session on replica B: HTTP %d, want 404", resp.StatusCode)
		}
	}
	if r := as(b, "alice").Post(ping); r.Status != http.StatusOK {
		t.Fatalf("alice on replica B: HTTP %d %s", r.Status, r.Body)
	}
	if r := as(a, "alice").Post(ping); r.Status != http.StatusOK {
		t.Errorf("alice on replica A after mallory's attempts: HTTP %d", r.Status)
	}
	wantSessionNotFound(t, as(b, "mallory").Post(ping), "alice's session, held by replica B now, used by mallory")
}

// TestForeignDeleteOnOtherReplica: in front of an upstream that keeps sessions, a DELETE of
// alice's session by another identity through a replica that does not hold it is refused
// (404) and never sent upstream: alice's session goes on working. Before, that replica sent
// the DELETE on and the upstream ended alice's session.
func TestForeignDeleteOnOtherReplica(t *testing.T) {
	url := storetest.RedisURL(t)
	_, upURL := testkit.StartDemo(t)
	cfg := testkit.BasicConfig(upURL, approvalRules+"server:\n  identity_header: X-Forwarded-User\ntasks:\n  store: {type: redis, url: \""+url+"?key_prefix=sess-fdel-"+t.Name()+":\"}\n")
	a := testkit.StartGateway(t, cfg, approverEnv, nil)
	b := testkit.StartGateway(t, cfg, approverEnv, nil)
	a.WaitReady(t)
	b.WaitReady(t)
	alice := &testkit.RPC{T: t, URL: a.MCP, Header: http.Header{"X-Forwarded-User": {"alice"}}}
	alice.Initialize()
	del := func(sid, user string) int {
		req, _ := http.NewRequest(http.MethodDelete, b.MCP, nil)
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("X-Forwarded-User", user)
		resp, err := testkit.HTTPClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := del(alice.Session, "mallory"); st != http.StatusNotFound {
		t.Errorf("mallory's DELETE of alice's session through replica B: HTTP %d, want 404", st)
	}
	if st := del("mcp-session-"+uuid.NewString(), "mallory"); st != http.StatusNotFound {
		t.Errorf("DELETE of a made-up session through replica B: HTTP %d, want 404", st)
	}
	if r := alice.Post(`{"jsonrpc":"2.0","id":7,"method":"ping"}`); r.Status != http.StatusOK {
		t.Fatalf("alice's session after mallory's DELETE elsewhere: HTTP %d %s", r.Status, r.Body)
	}
	// Alice herself may end it through B.
	if st := del(alice.Session, "alice"); st >= 300 {
		t.Fatalf("alice's DELETE through replica B: HTTP %d", st)
	}
	wantSessionNotFound(t, alice.Post(`{"jsonrpc":"2.0","id":8,"method":"ping"}`), "alice's session after her DELETE through replica B")
}

// TestSessionEndedAcrossProcesses: TestSessionEndedOnOtherReplica with replica A the real
// binary in its own process: a session ended through either process is refused by the other,
// which held it, through the one redis-server they share.
func TestSessionEndedAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	url := storetest.RedisURL(t)
	up := sessionlessUpstream(t)
	cfg := testkit.BasicConfig(up.URL(), approvalRules+"tasks:\n  store: {type: redis, url: \""+url+"?key_prefix=sess-proc-"+t.Name()+":\"}\n")
	bin := buildBinary(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "tollgate.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	listen, admin := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--config", cfgPath)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TOLLGATE_LISTEN=" + listen, "TOLLGATE_ADMIN_LISTEN=" + admin,
		"TOLLGATE_ADMIN_TOKEN=" + testkit.AdminToken, "TOLLGATE_DATA_DIR=" + filepath.Join(dir, "data")}
	for k, v := range approverEnv {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var logA bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logA, &logA
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("replica A's output:\n%s", logA.String())
		}
	})
	waitFor(t, "replica A ready", func() bool {
		resp, err := testkit.HTTPClient.Get("http://" + admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	a := &testkit.Gateway{MCP: "http://" + listen + "/mcp", Admin: "http://" + admin}
	b := testkit.StartGateway(t, cfg, approverEnv, nil)
	b.WaitReady(t)
	ping := `{"jsonrpc":"2.0","id":7,"method":"ping"}`

	for _, dir := range []struct {
		name       string
		open, peer *testkit.Gateway
	}{{"ended through the process, held in-process", a, b}, {"ended in-process, held by the process", b, a}} {
		c := dir.open.NewClient(t)
		if r := (&testkit.RPC{T: t, URL: dir.peer.MCP, Session: c.Session}).Post(ping); r.Status != http.StatusOK {
			t.Fatalf("%s: the other replica does not serve the session: HTTP %d", dir.name, r.Status)
		}
		deleteSession(t, dir.open, c.Session)
		wantSessionNotFound(t, forgedCall(t, dir.peer, c.Session), dir.name)
	}
}
