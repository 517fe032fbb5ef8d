package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// TestExplainHeldTask: "why is this held?" for a pending task through the admin API: the rule,
// the Cedar policy that asked for approval (with its file:line), the outcome and what would
// change it — and no argument values.
func TestExplainHeldTask(t *testing.T) {
	_, upURL := testkit.StartDemo(t)
	rules := `governance:
  rules:
    - {match: "delete_*", action: policy, policy_id: delete_protection}
cedar:
  policies: [policies/delete_protection.cedar]
tasks: {sync_approval: error}
`
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, rules), nil,
		map[string]string{"policies/delete_protection.cedar": policyFile(t, "delete_protection.cedar")})
	g.WaitReady(t)
	c := g.NewClient(t)
	id := c.CallTask(1, "delete_user", `{"user_id":"u-SECRET-7","environment":"production"}`)

	status, body := g.AdminRequest(t, "GET", "/api/v1/approvals/"+id+"/explain", testkit.AdminToken, "")
	if status != 200 {
		t.Fatalf("explain: %d %v", status, body)
	}
	x, _ := body["explanation"].(map[string]any)
	if body["taskId"] != id || body["state"] != "awaiting_approval" || x["outcome"] != "approve" || testkit.Dig(x, "rule", "match") != "delete_*" {
		t.Fatalf("explanation: %v", body)
	}
	pols := fmt.Sprint(x["policies"])
	if !strings.Contains(pols, "delete.approve_production") || !strings.Contains(pols, "satisfied") || !strings.Contains(pols, "delete_protection.cedar:") {
		t.Errorf("policies: %s", pols)
	}
	if changes := fmt.Sprint(x["what_would_change_it"]); !strings.Contains(changes, `@decision("approve") matched`) {
		t.Errorf("what would change it: %s", changes)
	}
	if all := fmt.Sprint(body); strings.Contains(all, "u-SECRET-7") {
		t.Errorf("arguments in the explanation: %s", all)
	}
	if status, _ := g.AdminRequest(t, "GET", "/api/v1/approvals/"+id+"/explain", "", ""); status != 401 {
		t.Errorf("explain without a token: %d", status)
	}
	if status, _ := g.AdminRequest(t, "GET", "/api/v1/approvals/tg_unknown/explain", testkit.AdminToken, ""); status != 404 {
		t.Errorf("explain of an unknown task: %d", status)
	}
}
