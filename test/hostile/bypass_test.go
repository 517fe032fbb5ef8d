package hostile

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/policies"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

const policyRules = `governance:
  defaults: {action: forward}
  rules:
    - {match: "transfer_*", action: policy, policy_id: financial_transfer}
    - {match: "delete_*", action: approve}
    - {match: "drop_*", action: deny}
cedar:
  policies: [policies/financial.cedar]
`

// startPolicyGateway runs Tollgate with policyRules (and extra YAML, e.g. a server block) in
// front of up.
func startPolicyGateway(t *testing.T, up *typedUpstream, extra ...string) *testkit.Gateway {
	t.Helper()
	pol, err := fs.ReadFile(policies.FS, "financial.cedar")
	if err != nil {
		t.Fatal(err)
	}
	g := testkit.StartGateway(t, testkit.BasicConfig(up.URL, strings.Join(extra, "")+policyRules), nil,
		map[string]string{"policies/financial.cedar": string(pol)})
	g.WaitReady(t)
	return g
}

// TestCaseVariantArgumentKeys: {"amount":10,"Amount":100000} used to pass Cedar (which reads
// amount 10 and forwards) while the typed Go upstream, matching "Amount" to its amount field
// case-insensitively with the last value winning, transferred 100000. Such arguments are now
// refused with -32602 before rules, Cedar and the upstream see them.
func TestCaseVariantArgumentKeys(t *testing.T) {
	up := startTypedUpstream(t)
	g := startPolicyGateway(t, up)
	c := g.NewClient(t)

	const base = `"from_account":"acc-1","to_account":"acc-2","currency":"USD"`
	// Control: an honest small transfer is forwarded by the policy and runs with its amount.
	tid := c.CallTask(1, "transfer_funds", `{`+base+`,"amount":10}`)
	if res := c.TaskRPC(2, "tasks/result", tid); !strings.Contains(string(res.Body), "transferred 10 USD") {
		t.Fatalf("control transfer did not run with amount 10: %s", res.Body)
	}

	for i, args := range []string{
		`{` + base + `,"amount":10,"Amount":100000}`,
		`{` + base + `,"amount":10,"AMOUNT":100000}`,
		`{"Amount":100000,` + base + `,"amount":10}`, // order does not matter: refused either way
	} {
		m := c.Post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"transfer_funds","arguments":%s,"task":{"ttl":60000}}}`, 10+i, args)).Message(t)
		if code, name := testkit.ErrorOf(m); code != -32602 || name != "InvalidParams" {
			t.Errorf("arguments %s: got %v, want -32602 InvalidParams", args, m)
			if tid, _ := testkit.Dig(m, "result", "task", "taskId").(string); tid != "" {
				t.Logf("task result: %s", c.TaskRPC(90+i, "tasks/result", tid).Body)
			}
		}
	}
	if got := up.Transfers(); !slices.Equal(got, []int64{10}) {
		t.Errorf("upstream executed transfers %v, want only the control [10]", got)
	}
}

// TestGovernedNotifications: a governed method sent without an id (or with id null) used to
// pass through as a notification — answered 202 and forwarded unchecked, so a denied tool ran.
// Now it is refused with HTTP 400 and -32600 IdRequired, and the upstream never sees it.
func TestGovernedNotifications(t *testing.T) {
	up := startTypedUpstream(t)
	g := startPolicyGateway(t, up)
	c := g.NewClient(t)
	for i, body := range []string{
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"drop_table","arguments":{"text":"%s"}}}`,
		`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"drop_table","arguments":{"text":"%s"}}}`,
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"transfer_funds","arguments":{"amount":100000,"currency":"%s"}}}`,
		`{"jsonrpc":"2.0","method":"tasks/cancel","params":{"taskId":"%s"}}`,
		`{"jsonrpc":"2.0","id":null,"method":"tasks/result","params":{"taskId":"%s"}}`,
		`{"jsonrpc":"2.0","method":"tasks/list","params":{"cursor":"%s"}}`,
		`{"jsonrpc":"2.0","method":"tools/list","params":{"cursor":"%s"}}`,
	} {
		marker := fmt.Sprintf("notification-marker-%d", i)
		r := c.Post(fmt.Sprintf(body, marker))
		var m map[string]any
		_ = json.Unmarshal(r.Body, &m)
		code, name := testkit.ErrorOf(m)
		if r.Status != http.StatusBadRequest || code != -32600 || name != "IdRequired" || m["id"] != nil {
			t.Errorf("%s: HTTP %d %s, want 400 with -32600 IdRequired and id null", body, r.Status, r.Body)
		}
		if up.Saw([]byte(marker)) {
			t.Errorf("%s: the upstream received it", body)
		}
	}
	// A plain notification of an ungoverned method still passes through.
	if r := c.Post(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"notification-marker-ok","progress":1}}`); r.Status != http.StatusAccepted || !up.Saw([]byte("notification-marker-ok")) {
		t.Errorf("ungoverned notification: HTTP %d %s, want 202 and forwarded", r.Status, r.Body)
	}
}
