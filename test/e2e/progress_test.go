package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// progressRules hold slow_operation (the demo's long-running tool, which reports progress once
// a second when asked) for approval, with a budget far longer than the call runs.
const progressRules = `governance:
  defaults: {action: forward}
  rules:
    - {match: "slow_*", action: approve}
approvers:
  - {name: alice, token_env: ALICE_TOKEN}
tasks:
  hold_budget: 60s
`

// sseMessages decodes the JSON-RPC messages of an event-stream body, in order.
func sseMessages(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(string(body), "\n") {
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(d), &m); err != nil {
			t.Fatalf("event is not JSON: %v: %s", err, d)
		}
		out = append(out, m)
	}
	return out
}

// checkHeldProgress: the held call's stream carries the upstream's progress (it sends a total,
// Tollgate's own notifications do not) under the caller's token, every progress value
// greater than the one before, and then the tool's result.
func checkHeldProgress(t *testing.T, rep testkit.Reply, token any) {
	t.Helper()
	if !strings.HasPrefix(rep.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("held call answered without a stream: %d %s", rep.Status, rep.Body)
	}
	msgs := sseMessages(t, rep.Body)
	upstream, last := 0, -1.0
	for i, m := range msgs {
		if m["method"] != "notifications/progress" {
			continue
		}
		p, _ := m["params"].(map[string]any)
		if p["progressToken"] != token {
			t.Errorf("notification %d has progressToken %v, want the caller's %v", i, p["progressToken"], token)
		}
		v, _ := p["progress"].(float64)
		if v <= last {
			t.Errorf("notification %d: progress %v after %v (must increase)", i, v, last)
		}
		last = v
		if _, ok := p["total"]; ok {
			upstream++
		}
	}
	if upstream < 2 {
		t.Errorf("the held caller got %d of the upstream's progress notifications, want at least 2:\n%s", upstream, rep.Body)
	}
	final := msgs[len(msgs)-1]
	if testkit.Dig(final, "result", "isError") == true || !strings.Contains(string(rep.Body), `\"status\":\"done\"`) {
		t.Errorf("the held call did not end with the tool's result:\n%s", rep.Body)
	}
}

// TestHeldProgressAfterApproval: once a held call is approved and runs, the upstream's
// progress notifications reach the caller on its still-open stream under its own
// progressToken, as without Tollgate (issue 29), in both eras.
func TestHeldProgressAfterApproval(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, progressRules), approverEnv, nil)
	g.WaitReady(t)

	approveWhenPending := func(t *testing.T) {
		t.Helper()
		waitFor(t, "the held call's approval", func() bool { return len(pendingApprovals(t, g)) == 1 })
		decide(t, g, pendingApprovals(t, g)[0], "approve")
	}

	// With the session's GET stream open the upstream (mcp-go) sends the call's progress there
	// rather than on the call's own stream: it must reach the held call all the same, and
	// Tollgate's own token must never reach the client.
	for _, getStream := range []bool{false, true} {
		name := "2025-11-25"
		if getStream {
			name += " with a GET stream open"
		}
		t.Run(name, func(t *testing.T) {
			legacyHeld(t, g, d.Calls, approveWhenPending, getStream)
		})
	}

	t.Run("2026-07-28", func(t *testing.T) {
		before := d.Calls("slow_operation")
		c := &modernClient{t: t, url: g.MCP, hdr: http.Header{"Authorization": {"Bearer progress"}}}
		meta := c.meta()
		meta["progressToken"] = 8
		done := make(chan testkit.Reply, 1)
		go func() {
			done <- c.tryDo(8, "tools/call", map[string]any{"name": "slow_operation", "arguments": map[string]any{"seconds": 3}, "_meta": meta})
		}()
		approveWhenPending(t)
		rep := <-done
		checkHeldProgress(t, rep, float64(8)) // JSON numbers decode as float64
		if n := d.Calls("slow_operation") - before; n != 1 {
			t.Errorf("executions = %d, want 1", n)
		}
	})
}

// legacyHeld makes a held 2025-11-25 call of slow_operation with a progressToken, approves it
// and checks its stream; with getStream the session's GET stream is open meanwhile.
func legacyHeld(t *testing.T, g *testkit.Gateway, calls func(string) int, approve func(*testing.T), getStream bool) {
	before := calls("slow_operation")
	c := g.NewClient(t)
	var lines <-chan string
	if getStream {
		var st int
		if st, lines = testkit.OpenStream(t, g.MCP, c.Session); st != http.StatusOK {
			t.Fatalf("GET stream: HTTP %d", st)
		}
	}
	done := make(chan testkit.Reply, 1)
	go func() {
		rep, err := c.TryPost(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow_operation","arguments":{"seconds":3},"_meta":{"progressToken":"held-7"}}}`)
		if err != nil {
			rep.Body = []byte(err.Error())
		}
		done <- rep
	}()
	approve(t)
	checkHeldProgress(t, <-done, "held-7")
	if n := calls("slow_operation") - before; n != 1 {
		t.Errorf("executions = %d, want 1", n)
	}
	for drained := false; getStream && !drained; {
		select {
		case l := <-lines:
			if strings.Contains(l, "tollgate-exec-") {
				t.Errorf("Tollgate's own progressToken reached the client: %s", l)
			}
		default:
			drained = true
		}
	}
}

// TestTaskProgressAfterApproval: a 2025-11-25 task-augmented call's progress once approved
// reaches its caller under the token of the request that created the task, with the
// related-task _meta (spec 2025-11-25 tasks), here on the session's GET stream since no
// tasks/result is open.
func TestTaskProgressAfterApproval(t *testing.T) {
	_, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, progressRules), approverEnv, nil)
	g.WaitReady(t)
	c := g.NewClient(t)
	st, lines := testkit.OpenStream(t, g.MCP, c.Session)
	if st != http.StatusOK {
		t.Fatalf("GET stream: HTTP %d", st)
	}
	m := c.Post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"slow_operation","arguments":{"seconds":3},"task":{"ttl":60000},"_meta":{"progressToken":"task-3"}}}`).Message(t)
	tid, _ := testkit.Dig(m, "result", "task", "taskId").(string)
	if !strings.HasPrefix(tid, "tg_") {
		t.Fatalf("no task: %v", m)
	}
	decide(t, g, tid, "approve")
	got := 0
	for got < 2 {
		line, ok := <-lines
		if !ok {
			t.Fatalf("the GET stream ended after %d of the upstream's progress notifications", got)
		}
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok || !strings.Contains(d, "notifications/progress") {
			continue
		}
		var n map[string]any
		if err := json.Unmarshal([]byte(d), &n); err != nil {
			t.Fatal(err)
		}
		if testkit.Dig(n, "params", "progressToken") != "task-3" || testkit.Dig(n, "params", "_meta", "io.modelcontextprotocol/related-task", "taskId") != tid {
			t.Fatalf("progress on the session stream: %s; want token task-3 and related-task %s", d, tid)
		}
		got++
	}
	if r := c.TaskRPC(4, "tasks/result", tid).Message(t); !strings.Contains(contentJSON(r), "done") {
		t.Errorf("tasks/result: %v", r)
	}
}
