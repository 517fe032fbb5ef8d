package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/audit"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

func auditModeRules(mode string) string {
	return `governance:
  mode: ` + mode + `
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve}
    - {match: "drop_*", action: deny}
    - {match: "transfer_*", action: deny, mode: enforce}
server:
  identity_header: X-User
`
}

func adminText(t *testing.T, url string) string {
	t.Helper()
	resp, err := testkit.HTTPClient.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestAuditMode: with governance.mode: audit a deny rule and an approve rule both let the call
// reach the upstream (both eras), and the audit log, the metrics and the decisions API say
// what would have happened; a rule marked enforce still denies; /readyz and the summary say
// audit mode is on; a reload to enforce switches it off.
func TestAuditMode(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, auditModeRules("audit")), nil, nil)
	g.WaitReady(t)

	c := g.NewClient(t)
	c.Header = http.Header{"X-User": {"alice"}}
	call := func(id int, tool, args string) map[string]any {
		return c.Post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args)).Message(t)
	}
	if m := call(1, "drop_table", `{"table":"orders"}`); m["result"] == nil {
		t.Fatalf("drop_table in audit mode: %v", m)
	}
	if m := call(2, "delete_user", `{"user_id":"u-002"}`); m["result"] == nil {
		t.Fatalf("delete_user in audit mode: %v", m)
	}
	if m := call(3, "transfer_funds", transferArgs(10)); m["error"] == nil {
		t.Fatalf("transfer_funds (mode: enforce) was not denied: %v", m)
	}
	mc := &modernClient{t: t, url: g.MCP, hdr: http.Header{"X-User": {"bob"}}}
	if m := mc.call(4, "tools/call", map[string]any{"name": "drop_table", "arguments": map[string]any{"table": "users"}}); m["result"] == nil {
		t.Fatalf("modern drop_table in audit mode: %v", m)
	}
	if d.Calls("drop_table") != 2 || d.Calls("delete_user") != 1 || d.Calls("transfer_funds") != 0 {
		t.Fatalf("upstream calls: drop %d, delete %d, transfer %d", d.Calls("drop_table"), d.Calls("delete_user"), d.Calls("transfer_funds"))
	}

	lines, raw := decisionLines(t, g)
	count := map[string]int{}
	for _, e := range lines {
		count[e.Actor+" "+e.Tool+" "+e.Outcome+" "+e.Rule+" "+e.Mode]++
	}
	for _, want := range []string{
		"alice drop_table would deny drop_* audit",
		"alice delete_user would hold delete_* audit",
		"alice transfer_funds deny transfer_* ",
		"bob drop_table would deny drop_* audit",
	} {
		if count[want] != 1 {
			t.Errorf("audit log lacks %q:\n%s", want, raw)
		}
	}

	metrics := adminText(t, g.Admin+"/metrics")
	for _, want := range []string{`tollgate_would_decisions_total{action="deny"} 2`, `tollgate_would_decisions_total{action="approve"} 1`, `tollgate_decisions_total{action="deny"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if body := adminText(t, g.Admin+"/readyz"); !strings.Contains(body, "ready") || !strings.Contains(body, "audit mode: governance.mode is audit") || !strings.Contains(body, `"transfer_*"`) {
		t.Errorf("/readyz does not say audit mode is on:\n%s", body)
	}
	if !strings.Contains(g.Logs.String(), "governance audit mode is on") {
		t.Error("no start-up log line about audit mode")
	}
	status, body := g.AdminRequest(t, "GET", "/api/v1/decisions?would=true", testkit.AdminToken, "")
	list, _ := body["decisions"].([]any)
	if status != 200 || len(list) != 3 {
		t.Fatalf("GET /api/v1/decisions?would=true: %d %v", status, body)
	}
	if first, _ := list[0].(map[string]any); first["outcome"] != audit.OutcomeWouldDeny || first["tool"] != "drop_table" || first["actor"] != "bob" {
		t.Errorf("newest would-be decision: %v", first)
	}
	if status, body := g.AdminRequest(t, "GET", "/api/v1/decisions", testkit.AdminToken, ""); status != 200 || len(body["decisions"].([]any)) != 4 {
		t.Errorf("GET /api/v1/decisions: %d %v", status, body)
	}
	if status, _ := g.AdminRequest(t, "GET", "/api/v1/decisions", "", ""); status != 401 {
		t.Errorf("decisions without a token: %d", status)
	}
	if _, sum := g.AdminRequest(t, "GET", "/api/v1/approvals/summary", testkit.AdminToken, ""); !strings.HasPrefix(fmt.Sprint(sum["auditMode"]), "audit mode:") {
		t.Errorf("summary (console) does not say audit mode is on: %v", sum)
	}

	// Switching is a reload.
	if err := os.WriteFile(filepath.Join(g.Dir, "tollgate.yaml"), []byte(testkit.BasicConfig(upURL, auditModeRules("enforce"))), 0o644); err != nil {
		t.Fatal(err)
	}
	g.Srv.Reload()
	waitFor(t, "enforce mode after reload", func() bool {
		return !strings.Contains(adminText(t, g.Admin+"/readyz"), "audit mode")
	})
	if m := call(5, "drop_table", `{"table":"orders"}`); m["error"] == nil {
		t.Fatalf("drop_table after the reload to enforce: %v", m)
	}
	if d.Calls("drop_table") != 2 {
		t.Fatalf("drop_table reached the upstream after the reload: %d", d.Calls("drop_table"))
	}
}
