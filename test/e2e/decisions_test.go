package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/audit"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

const decisionRules = `governance:
  defaults: {action: forward}
  rules:
    - {match: "drop_*", action: deny}
    - {match: "transfer_*", action: policy, policy_id: financial_transfer}
cedar:
  policies: [policies/financial.cedar]
server:
  identity_header: X-User
`

// decisionLines reads the decision lines of g's audit log.
func decisionLines(t *testing.T, g *testkit.Gateway) ([]audit.Event, string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(g.Dir, "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.Event
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		var e audit.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		if e.Kind == audit.KindDecision {
			out = append(out, e)
		}
	}
	return out, string(raw)
}

// TestDecisionsAudited: every governance decision on a tools/call leaves an audit line with
// the caller, the tool, the rule (and Cedar policy ids), the outcome and the correlation id,
// in both eras, and never the arguments. Before, a denied call left only a counter.
func TestDecisionsAudited(t *testing.T) {
	_, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, decisionRules), nil,
		map[string]string{"policies/financial.cedar": policyFile(t, "financial.cedar")})
	g.WaitReady(t)

	c := g.NewClient(t)
	c.Header = http.Header{"X-User": {"alice"}}
	const secret = "orders-SECRET-arg"
	deny := c.Post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"drop_table","arguments":{"table":"` + secret + `"}}}`).Message(t)
	if code, _ := testkit.ErrorOf(deny); code != -32003 {
		t.Fatalf("drop_table: %v", deny)
	}
	corr, _ := testkit.Dig(deny, "error", "data", "correlation_id").(string)
	cedar := c.Post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"transfer_funds","arguments":` + transferArgs(90000) + `}}`).Message(t)
	if code, _ := testkit.ErrorOf(cedar); code != -32003 {
		t.Fatalf("large transfer: %v", cedar)
	}
	if fwd := c.Post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/etc/motd"}}}`).Message(t); fwd["result"] == nil {
		t.Fatalf("read_file: %v", fwd)
	}
	mc := &modernClient{t: t, url: g.MCP, hdr: http.Header{"X-User": {"bob"}}}
	if m := mc.call(4, "tools/call", map[string]any{"name": "drop_table", "arguments": map[string]any{"table": secret}}); m["error"] == nil {
		t.Fatalf("modern drop_table: %v", m)
	}

	lines, raw := decisionLines(t, g)
	if strings.Contains(raw, secret) || strings.Contains(raw, "90000") {
		t.Fatalf("arguments reached the audit log:\n%s", raw)
	}
	find := func(actor, tool string) audit.Event {
		t.Helper()
		i := slices.IndexFunc(lines, func(e audit.Event) bool { return e.Actor == actor && e.Tool == tool })
		if i < 0 {
			t.Fatalf("no decision line for %s calling %s:\n%s", actor, tool, raw)
		}
		return lines[i]
	}
	if e := find("alice", "drop_table"); e.Outcome != "deny" || e.Rule != "drop_*" || e.Owner == "" || e.CorrelationID == "" || e.CorrelationID != corr {
		t.Errorf("legacy denial: %+v (reply's correlation id %q)", e, corr)
	}
	if e := find("alice", "transfer_funds"); e.Outcome != "deny" || e.Rule != "transfer_*" || !slices.Contains(e.Policies, "financial.forbid_large") {
		t.Errorf("Cedar denial: %+v", e)
	}
	if e := find("alice", "read_file"); e.Outcome != "forward" || e.Rule != "defaults" {
		t.Errorf("forward: %+v", e)
	}
	if e := find("bob", "drop_table"); e.Outcome != "deny" || e.Rule != "drop_*" || e.Owner == "" {
		t.Errorf("modern denial: %+v", e)
	}
}
