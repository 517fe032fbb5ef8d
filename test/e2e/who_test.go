package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// whoRules: transfers are decided by group finance (alice) only; deletes by every approver.
const whoRules = `governance:
  defaults: {action: forward}
  rules:
    - {match: "transfer_*", action: approve, approval: payments}
    - {match: "delete_*", action: approve}
approval:
  default: {}
  payments: {approvers: ["group:finance"], redact_fields: [to_account]}
approvers:
  - {name: alice, token_env: ALICE_TOKEN}
  - {name: bob, token_env: BOB_TOKEN}
approver_groups:
  finance: [alice]
tasks:
  hold_budget: 30s
`

// approvalIDs lists the ids the approver sees in GET /api/v1/approvals.
func approvalIDs(t *testing.T, g *testkit.Gateway, token string) []string {
	t.Helper()
	st, list := g.AdminRequest(t, "GET", "/api/v1/approvals?status=pending", token, "")
	if st != 200 {
		t.Fatalf("list approvals: %d %v", st, list)
	}
	items, _ := list["approvals"].([]any)
	var ids []string
	for _, it := range items {
		ids = append(ids, testkit.Dig(it, "taskId").(string))
	}
	return ids
}

// TestWhoMayDecide: a held transfer_funds (workflow payments, approvers group:finance) from
// mcp-go's client is invisible to bob, who is outside the list: not in his list or summary,
// 403 not_authorized on show, approve and reject, and the call stays held and unexecuted.
// alice (finance) approves it and it runs once; bob still decides a delete no list restricts.
func TestWhoMayDecide(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, whoRules), approverEnv, nil)
	g.WaitReady(t)
	const alice, bob = "alice-secret-token", "bob-secret-token"

	// A delete, pending as a task (raw client), that bob may decide.
	raw := g.NewClient(t)
	del := raw.CallTask(1, "delete_user", `{"user_id":"u-002"}`)

	c := mcpGoClient(t, g.MCP)
	type answer struct {
		r   *mcp.CallToolResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		r, err := callTool(c, "transfer_funds", map[string]any{
			"from_account": "acc-checking", "to_account": "acc-savings", "amount": 12.5, "currency": "EUR"})
		done <- answer{r, err}
	}()
	var tid string
	waitFor(t, "the held transfer", func() bool {
		for _, id := range approvalIDs(t, g, alice) {
			if id != del {
				tid = id
			}
		}
		return tid != ""
	})

	if ids := approvalIDs(t, g, bob); len(ids) != 1 || ids[0] != del {
		t.Errorf("bob's list = %v, want only %s", ids, del)
	}
	if st, sum := g.AdminRequest(t, "GET", "/api/v1/approvals/summary", bob, ""); st != 200 || sum["pending"] != float64(1) ||
		testkit.Dig(sum, "workflows", "top") == nil || strings.Contains(fmtJSON(sum), "payments") || strings.Contains(fmtJSON(sum), "transfer_funds") {
		t.Errorf("bob's summary: %d %v", st, sum)
	}
	if st, sum := g.AdminRequest(t, "GET", "/api/v1/approvals/summary", alice, ""); st != 200 || sum["pending"] != float64(2) {
		t.Errorf("alice's summary: %d %v", st, sum)
	}
	for _, op := range []struct{ method, path string }{
		{"GET", "/api/v1/approvals/" + tid},
		{"POST", "/api/v1/approvals/" + tid + "/approve"},
		{"POST", "/api/v1/approvals/" + tid + "/reject"},
	} {
		st, body := g.AdminRequest(t, op.method, op.path, bob, "")
		if st != 403 || body["error"] != "not_authorized" || body["message"] != "approver bob is not in approval.payments.approvers" ||
			strings.Contains(fmtJSON(body), "acc-checking") {
			t.Errorf("bob %s %s: %d %v", op.method, op.path, st, body)
		}
	}
	st, view := g.AdminRequest(t, "GET", "/api/v1/approvals/"+tid, alice, "")
	if st != 200 || view["state"] != "awaiting_approval" || view["decision"] != nil ||
		testkit.Dig(view, "arguments", "from_account") != "acc-checking" || testkit.Dig(view, "arguments", "to_account") != "[REDACTED]" {
		t.Fatalf("the transfer after bob's refused decisions: %d %v", st, view)
	}
	select {
	case a := <-done:
		t.Fatalf("the held call ended before alice decided: %v %v", a.r, a.err)
	default:
	}
	if n := d.Calls("transfer_funds"); n != 0 {
		t.Fatalf("transfer_funds ran %d times before an authorized approval", n)
	}

	if st, body := g.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/approve", alice, `{"reason":"invoice 7"}`); st != 200 {
		t.Fatalf("alice approves: %d %v", st, body)
	}
	a := <-done
	if a.err != nil || a.r.IsError || !strings.Contains(resultText(a.r), "acc-savings") {
		t.Fatalf("the approved transfer: %v %v", a.r, a.err)
	}
	if n := d.Calls("transfer_funds"); n != 1 {
		t.Errorf("transfer_funds ran %d times, want 1", n)
	}
	if st, body := g.AdminRequest(t, "POST", "/api/v1/approvals/"+del+"/reject", bob, ""); st != 200 {
		t.Errorf("bob rejects the delete (no list): %d %v", st, body)
	}
}

func fmtJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
