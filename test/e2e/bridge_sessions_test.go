package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// legacy044 is the mcp-go v0.44.0 legacy-only fixture (test/fixture/legacy044, a module of its
// own) running as a process on loopback.
type legacy044 struct {
	url string // http://127.0.0.1:PORT/mcp
}

// startLegacy044 builds the fixture with `go build` into a temporary directory (bounded) and
// runs it; it skips only when no go command is available.
func startLegacy044(t *testing.T) *legacy044 {
	t.Helper()
	return &legacy044{url: startFixtureModule(t, "legacy044", "mcp-go v0.44.0")}
}

// startFixtureModule builds the fixture module test/fixture/<name> (a module of its own) with
// `go build` into a temporary directory (bounded), runs it on loopback and returns the MCP
// URL it prints; it skips only when no go command is available. Closing its stdin (at the
// test's end) stops it.
func startFixtureModule(t *testing.T, name, what string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build test/fixture/" + name + " (" + what + "): " + err.Error())
	}
	bin := filepath.Join(t.TempDir(), name)
	bctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	build := exec.CommandContext(bctx, goBin, "build", "-o", bin, ".")
	build.Dir = "../fixture/" + name
	build.Env = append(build.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the %s fixture: %v\n%s", what, err, out)
	}
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0")
	stdin, err := cmd.StdinPipe() // closing it stops the fixture
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case l := <-lines:
		u, ok := strings.CutPrefix(l, "listening on ")
		if !ok {
			t.Fatalf("%s: %q", name, l)
		}
		return u
	case <-exited:
		t.Fatal(name + " exited before listening")
	case <-time.After(20 * time.Second):
		t.Fatal(name + " did not start listening")
	}
	return ""
}

