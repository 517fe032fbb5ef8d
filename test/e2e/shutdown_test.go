package e2e

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/tasks"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// TestShutdownAnswersHeldAndDrainsExecuting: a graceful stop (g.Stop cancels Run's context as
// SIGTERM does) while two plain calls are held for approval — one on an SSE stream, one
// JSON-only — and an approved call is executing upstream (slow_operation, 0.5 s). The held
// calls get the settled "call again" result naming their task; the executing call finishes
// within server.shutdown_timeout and its result is stored (a committed transition to
// completed). Fails on main: the streamed held call's stream ended with no answer, the
// JSON-only one was reset when the grace ended, and the execution was cut at once (failed as
// ExecutionInterrupted).
func TestShutdownAnswersHeldAndDrainsExecuting(t *testing.T) {
	_, up := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(up, `governance:
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve}
    - {match: "slow_*", action: approve}
approvers:
  - {name: alice, token_env: ALICE_TOKEN}
server: {shutdown_timeout: 5s}
tasks:
  hold_budget: 60s
`), approverEnv, nil)
	g.WaitReady(t)

	var mu sync.Mutex
	states := map[string][]tasks.State{}
	executing := make(chan string, 4)
	g.Srv.SubscribeTasks(func(tr tasks.Transition) {
		mu.Lock()
		states[tr.Task.ID] = append(states[tr.Task.ID], tr.To)
		mu.Unlock()
		if tr.To == tasks.Executing {
			executing <- tr.Task.ID
		}
	})

	streamed := g.NewClient(t)
	jsonOnly := &testkit.RPC{T: t, URL: g.MCP, Session: streamed.Session, Header: http.Header{"Accept": {"application/json"}}}
	type answer struct {
		r   testkit.Reply
		err error
	}
	held := map[string]chan answer{"streamed": make(chan answer, 1), "json-only": make(chan answer, 1)}
	go func() {
		r, err := streamed.TryPost(`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"delete_user","arguments":{"user_id":"u-002"}}}`)
		held["streamed"] <- answer{r, err}
	}()
	go func() {
		r, err := jsonOnly.TryPost(`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"delete_user","arguments":{"user_id":"u-003"}}}`)
		held["json-only"] <- answer{r, err}
	}()
	waitFor(t, "two held calls", func() bool { return len(pendingApprovals(t, g)) == 2 })

	tid := streamed.CallTask(13, "slow_operation", `{"seconds":0.5}`)
	decide(t, g, tid, "approve")
	if got := <-executing; got != tid {
		t.Fatalf("executing %s, want %s", got, tid)
	}

	g.Stop()

	for name, ch := range held {
		a := <-ch
		if a.err != nil {
			t.Errorf("%s held call: no answer at shutdown: %v", name, a.err)
			continue
		}
		if a.r.Status != http.StatusOK || !strings.Contains(string(a.r.Body), `"result"`) {
			t.Errorf("%s held call: HTTP %d without a result at shutdown:\n%s", name, a.r.Status, a.r.Body)
			continue
		}
		m := a.r.Message(t)
		text, _ := testkit.Dig(m, "result", "content").([]any)
		if len(text) == 0 || !strings.Contains(testkit.Dig(text[0], "text").(string), "call delete_user again with exactly the same arguments") {
			t.Errorf("%s held call: not the settled \"call again\" result: %v", name, m)
		}
		if id, _ := testkit.Dig(m, "result", "_meta", "io.tollgate/approval", "taskId").(string); !strings.HasPrefix(id, "tg_") {
			t.Errorf("%s held call: the result names no task: %v", name, m)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if got := states[tid]; len(got) == 0 || got[len(got)-1] != tasks.Completed {
		t.Errorf("the executing call's transitions %v, want it to end completed (stored) within the grace", got)
	}
}
