//go:build unix

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// stdioFixture builds test/fixture/stdio (an mcp-go v1.2.1 server.ServeStdio server) once.
var stdioFixture = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "tollgate-stdio-fixture")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "stdio-fixture")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "../fixture/stdio").CombinedOutput(); err != nil {
		return "", fmt.Errorf("%v\n%s", err, out)
	}
	return bin, nil
})

// startStdioGateway runs Tollgate in front of the stdio fixture; the fixture's write_note
// appends to the returned notes file.
func startStdioGateway(t *testing.T, extraSource, rest string) (*testkit.Gateway, string) {
	t.Helper()
	bin, err := stdioFixture()
	if err != nil {
		t.Fatalf("building the stdio fixture: %v", err)
	}
	notes := filepath.Join(t.TempDir(), "notes")
	cfg := fmt.Sprintf(`schema: 1
sources:
  - id: local
    kind: mcp
    command: %q
    env: {NOTES_FILE: %q}
%saudit: {path: audit.log}
%s`, bin, notes, extraSource, rest)
	g := testkit.StartGateway(t, cfg, approverEnv, nil)
	g.WaitReady(t)
	return g, notes
}

const stdioRules = `governance:
  defaults: {action: forward}
  rules:
    - {match: "write_note", action: approve}
approval:
  default: {timeout: 10m, on_timeout: deny}
approvers:
  - {name: alice, token_env: ALICE_TOKEN}
`

func text(t *testing.T, m map[string]any) string {
	t.Helper()
	s, _ := testkit.Dig(m, "result", "content", "0", "text").(string)
	if s == "" {
		if c, ok := testkit.Dig(m, "result", "content").([]any); ok && len(c) > 0 {
			s, _ = c[0].(map[string]any)["text"].(string)
		}
	}
	return s
}