// stats are the fixture's counts of sessions opened (initialize), ended (DELETE) and GET
// streams opened.
func (f *legacy044) stats(t *testing.T) map[string]float64 {
	t.Helper()
	resp, err := testkit.HTTPClient.Get(strings.TrimSuffix(f.url, "/mcp") + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]float64
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func toolText(t *testing.T, m map[string]any) string {
	t.Helper()
	c, _ := testkit.Dig(m, "result", "content").([]any)
	if len(c) == 0 || testkit.Dig(m, "result", "resultType") != "complete" {
		t.Fatalf("not a complete tool result: %v", m)
	}
	s, _ := c[0].(map[string]any)["text"].(string)
	return s
}

// TestBridgeSessionPerOwner: in front of a legacy-only upstream that keeps state per MCP
// session, each bridged 2026-07-28 owner has a session of its own: what caller A stored is
// A's alone — caller B (another Authorization), an identified caller and anonymous callers do
// not read it; an identified caller keeps its session across credentials; an anonymous
// caller's session lasts one request and is ended (DELETE).
func TestBridgeSessionPerOwner(t *testing.T) {
	up := startLegacy044(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(up.url, "server:\n  identity_header: X-Test-User\ngovernance:\n  defaults: {action: forward}\n"), nil, nil)
	g.WaitReady(t)

	a := &modernClient{t: t, url: g.MCP, hdr: http.Header{"Authorization": {"Bearer token-a"}}}
	b := &modernClient{t: t, url: g.MCP, hdr: http.Header{"Authorization": {"Bearer token-b"}}}
	carol := &modernClient{t: t, url: g.MCP, hdr: http.Header{"X-Test-User": {"carol"}, "Authorization": {"Bearer carol-1"}}}
	carolAgain := &modernClient{t: t, url: g.MCP, hdr: http.Header{"X-Test-User": {"carol"}, "Authorization": {"Bearer carol-2"}}}
	anon := &modernClient{t: t, url: g.MCP}
	remember := func(c *modernClient, id int, v string) {
		t.Helper()
		if got := toolText(t, c.call(id, "tools/call", map[string]any{"name": "remember", "arguments": map[string]any{"key": "secret", "value": v}})); got != "stored" {
			t.Fatalf("remember: %q", got)
		}
	}
	recall := func(c *modernClient, id int) string {
		t.Helper()
		return toolText(t, c.call(id, "tools/call", map[string]any{"name": "recall", "arguments": map[string]any{"key": "secret"}}))
	}

	remember(a, 1, "alpha")
	if got := recall(a, 2); got != "alpha" {
		t.Fatalf("A reads %q from its own session, want alpha (its session lasts across requests)", got)
	}
	if got := recall(b, 3); got != "(nothing)" {
		t.Errorf("B (another Authorization) reads %q: it sees A's session", got)
	}
	if got := recall(anon, 4); got != "(nothing)" {
		t.Errorf("an anonymous caller reads %q: it sees A's session", got)
	}
	if got := recall(carol, 5); got != "(nothing)" {
		t.Errorf("an identified caller reads %q: it sees A's session", got)
	}
	remember(carol, 6, "gamma")
	if got := recall(carolAgain, 7); got != "gamma" {
		t.Errorf("carol with another credential reads %q, want gamma (the identity owns the session)", got)
	}
	if got := recall(a, 8); got != "alpha" {
		t.Errorf("A reads %q after the others, want alpha", got)
	}
	remember(anon, 9, "delta")
	if got := recall(anon, 10); got != "(nothing)" {
		t.Errorf("an anonymous caller reads %q from its previous request: anonymous sessions must not be shared", got)
	}

	// Every anonymous request's session is ended upstream; the owners' ones are kept.
	before := up.stats(t)
	for i := 0; i < 3; i++ {
		recall(anon, 20+i)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := up.stats(t)
		if s["delete"]-before["delete"] >= 3 && s["initialize"]-before["initialize"] == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 3 anonymous requests: %v sessions opened, %v ended; want 3 and 3",
				s["initialize"]-before["initialize"], s["delete"]-before["delete"])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestBridgeElicitationOnGETStream: mcp-go v0.44.0 sends elicitation/create only on the
// session's standalone GET stream. A bridged 2026-07-28 tools/call of a tool that asks used to
// hang until -32001 (nothing read that stream); now the question reaches the caller as an
// InputRequiredResult, the answer completes the call, and a caller that cannot be asked gets
// the tool's own answer at once — for an identified caller and an anonymous one alike.
func TestBridgeElicitationOnGETStream(t *testing.T) {
	up := startLegacy044(t)
	// The old code's hang ends at the sync forward timeout: keep it short so the test fails
	// rather than waits.
	g := testkit.StartGateway(t, testkit.BasicConfig(up.url, "governance:\n  defaults: {action: forward}\n"),
		map[string]string{"TOLLGATE_SYNC_FORWARD_TIMEOUT_SECS": "8"}, nil)
	g.WaitReady(t)
	elicit := map[string]any{"elicitation": map[string]any{}}
	for _, c := range []*modernClient{
		{t: t, url: g.MCP, caps: elicit, hdr: http.Header{"Authorization": {"Bearer asks"}}},
		{t: t, url: g.MCP, caps: elicit},
	} {
		args := map[string]any{"what": "ship it"}
		start := time.Now()
		r1 := c.call(1, "tools/call", map[string]any{"name": "confirm", "arguments": args})
		if code, name := testkit.ErrorOf(r1); code != 0 {
			t.Fatalf("round 1 (auth %q): error %v %s after %v; want an InputRequiredResult", c.hdr.Get("Authorization"), code, name, time.Since(start).Round(time.Millisecond))
		}
		reqs, _ := testkit.Dig(r1, "result", "inputRequests").(map[string]any)
		state, _ := testkit.Dig(r1, "result", "requestState").(string)
		if testkit.Dig(r1, "result", "resultType") != "input_required" || len(reqs) != 1 || state == "" {
			t.Fatalf("round 1: %v", r1)
		}
		answers := map[string]any{}
		for k, v := range reqs {
			if testkit.Dig(v, "method") != "elicitation/create" || !strings.Contains(fmt.Sprint(testkit.Dig(v, "params", "message")), "ship it") {
				t.Fatalf("input request %s: %v", k, v)
			}
			answers[k] = map[string]any{"action": "accept", "content": map[string]any{"ok": true}}
		}
		r2 := c.call(2, "tools/call", map[string]any{"name": "confirm", "arguments": args, "inputResponses": answers, "requestState": state})
		if got := toolText(t, r2); !strings.Contains(got, "answer accept") {
			t.Fatalf("round 2: %q (%v)", got, r2)
		}
	}
	// A caller without the elicitation capability: the upstream is told no at once and the
	// tool answers; nobody waits for the timeout.
	plain := &modernClient{t: t, url: g.MCP, hdr: http.Header{"Authorization": {"Bearer plain"}}}
	r := plain.call(3, "tools/call", map[string]any{"name": "confirm", "arguments": map[string]any{"what": "ship it"}})
	if testkit.Dig(r, "result", "isError") != true || !strings.Contains(toolTextAny(r), "no answer") {
		t.Fatalf("no capability: %v", r)
	}
	if up.stats(t)["get"] == 0 {
		t.Error("the fixture saw no GET stream")
	}
}

func toolTextAny(m map[string]any) string {
	c, _ := testkit.Dig(m, "result", "content").([]any)
	if len(c) == 0 {
		return ""
	}
	s, _ := c[0].(map[string]any)["text"].(string)
	return s
}

// TestBridgeApprovedCallOnOwnersSession: an approved 2026-07-28 call in front of a legacy-only
// upstream runs on its owner's upstream session: what it stored is there for the owner's
// next request, and for no one else's.
func TestBridgeApprovedCallOnOwnersSession(t *testing.T) {
	up := startLegacy044(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(up.url, "governance:\n  defaults: {action: forward}\n  rules:\n    - {match: remember, action: approve}\n"), nil, nil)
	g.WaitReady(t)
	a := &modernClient{t: t, url: g.MCP, tasks: true, hdr: http.Header{"Authorization": {"Bearer token-a"}}}
	b := &modernClient{t: t, url: g.MCP, tasks: true, hdr: http.Header{"Authorization": {"Bearer token-b"}}}
	m := a.call(1, "tools/call", map[string]any{"name": "remember", "arguments": map[string]any{"key": "k", "value": "approved"}})
	tid, _ := testkit.Dig(m, "result", "taskId").(string)
	if st, _ := g.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/approve", testkit.AdminToken, `{}`); st != 200 {
		t.Fatalf("approve: %d (%v)", st, m)
	}
	if done := a.waitTask(tid); testkit.Dig(done, "result", "status") != "completed" {
		t.Fatalf("approved call: %v", done)
	}
	recall := map[string]any{"name": "recall", "arguments": map[string]any{"key": "k"}}
	if got := toolText(t, a.call(2, "tools/call", recall)); got != "approved" {
		t.Errorf("A reads %q after its approved call, want approved (the call ran on A's session)", got)
	}
	if got := toolText(t, b.call(3, "tools/call", recall)); got != "(nothing)" {
		t.Errorf("B reads %q: A's approved call ran on a shared session", got)
	}
}
