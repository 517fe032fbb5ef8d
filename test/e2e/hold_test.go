package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// holdRules: delete_user waits for the default workflow; drop_table for one that times out
// (on_timeout deny) long before the hold budget ends.
const holdRules = `governance:
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve}
    - {match: "drop_*", action: approve, approval: short}
approval:
  short: {timeout: 300ms, on_timeout: deny}
approvers:
  - {name: alice, token_env: ALICE_TOKEN}
tasks:
  hold_budget: 1s
`

// pendingApprovals lists the ids of pending approvals through the admin API.
func pendingApprovals(t *testing.T, g *testkit.Gateway) []string {
	t.Helper()
	_, list := g.AdminRequest(t, "GET", "/api/v1/approvals?status=pending", "alice-secret-token", "")
	items, _ := list["approvals"].([]any)
	var ids []string
	for _, it := range items {
		if id, _ := testkit.Dig(it, "taskId").(string); id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}

func decide(t *testing.T, g *testkit.Gateway, id, verdict string) {
	t.Helper()
	if st, body := g.AdminRequest(t, "POST", "/api/v1/approvals/"+id+"/"+verdict, "alice-secret-token", `{"reason":"e2e"}`); st != 200 {
		t.Fatalf("%s %s: %d %v", verdict, id, st, body)
	}
}

// callTool is a plain tools/call through the mcp-go client (no task support), bounded.
func callTool(c *client.Client, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: args}})
}

