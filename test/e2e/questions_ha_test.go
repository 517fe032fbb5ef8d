package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/tasks/store/storetest"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// identifiedClient opens a 2025-11-25 session on g as identity user, declaring elicitation (an
// upstream only asks what the client declared).
func identifiedClient(t *testing.T, g *testkit.Gateway, user string) *testkit.RPC {
	t.Helper()
	c := &testkit.RPC{T: t, URL: g.MCP, Header: http.Header{"X-Test-User": {user}}}
	r := c.Post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"e2e-ha","version":"1"}}}`)
	if r.Status != http.StatusOK {
		t.Fatalf("initialize: HTTP %d: %s", r.Status, r.Body)
	}
	c.Session = r.Header.Get("Mcp-Session-Id")
	c.Post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c
}

// ownTool calls one of Tollgate's tools and returns its structuredContent.
func ownTool(t *testing.T, c *testkit.RPC, id int, tool string, args map[string]any) (map[string]any, bool) {
	t.Helper()
	m := c.Call(id, tool, args, 0)
	res, _ := testkit.Dig(m, "result").(map[string]any)
	if res == nil {
		t.Fatalf("%s: %v", tool, m)
	}
	sc, _ := res["structuredContent"].(map[string]any)
	isErr, _ := res["isError"].(bool)
	return sc, isErr
}

// pendingQuestion reads, through c, the question pending on task tid ("" when none yet).
func pendingQuestion(t *testing.T, c *testkit.RPC, tid string) string {
	t.Helper()
	sc, _ := ownTool(t, c, 90, "tollgate_get_task", map[string]any{"task_id": tid})
	qs, _ := testkit.Dig(sc, "pending_client", "elicitations").([]any)
	if len(qs) == 0 {
		return ""
	}
	q, _ := qs[0].(map[string]any)
	qid, _ := q["questionId"].(string)
	return qid
}

// TestQuestionsAcrossReplicas: two Tollgates share a Redis store (one real redis-server). The
// task runs on A, whose go-sdk upstream asks its owner; the owner sees and answers the
// question through B (tollgate_* tools), A gives the answer to the upstream, and the result is
// read through B; the tool ran once. Then A stops while a question waits: the task fails
// with ExecutionInterrupted and is never run again.
func TestQuestionsAcrossReplicas(t *testing.T) {
	url := storetest.RedisURL(t) // skips loudly without redis-server
	up := startGoSDK(t)
	cfg := testkit.BasicConfig(up.url, `server:
  identity_header: X-Test-User
governance:
  defaults: {action: approve}
approval:
  default: {timeout: 10m, on_timeout: deny}
approvers:
  - {name: alice, token_env: ALICE_TOKEN}
tasks:
  store: {type: redis, url: "`+url+`?key_prefix=ha-questions-`+strings.ReplaceAll(t.Name(), "/", "-")+`:"}
`)
	a := testkit.StartGateway(t, cfg, approverEnv, nil)
	b := testkit.StartGateway(t, cfg, approverEnv, nil)
	a.WaitReady(t)
	b.WaitReady(t)
	onA := identifiedClient(t, a, "carol")
	onB := identifiedClient(t, b, "carol")
	mallory := identifiedClient(t, b, "mallory")

	tid := onA.CallTask(1, "confirm", `{"what":"drop the table"}`)
	if st, _ := b.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/approve", "alice-secret-token", `{}`); st != 200 {
		t.Fatalf("approve on B: %d", st)
	}
	var qid string
	waitFor(t, "the question on replica B", func() bool { qid = pendingQuestion(t, onB, tid); return qid != "" })
	if _, isErr := ownTool(t, mallory, 2, "tollgate_answer_question", map[string]any{"task_id": tid, "question_id": qid,
		"answer": map[string]any{"action": "accept", "content": map[string]any{"ok": false}}}); !isErr {
		t.Fatal("another caller answered carol's question")
	}
	if _, isErr := ownTool(t, onB, 3, "tollgate_answer_question", map[string]any{"task_id": tid, "question_id": qid,
		"answer": map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}); isErr {
		t.Fatal("the owner's answer through B was refused")
	}
	m := onB.Call(4, "tollgate_get_task_result", map[string]any{"task_id": tid, "timeout_ms": 15000}, 0)
	if got := fmt.Sprint(testkit.Dig(m, "result", "content")); !strings.Contains(got, "answer accept map[ok:true]") {
		t.Fatalf("result through B: %v", m)
	}
	if n := up.stats(t).Calls["confirm"]; n != 1 {
		t.Errorf("confirm ran %d times, want 1", n)
	}

	// A stops while its call waits for the owner's answer.
	tid = onA.CallTask(5, "confirm", `{"what":"drop another table"}`)
	if st, _ := b.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/approve", "alice-secret-token", `{}`); st != 200 {
		t.Fatalf("approve on B: %d", st)
	}
	waitFor(t, "the second question on replica B", func() bool { return pendingQuestion(t, onB, tid) != "" })
	a.Stop()
	var task map[string]any
	waitFor(t, "the interrupted task to fail", func() bool {
		sc, _ := ownTool(t, onB, 6, "tollgate_get_task", map[string]any{"task_id": tid})
		task, _ = sc["task"].(map[string]any)
		return task["status"] == "failed"
	})
	if name := testkit.Dig(task, "error", "data", "error"); name != "ExecutionInterrupted" {
		b, _ := json.Marshal(task)
		t.Fatalf("interrupted task: %s, want ExecutionInterrupted", b)
	}
	if n := up.stats(t).Calls["confirm"]; n != 2 {
		t.Errorf("confirm ran %d times in all, want 2 (once per task)", n)
	}
}
