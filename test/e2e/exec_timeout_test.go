package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// TestExecutionTimeout: an approved call to an upstream that never answers fails after
// tasks.execution_timeout with -32001 ExecutionTimeout, long before the task's TTL; the
// upstream request is cancelled and the call is not sent again.
func TestExecutionTimeout(t *testing.T) {
	var calls atomic.Int32
	cancelled := make(chan struct{}, 1)
	up := toolUpstream(t, "delete_hung", func(w http.ResponseWriter, r *http.Request, _ json.RawMessage) {
		calls.Add(1)
		<-r.Context().Done() // hung: only Tollgate giving up ends this
		cancelled <- struct{}{}
	})
	g := testkit.StartGateway(t, testkit.BasicConfig(up.URL(), approvalRules+"tasks:\n  execution_timeout: 300ms\n"), approverEnv, nil)
	g.WaitReady(t)
	c := g.NewClient(t)
	tid := c.CallTask(1, "delete_hung", `{}`) // task TTL 60 s
	if st, _ := g.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/approve", "alice-secret-token", `{}`); st != 200 {
		t.Fatalf("approve: %d", st)
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream request was not cancelled within 10 s of approval (the task TTL is 60 s)")
	}
	m := c.TaskRPC(2, "tasks/result", tid).Message(t)
	code, name := testkit.ErrorOf(m)
	msg, _ := testkit.Dig(m, "error", "message").(string)
	if code != -32001 || name != "ExecutionTimeout" || !strings.Contains(msg, "tasks.execution_timeout") {
		t.Fatalf("tasks/result: %v", m)
	}
	if st := testkit.Dig(c.TaskRPC(3, "tasks/get", tid).Message(t), "result", "status"); st != "failed" {
		t.Errorf("task status %v, want failed", st)
	}
	if st, _ := g.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/approve", "alice-secret-token", `{}`); st != http.StatusConflict {
		t.Errorf("second approve: HTTP %d, want 409", st)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the upstream received the call %d times, want 1", n)
	}
	// Spec 2025-11-25 utilities/cancellation: Tollgate says it gave up, with the headers the
	// transport requires.
	bodies, heads := up.Requests()
	found := false
	for i, b := range bodies {
		if !strings.Contains(b, `"notifications/cancelled"`) {
			continue
		}
		found = true
		if !strings.Contains(b, `"requestId":"tollgate-exec-`+tid+`"`) {
			t.Errorf("cancellation %s does not name the call", b)
		}
		if h := heads[i]; h.Get("Accept") != "application/json, text/event-stream" || h.Get("Content-Type") != "application/json" || h.Get("Mcp-Session-Id") == "" {
			t.Errorf("cancellation headers %v", h)
		}
	}
	if !found {
		t.Error("the upstream was not told of the cancellation")
	}
}
