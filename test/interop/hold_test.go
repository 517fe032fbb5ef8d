//go:build unix

package interop

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// holdRules: delete_* waits for the default workflow; drop_* for one whose approval times
// out (on_timeout deny) well within the hold budget.
const holdRules = `governance:
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve}
    - {match: "drop_*", action: approve, approval: short}
approval:
  default: {timeout: 10m, on_timeout: deny}
  short: {timeout: 300ms, on_timeout: deny}
`

// pending lists the ids of pending approvals.
func pending(t *testing.T, g *testkit.Gateway) []string {
	t.Helper()
	_, body := g.AdminRequest(t, http.MethodGet, "/api/v1/approvals?status=pending", testkit.AdminToken, "")
	items, _ := body["approvals"].([]any)
	var ids []string
	for _, it := range items {
		if id, _ := dig(it, "taskId").(string); id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}

// TestTSClientHold: the official TypeScript SDK client (1.32) used as hosts use it — plain
// callTool, no task support, its default 60 s request timeout — against the default
// tasks.sync_approval hold: approval while held, settle then retry, rejection, approval
// time-out, and 20 parallel retries making one approval and one execution.
func TestTSClientHold(t *testing.T) {
	tc := needNode(t)
	d, upURL := testkit.StartDemo(t)
	// A hold budget below the SDK's 60 s timeout; short so the test stays fast.
	g := startGateway(t, basicConfig(upURL, holdRules, "hold_budget: 2s"), nil)

	dumpOnFail := func(t *testing.T, run *scriptRun) {
		if t.Failed() {
			run.dump(t)
		}
	}

	t.Run("approved while held", func(t *testing.T) {
		before := d.Calls("delete_user")
		run := runTS(t, tc, g.MCP, "holdInTime", func(e event) string {
			if e.name() != "awaitApproval" {
				return ""
			}
			return "approved " + http.StatusText(approve(t, g, pendingTask(t, g, "delete_user")))
		}, "delete_user", `{"user_id":"u-002"}`)
		defer dumpOnFail(t, run)
		if sup := toolExecution(run.find("tools")); sup["delete_user"] != "optional" {
			t.Errorf("delete_user taskSupport = %q, want optional under hold", sup["delete_user"])
		}
		res := run.find("result")
		if res == nil || dig(res, "result", "isError") == true || !strings.Contains(textOf(res["result"]), "u-002") {
			t.Fatalf("held call result: %v", res)
		}
		if n, _ := res["progressCount"].(float64); n < 1 {
			t.Errorf("no notifications/progress for a call with onprogress: %v", res)
		}
		if n := d.Calls("delete_user") - before; n != 1 {
			t.Errorf("executions = %d, want 1", n)
		}
	})

	decided := func(verdict string) func(event) string {
		return func(e event) string {
			if e.name() != "awaitApproval" {
				return ""
			}
			id, _ := e["taskId"].(string)
			if id == "" {
				return "no task"
			}
			if ids := pending(t, g); len(ids) != 1 || ids[0] != id {
				t.Errorf("pending approvals %v, want only %s", ids, id)
			}
			st, _ := g.AdminRequest(t, http.MethodPost, "/api/v1/approvals/"+id+"/"+verdict, testkit.AdminToken, `{"reason":"interop"}`)
			return verdict + " " + http.StatusText(st)
		}
	}

	t.Run("settled before the client timeout, retry returns the result", func(t *testing.T) {
		before := d.Calls("delete_user")
		run := runTS(t, tc, g.MCP, "holdRetry", decided("approve"), "delete_user", `{"user_id":"u-003"}`)
		defer dumpOnFail(t, run)
		s := run.find("settled")
		if s == nil {
			t.Fatalf("first call did not settle with a result (SDK error: %v)", run.find("settledError"))
		}
		tid, _ := dig(s, "result", "_meta", "io.tollgate/approval", "taskId").(string)
		if dig(s, "result", "isError") == true || !strings.HasPrefix(tid, "tg_") ||
			dig(s, "result", "_meta", "io.tollgate/approval", "status") != "working" ||
			!strings.Contains(textOf(s["result"]), "again with exactly the same arguments") {
			t.Errorf("settled result: %v", s)
		}
		if ack := run.find("decidedAck"); ack["ack"] != "approve OK" {
			t.Errorf("approval: %v", ack)
		}
		r := run.find("retry")
		if r == nil || !strings.Contains(textOf(r["result"]), "u-003") || dig(r, "result", "_meta", "io.modelcontextprotocol/related-task", "taskId") != tid {
			t.Errorf("retry after approval: %v / %v", r, run.find("retryError"))
		}
		if n := d.Calls("delete_user") - before; n != 1 {
			t.Errorf("executions = %d, want 1", n)
		}
	})

	t.Run("rejected", func(t *testing.T) {
		before := d.Calls("delete_user")
		run := runTS(t, tc, g.MCP, "holdRetry", decided("reject"), "delete_user", `{"user_id":"u-004"}`)
		defer dumpOnFail(t, run)
		tid, _ := dig(run.find("settled"), "result", "_meta", "io.tollgate/approval", "taskId").(string)
		e := run.find("retryError")
		if e == nil || e["code"] != float64(-32007) || dig(e, "data", "error") != "ApprovalRejected" || dig(e, "data", "taskId") != tid {
			t.Errorf("retry after rejection: %v / %v", e, run.find("retry"))
		}
		if d.Calls("delete_user") != before {
			t.Error("a rejected call ran")
		}
	})

	t.Run("approval timed out", func(t *testing.T) {
		run := runTS(t, tc, g.MCP, "holdRetry", decided("approve"), "drop_table", `{"table":"orders"}`)
		defer dumpOnFail(t, run)
		for _, name := range []string{"settledError", "retryError"} {
			if e := run.find(name); e == nil || e["code"] != float64(-32008) || dig(e, "data", "error") != "ApprovalTimedOut" {
				t.Errorf("%s: %v", name, e)
			}
		}
		if d.Calls("drop_table") != 0 {
			t.Error("a timed-out call ran")
		}
	})

	t.Run("20 parallel retries: one approval, one execution", func(t *testing.T) {
		before := d.Calls("delete_user")
		run := runTS(t, tc, g.MCP, "holdParallel", decided("approve"), "delete_user", `{"user_id":"u-001"}`)
		defer dumpOnFail(t, run)
		s := run.find("settledAll")
		ids, _ := s["taskIds"].([]any)
		if len(ids) != 20 || ids[0] == nil {
			t.Fatalf("settled: %v", s)
		}
		for _, id := range ids {
			if id != ids[0] {
				t.Fatalf("parallel calls named different tasks: %v", ids)
			}
		}
		r := run.find("resultsAll")
		texts, _ := r["texts"].([]any)
		if rej, _ := r["rejected"].([]any); len(rej) != 0 || len(texts) != 20 {
			t.Fatalf("results: %v", r)
		}
		// Replay only until delivered (docs/contract.md §3): the retries that attached before
		// the result was delivered get it; one that arrives after a delivery is a new call,
		// held for a new approval — never a second execution.
		got := 0
		for _, tx := range texts {
			s, _ := tx.(string)
			switch {
			case strings.Contains(s, "u-001"):
				got++
			case strings.Contains(s, "waiting for a human approval") && !strings.Contains(s, ids[0].(string)):
			default:
				t.Errorf("a retry got %q", s)
			}
		}
		if got == 0 {
			t.Error("no retry got the approved call's result")
		}
		if n := d.Calls("delete_user") - before; n != 1 {
			t.Errorf("executions = %d, want 1", n)
		}
	})
}

// TestTSClientHoldAsked: the TypeScript SDK client without task support (plain callTool) and
// a tool behind an approval that asks its user (elicitation) once approved: the question
// reaches the client on the held call's own stream, its answer reaches the upstream, and the
// call ends with the tool's result; the tool ran once.
func TestTSClientHoldAsked(t *testing.T) {
	tc := needNode(t)
	d, upURL := testkit.StartDemo(t)
	g := startGateway(t, basicConfig(upURL, `governance:
  defaults: {action: forward}
  rules:
    - {match: "confirm_*", action: approve}
approval:
  default: {timeout: 10m, on_timeout: deny}
`), nil)
	run := runTS(t, tc, g.MCP, "holdAsked", func(e event) string {
		if e.name() != "awaitApproval" {
			return ""
		}
		return "approved " + http.StatusText(approve(t, g, pendingTask(t, g, "confirm_action")))
	}, "confirm_action", `{"action":"drop the table"}`)
	res := run.find("result")
	asked := run.find("asked")
	if res == nil || dig(res, "result", "isError") == true || !strings.Contains(textOf(res["result"]), `"confirmed":true`) {
		run.dump(t)
		t.Fatalf("held call result: %v", res)
	}
	if asked == nil || asked["method"] != "elicitation/create" || !strings.Contains(asked["message"].(string), "drop the table") {
		run.dump(t)
		t.Errorf("the client was asked %v, want the tool's elicitation", asked)
	}
	if n := d.Calls("confirm_action"); n != 1 {
		t.Errorf("confirm_action ran %d times, want 1", n)
	}
}