func resultText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, ct := range r.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestHoldMode drives the default sync_approval hold with mcp-go's client, which has no task
// support: a decision within the budget, the settle-and-retry path, rejection, an approval
// timeout, and 20 parallel retries that make one approval and one execution. A call made again
// after its result was delivered is a new call (issue 29).
func TestHoldMode(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, holdRules), approverEnv, nil)
	g.WaitReady(t)
	c := mcpGoClient(t, g.MCP)
	if sup := toolSupport(t, c); sup["delete_user"] != "optional" {
		t.Fatalf("hold mode advertises delete_user as %q, want optional", sup["delete_user"])
	}

	t.Run("approved within the budget", func(t *testing.T) {
		before := d.Calls("delete_user")
		type answer struct {
			r   *mcp.CallToolResult
			err error
		}
		done := make(chan answer, 1)
		go func() {
			r, err := callTool(c, "delete_user", map[string]any{"user_id": "u-002"})
			done <- answer{r, err}
		}()
		waitFor(t, "the held call's approval", func() bool { return len(pendingApprovals(t, g)) == 1 })
		decide(t, g, pendingApprovals(t, g)[0], "approve")
		a := <-done
		if a.err != nil || a.r.IsError || !strings.Contains(resultText(a.r), "u-002") {
			t.Fatalf("held call: %v %v", a.r, a.err)
		}
		if n := d.Calls("delete_user") - before; n != 1 {
			t.Errorf("executions = %d", n)
		}
	})

	t.Run("settled, then the retry collects the result", func(t *testing.T) {
		before := d.Calls("delete_user")
		args := map[string]any{"user_id": "u-003"}
		r, err := callTool(c, "delete_user", args)
		if err != nil || r.IsError {
			t.Fatalf("settled call: %v %v", r, err)
		}
		tid := taskIDRe.FindString(resultText(r))
		meta, _ := r.Meta.AdditionalFields["io.tollgate/approval"].(map[string]any)
		if tid == "" || meta["taskId"] != tid || meta["state"] != "awaiting_approval" || !strings.HasSuffix(meta["consoleUrl"].(string), "/approvals") {
			t.Fatalf("settled answer does not name the task: %q %v", resultText(r), r.Meta)
		}
		// A retry before the decision holds again on the same task.
		r, err = callTool(c, "delete_user", args)
		if err != nil || taskIDRe.FindString(resultText(r)) != tid {
			t.Fatalf("retry before the decision: %v %v", r, err)
		}
		if ids := pendingApprovals(t, g); len(ids) != 1 || ids[0] != tid {
			t.Fatalf("pending approvals %v, want only %s", ids, tid)
		}
		decide(t, g, tid, "approve")
		r, err = callTool(c, "delete_user", args)
		if err != nil || r.IsError || !strings.Contains(resultText(r), "u-003") {
			t.Fatalf("retry after approval: %v %v", r, err)
		}
		if n := d.Calls("delete_user") - before; n != 1 {
			t.Errorf("executions = %d, want 1", n)
		}
		// The result was delivered: the same call again is a new call (issue 29), held for
		// a new approval, not answered from the old one. Tollgate records the delivery once
		// the answer is written; a call sent in the instant before that still gets the replay.
		waitDelivered(t, g, tid)
		r, err = callTool(c, "delete_user", args)
		if err != nil || taskIDRe.FindString(resultText(r)) == "" || taskIDRe.FindString(resultText(r)) == tid {
			t.Fatalf("call after delivery: %v %v; want a new held task", r, err)
		}
		if ids := pendingApprovals(t, g); len(ids) != 1 || ids[0] == tid {
			t.Fatalf("pending approvals %v, want one new one", ids)
		}
		decide(t, g, pendingApprovals(t, g)[0], "reject")
	})

	t.Run("rejected", func(t *testing.T) {
		args := map[string]any{"user_id": "u-004"}
		r, err := callTool(c, "delete_user", args)
		tid := ""
		if err == nil {
			tid = taskIDRe.FindString(resultText(r))
		}
		if tid == "" {
			t.Fatalf("settled call: %v %v", r, err)
		}
		decide(t, g, tid, "reject")
		before := d.Calls("delete_user")
		_, err = callTool(c, "delete_user", args)
		if err == nil || !strings.Contains(err.Error(), "ApprovalRejected") {
			t.Fatalf("retry after rejection: err = %v, want ApprovalRejected", err)
		}
		if d.Calls("delete_user") != before {
			t.Error("a rejected call ran")
		}
	})

	t.Run("approval timed out", func(t *testing.T) {
		for i := range 2 { // the call itself, then its retry
			_, err := callTool(c, "drop_table", map[string]any{"table": "orders"})
			if err == nil || !strings.Contains(err.Error(), "ApprovalTimedOut") {
				t.Fatalf("call %d: err = %v, want ApprovalTimedOut", i, err)
			}
		}
		if d.Calls("drop_table") != 0 {
			t.Error("a timed-out call ran")
		}
	})

	t.Run("20 parallel retries", func(t *testing.T) {
		before := d.Calls("delete_user")
		args := map[string]any{"user_id": "u-001"}
		// texts makes 20 parallel calls of the same delete_user and returns their texts.
		texts := func() []string {
			var wg sync.WaitGroup
			out := make(chan string, 20)
			for range 20 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r, err := callTool(c, "delete_user", args)
					if err != nil {
						t.Error(err)
						return
					}
					out <- resultText(r)
				}()
			}
			wg.Wait()
			close(out)
			var all []string
			for s := range out {
				all = append(all, s)
			}
			return all
		}
		seen := map[string]bool{}
		for _, text := range texts() {
			seen[taskIDRe.FindString(text)] = true
		}
		pending := pendingApprovals(t, g)
		if len(seen) != 1 || len(pending) != 1 || !seen[pending[0]] {
			t.Fatalf("tasks named %v, pending approvals %v; want one", seen, pending)
		}
		decide(t, g, pending[0], "approve")
		// One retry collects the one result (after it, the same call would be new).
		if r, err := callTool(c, "delete_user", args); err != nil || !strings.Contains(resultText(r), "u-001") {
			t.Errorf("retry after approval: %v %v", r, err)
		}
		if n := d.Calls("delete_user") - before; n != 1 {
			t.Errorf("executions = %d, want 1", n)
		}
	})
}

// waitDelivered waits until Tollgate has recorded that task id's outcome reached its
// requester (deliveredAt): it does so right after writing the answer, so a client may act on
// the answer a moment before.
func waitDelivered(t *testing.T, g *testkit.Gateway, id string) {
	t.Helper()
	waitFor(t, "the delivery of "+id+" to be recorded", func() bool {
		_, v := g.AdminRequest(t, "GET", "/api/v1/approvals/"+id, testkit.AdminToken, "")
		return v["deliveredAt"] != nil
	})
}