// TestStdioServerGoverned: a stdio server behind Tollgate is governed like an HTTP one: the
// initialize result gains Tollgate's task capability, tools/list is served, calls forward, and
// two clients in parallel each have their own process (state not shared).
func TestStdioServerGoverned(t *testing.T) {
	g, _ := startStdioGateway(t, "", stdioRules)
	a := &testkit.RPC{T: t, URL: g.MCP}
	init := a.Initialize()
	if testkit.Dig(init, "result", "capabilities", "tasks") == nil || testkit.Dig(init, "result", "serverInfo", "name") != "stdio-fixture" {
		t.Fatalf("initialize through Tollgate: %v", init)
	}
	b := g.NewClient(t)
	list := a.Post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`).Message(t)
	raw, _ := json.Marshal(list)
	for _, tool := range []string{"remember", "recall", "write_note"} {
		if !strings.Contains(string(raw), `"`+tool+`"`) {
			t.Fatalf("tools/list lacks %s: %s", tool, raw)
		}
	}
	var wg sync.WaitGroup
	got := make([]string, 2)
	for i, c := range []*testkit.RPC{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.T = nil
			r, err := c.TryPost(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"remember","arguments":{"key":"k","value":"v%d"}}}`, i))
			if err == nil {
				r, err = c.TryPost(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"recall","arguments":{"key":"k"}}}`)
			}
			if err == nil {
				got[i] = string(r.Body)
			}
		}()
	}
	wg.Wait()
	a.T, b.T = t, t
	for i, body := range got {
		if !strings.Contains(body, fmt.Sprintf(`"text":"v%d"`, i)) {
			t.Fatalf("client %d recalls %s", i, body)
		}
	}
	pa := text(t, a.Call(4, "pid", map[string]any{}, 0))
	pb := text(t, b.Call(4, "pid", map[string]any{}, 0))
	if pa == "" || pa == pb {
		t.Fatalf("clients share process %q / %q", pa, pb)
	}
	// One process per client session (Tollgate's own annotation session ended after listing).
	resp, err := testkit.HTTPClient.Get(g.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), "\ntollgate_stdio_processes 2\n") {
		t.Fatalf("tollgate_stdio_processes is not 2:\n%s", grepLines(string(metrics), "tollgate_stdio"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestStdioApprovedCallRunsOnce: write_note needs approval; it runs only after the approver
// approves through the admin API, and exactly once.
func TestStdioApprovedCallRunsOnce(t *testing.T) {
	g, notes := startStdioGateway(t, "", stdioRules)
	c := g.NewClient(t)
	tid := c.CallTask(1, "write_note", `{"text":"approved note"}`)
	if _, err := os.Stat(notes); !os.IsNotExist(err) {
		t.Fatalf("written before approval: %v", err)
	}
	decide(t, g, tid, "approve")
	res := c.TaskRPC(2, "tasks/result", tid).Message(t)
	if text(t, res) != "written" {
		t.Fatalf("tasks/result: %v", res)
	}
	b, err := os.ReadFile(notes)
	if err != nil || string(b) != "approved note\n" {
		t.Fatalf("notes file %q (%v), want the note exactly once", b, err)
	}
}

// killProcessOf kills (SIGKILL) the stdio process behind client c's session.
func killProcessOf(t *testing.T, c *testkit.RPC, id int) {
	t.Helper()
	pid, err := strconv.Atoi(text(t, c.Call(id, "pid", map[string]any{}, 0)))
	if err != nil {
		t.Fatal("pid:", err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

// TestStdioProcessKilledMidCall: the call in flight when the process dies fails with
// -32000 UpstreamExited; the session is gone (404) and a new one works.
func TestStdioProcessKilledMidCall(t *testing.T) {
	g, notes := startStdioGateway(t, "", stdioRules)
	c := g.NewClient(t)
	pid, err := strconv.Atoi(text(t, c.Call(1, "pid", map[string]any{}, 0)))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan testkit.Reply, 1)
	go func() {
		r, _ := c.TryPost(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"block","arguments":{}}}`)
		done <- r
	}()
	started := fmt.Sprintf("%s.started-%d", notes, pid)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("block never started")
		}
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var r testkit.Reply
	select {
	case r = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the call in flight never ended")
	}
	m := r.Message(t)
	code, name := testkit.ErrorOf(m)
	if code != -32000 || name != "UpstreamExited" || testkit.Dig(m, "error", "data", "exit") != "signal: killed" {
		t.Fatalf("in-flight call: %s", r.Body)
	}
	if r := c.Post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"pid","arguments":{}}}`); r.Status != http.StatusNotFound {
		t.Fatalf("after the process died: HTTP %d %s, want 404", r.Status, r.Body)
	}
	c2 := g.NewClient(t)
	if p := text(t, c2.Call(1, "pid", map[string]any{}, 0)); p == "" || p == strconv.Itoa(pid) {
		t.Fatalf("new session's process %q", p)
	}
}

// TestStdioTaskApprovedAfterProcessDied: a held write_note whose session's process died
// before the approval fails clearly (SessionGone) and never runs, then or later.
func TestStdioTaskApprovedAfterProcessDied(t *testing.T) {
	g, notes := startStdioGateway(t, "", stdioRules)
	c := g.NewClient(t)
	tid := c.CallTask(1, "write_note", `{"text":"must not be written"}`)
	killProcessOf(t, c, 2)
	// Approve once Tollgate has seen the process die: the session is gone then (404).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		r := c.Post(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
		if r.Status == http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session outlived its process: HTTP %d %s", r.Status, r.Body)
		}
	}
	decide(t, g, tid, "approve")
	st, view := waitTaskDone(t, g, tid)
	if st != "failed" || !strings.Contains(fmt.Sprint(view), "SessionGone") {
		t.Fatalf("task after its process died: %s %v", st, view)
	}
	// A new session of the same client (a new process) does not run it either.
	c2 := g.NewClient(t)
	c2.Call(1, "pid", map[string]any{}, 0)
	if _, err := os.Stat(notes); !os.IsNotExist(err) {
		b, _ := os.ReadFile(notes)
		t.Fatalf("the approved call ran after its process died: %q", b)
	}
}

// waitTaskDone polls the approvals API until the task is terminal.
func waitTaskDone(t *testing.T, g *testkit.Gateway, tid string) (string, map[string]any) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		_, view := g.AdminRequest(t, "GET", "/api/v1/approvals/"+tid, "alice-secret-token", "")
		switch s, _ := testkit.Dig(view, "status").(string); s {
		case "completed", "failed", "cancelled":
			return s, view
		}
	}
	t.Fatal("task not terminal within 15s")
	return "", nil
}

// TestStdioModernBridge: 2026-07-28 requests (no sessions) reach a stdio server through the
// bridge as they reach a legacy-only HTTP server: each owner's bridged session is a process of
// its own (state and pid per owner, kept across requests), processes are bounded by
// max_processes (a new owner beyond it ends the least recently used owner's process, whose
// next request opens a new one without the old state), and an owner's idle session ends with
// its process.
func TestStdioModernBridge(t *testing.T) {
	g, _ := startStdioGateway(t, "    max_processes: 2\n    idle_timeout: 2s\n", "governance:\n  defaults: {action: forward}\n")
	a := &modernClient{t: t, url: g.MCP, hdr: http.Header{"Authorization": {"Bearer token-a"}}}
	b := &modernClient{t: t, url: g.MCP, hdr: http.Header{"Authorization": {"Bearer token-b"}}}
	c := &modernClient{t: t, url: g.MCP, hdr: http.Header{"Authorization": {"Bearer token-c"}}}
	call := func(m *modernClient, id int, tool string, args map[string]any) map[string]any {
		t.Helper()
		return m.call(id, "tools/call", map[string]any{"name": tool, "arguments": args})
	}
	if got := toolText(t, call(a, 1, "remember", map[string]any{"key": "k", "value": "alpha"})); got != "stored" {
		t.Fatalf("remember: %q", got)
	}
	if got := toolText(t, call(a, 2, "recall", map[string]any{"key": "k"})); got != "alpha" {
		t.Fatalf("A recalls %q: its session did not last", got)
	}
	if got := toolText(t, call(b, 3, "recall", map[string]any{"key": "k"})); got != "(nothing)" {
		t.Fatalf("B recalls %q: it shares A's process", got)
	}
	pa, pb := toolText(t, call(a, 4, "pid", nil)), toolText(t, call(b, 5, "pid", nil))
	if pa == pb {
		t.Fatalf("owners share process %s", pa)
	}
	gone := func(p string) {
		t.Helper()
		pid, _ := strconv.Atoi(p)
		for deadline := time.Now().Add(15 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d still runs", pid)
			}
		}
	}
	// Two processes are live (A's and B's, B used last): a third owner ends A's.
	pc := toolText(t, call(c, 6, "pid", nil))
	gone(pa)
	if got := toolText(t, call(a, 7, "recall", map[string]any{"key": "k"})); got != "(nothing)" {
		t.Fatalf("A after its process made room recalls %q", got)
	}
	pa2 := toolText(t, call(a, 8, "pid", nil))
	if pa2 == pa || pa2 == pc {
		t.Fatalf("A's new session runs on process %s (old %s, C's %s)", pa2, pa, pc)
	}
	// Without requests, A's session ends after idle_timeout with its process.
	gone(pa2)
	if got := toolText(t, call(a, 9, "recall", map[string]any{"key": "k"})); got != "(nothing)" {
		t.Fatalf("A after its idle session ended recalls %q", got)
	}
}

// whoElicits answers every elicitation with its own name.
type whoElicits struct {
	who   string
	calls atomic.Int32
}

func (w *whoElicits) Elicit(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	w.calls.Add(1)
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
		Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"who": w.who},
	}}, nil
}

// TestStdioElicitationReachesItsClient: the stdio server's elicitation/create during a call
// travels to the client that made the call (on that call's stream) and the answer back to its
// process: two clients calling at once each get exactly their own answer.
func TestStdioElicitationReachesItsClient(t *testing.T) {
	g, _ := startStdioGateway(t, "", "governance:\n  defaults: {action: forward}\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func(w *whoElicits) *client.Client {
		tr, err := transport.NewStreamableHTTP(g.MCP)
		if err != nil {
			t.Fatal(err)
		}
		c := client.NewClient(tr, client.WithElicitationHandler(w))
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
			ProtocolVersion: "2025-11-25", ClientInfo: mcp.Implementation{Name: "e2e-" + w.who, Version: "1"},
			Capabilities: mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{}},
		}}); err != nil {
			t.Fatal(err)
		}
		return c
	}
	wa, wb := &whoElicits{who: "a"}, &whoElicits{who: "b"}
	ca, cb := open(wa), open(wb)
	var wg sync.WaitGroup
	got := map[string]string{}
	var mu sync.Mutex
	for who, c := range map[string]*client.Client{"a": ca, "b": cb} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "confirm", Arguments: map[string]any{"what": who}}})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				got[who] = err.Error()
			} else {
				got[who] = resultText(r)
			}
		}()
	}
	wg.Wait()
	for _, who := range []string{"a", "b"} {
		if want := "answer accept map[who:" + who + "]"; got[who] != want {
			t.Errorf("client %s: %q, want %q", who, got[who], want)
		}
	}
	if wa.calls.Load() != 1 || wb.calls.Load() != 1 {
		t.Errorf("elicitations asked: a %d, b %d; want 1 each", wa.calls.Load(), wb.calls.Load())
	}
}

// TestStdioProcessesFairPerIdentity: with server.identity_header, a caller that opens session
// after session at sources[0].max_processes ends its own idle sessions, not another caller's
// older one (the bound is shared fairly by source, as the other per-source bounds are).
func TestStdioProcessesFairPerIdentity(t *testing.T) {
	g, _ := startStdioGateway(t, "    max_processes: 2\n", "server:\n  identity_header: X-Test-User\n"+stdioRules)
	as := func(user string) *testkit.RPC {
		c := &testkit.RPC{T: t, URL: g.MCP, Header: http.Header{"X-Test-User": {user}}}
		c.Initialize()
		if p := text(t, c.Call(1, "pid", map[string]any{}, 0)); p == "" {
			t.Fatalf("%s: no process", user)
		}
		return c
	}
	bob := as("bob") // the least recently used session when mallory reaches the bound
	m1 := as("mallory")
	as("mallory") // at the bound: mallory holds one, bob one; mallory's own m1 gives way
	if r, err := m1.TryPost(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"pid","arguments":{}}}`); err != nil || r.Status != http.StatusNotFound {
		t.Fatalf("mallory's first session after her second: status %d (%v), want 404 (ended for her own new one)", r.Status, err)
	}
	if r, err := bob.TryPost(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"pid","arguments":{}}}`); err != nil || r.Status != http.StatusOK {
		t.Fatalf("bob's session after mallory's sessions: status %d (%v), want 200 (kept)", r.Status, err)
	}
}

// TestStdioPendingTaskKeepsProcess: a session with a pending task is not ended by idle_timeout
// while it waits for the approval, so an approval that comes later than idle_timeout still
// runs the call on the client's process (it used to fail SessionGone: the process had been
// ended as idle). A session without one is ended as before.
func TestStdioPendingTaskKeepsProcess(t *testing.T) {
	g, notes := startStdioGateway(t, "    idle_timeout: 1s\n", stdioRules)
	a := g.NewClient(t)
	tid := a.CallTask(1, "write_note", `{"text":"approved after idle_timeout"}`)
	b := g.NewClient(t)
	b.Call(1, "pid", map[string]any{}, 0)
	// The reaper has ended an idle session (b's; a's is older) once its log line is there.
	for deadline := time.Now().Add(15 * time.Second); !strings.Contains(g.Logs.String(), "stdio session idle; ending it"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no idle session was ended within 15s")
		}
	}
	decide(t, g, tid, "approve")
	st, view := waitTaskDone(t, g, tid)
	if st != "completed" {
		t.Fatalf("task approved after idle_timeout: %s %v", st, view)
	}
	if b, err := os.ReadFile(notes); err != nil || string(b) != "approved after idle_timeout\n" {
		t.Fatalf("notes file %q (%v), want the note exactly once", b, err)
	}
	if r := b.Post(`{"jsonrpc":"2.0","id":2,"method":"ping"}`); r.Status != http.StatusNotFound {
		t.Fatalf("the idle session without a task: HTTP %d, want 404 (ended)", r.Status)
	}
}

// TestStdioSharedQuestionStaysWithItsCaller: with share: true one process serves every caller
// and its elicitation names no call. While only the victim's call is in flight the question is
// the victim's; while another caller's call is in flight too, Tollgate cannot tell whose it is
// and refuses it (NotBridged) — it used to go to the other caller's call (the oldest in
// flight), whose client read and answered it, and the victim's call ran with that answer.
func TestStdioSharedQuestionStaysWithItsCaller(t *testing.T) {
	g, notes := startStdioGateway(t, "    share: true\n", "server:\n  identity_header: X-Test-User\ngovernance:\n  defaults: {action: forward}\n")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	open := func(w *whoElicits) *client.Client {
		tr, err := transport.NewStreamableHTTP(g.MCP, transport.WithHTTPHeaders(map[string]string{"X-Test-User": w.who}))
		if err != nil {
			t.Fatal(err)
		}
		c := client.NewClient(tr, client.WithElicitationHandler(w))
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
			ProtocolVersion: "2025-11-25", ClientInfo: mcp.Implementation{Name: "e2e-" + w.who, Version: "1"},
			Capabilities: mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{}},
		}}); err != nil {
			t.Fatal(err)
		}
		return c
	}
	victim, mallory := &whoElicits{who: "victim"}, &whoElicits{who: "mallory"}
	cv, cm := open(victim), open(mallory)
	confirm := func() string {
		t.Helper()
		r, err := cv.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "confirm", Arguments: map[string]any{"what": "the transfer"}}})
		if err != nil {
			t.Fatalf("victim's confirm: %v", err)
		}
		return resultText(r)
	}
	// Alone in flight: the victim is asked and answers.
	if got := confirm(); got != "answer accept map[who:victim]" {
		t.Fatalf("victim's call alone: %q, want the victim's own answer", got)
	}
	// Mallory's call is in flight on the same process meanwhile.
	mctx, mcancel := context.WithCancel(ctx)
	blocked := make(chan struct{})
	go func() {
		defer close(blocked)
		_, _ = cm.CallTool(mctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "block"}})
	}()
	defer func() { mcancel(); <-blocked }()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if m, _ := filepath.Glob(notes + ".started-*"); len(m) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("mallory's call never reached the process")
		}
	}
	got := confirm()
	if !strings.Contains(got, "no answer") || !strings.Contains(got, "cannot relay elicitation/create") || strings.Contains(got, "mallory") {
		t.Fatalf("victim's call while mallory's is in flight: %q; want the question refused with NotBridged", got)
	}
	if n := mallory.calls.Load(); n != 0 {
		t.Fatalf("mallory was asked %d of the victim's questions", n)
	}
	if n := victim.calls.Load(); n != 1 {
		t.Fatalf("victim asked %d times, want once (the first call)", n)
	}
}
