package ops

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// TestNoSecretsInLogs runs a governed flow whose tool arguments carry a secret marker, whose
// MCP requests carry a bearer token and whose approvals use an approver token (and a wrong
// one), then checks neither the debug-level JSON logs nor the audit log contain any of them.
func TestNoSecretsInLogs(t *testing.T) {
	const (
		argSecret      = "ops-ARG-SECRET-7f3a9c"
		bearerSecret   = "ops-BEARER-SECRET-51d2e8"
		approverSecret = "ops-APPROVER-SECRET-c04b77"
		wrongSecret    = "ops-WRONG-TOKEN-9e1f20"
	)
	_, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, governedRules), map[string]string{"ALICE_TOKEN": approverSecret}, nil)
	g.WaitReady(t)

	c := &testkit.RPC{T: t, URL: g.MCP, Header: http.Header{"Authorization": {"Bearer " + bearerSecret}}}
	c.Initialize()
	c.Post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	c.Call(2, "read_file", map[string]any{"path": "/" + argSecret}, 0)                          // forwarded
	c.Call(3, "drop_table", map[string]any{"table": argSecret}, 0)                              // denied
	c.Call(4, "delete_user", map[string]any{"user_id": "u-001", "note": argSecret}, 0)          // TaskRequired
	c.Call(5, "read_file", map[string]any{"path": "/" + argSecret}, 1000)                       // TaskForbidden
	m := c.Call(6, "delete_user", map[string]any{"user_id": "u-003", "note": argSecret}, 60000) // held
	taskID, _ := testkit.Dig(m, "result", "task", "taskId").(string)
	if taskID == "" {
		t.Fatalf("held call: %v", m)
	}
	if code, _ := g.AdminRequest(t, http.MethodGet, "/api/v1/approvals?status=pending", wrongSecret, ""); code != http.StatusUnauthorized {
		t.Errorf("wrong approver token: HTTP %d, want 401", code)
	}
	if code, ans := g.AdminRequest(t, http.MethodGet, "/api/v1/approvals/"+taskID, approverSecret, ""); code != 200 {
		t.Errorf("show: HTTP %d %v", code, ans)
	}
	if code, ans := g.AdminRequest(t, http.MethodPost, "/api/v1/approvals/"+taskID+"/approve", approverSecret, `{"reason":"fine"}`); code != 200 {
		t.Fatalf("approve: HTTP %d %v", code, ans)
	}
	if res := c.Post(`{"jsonrpc":"2.0","id":7,"method":"tasks/result","params":{"taskId":"` + taskID + `"}}`).Message(t); res["result"] == nil {
		t.Fatalf("tasks/result: %v", res)
	}
	g.Stop() // flush and close the audit log

	audit, err := os.ReadFile(filepath.Join(g.Dir, "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	logs := g.Logs.String()
	if !strings.Contains(logs, `"level":"DEBUG"`) && !strings.Contains(logs, `"level":"INFO"`) {
		t.Fatalf("no logs captured:\n%s", logs)
	}
	if !strings.Contains(string(audit), `"kind":"approved"`) || !strings.Contains(string(audit), taskID) {
		t.Fatalf("audit log lacks the approval of %s:\n%s", taskID, audit)
	}
	for name, text := range map[string]string{"server log": logs, "audit log": string(audit)} {
		for _, secret := range []string{argSecret, bearerSecret, approverSecret, wrongSecret} {
			if strings.Contains(text, secret) {
				t.Errorf("%s contains secret %q:\n%s", name, secret, lineWith(text, secret))
			}
		}
	}
}

func lineWith(text, s string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

// TestCorrelationIDLogged: an upstream failure yields a JSON-RPC error whose
// data.correlation_id also appears on a log line, so an operator can find the cause.
func TestCorrelationIDLogged(t *testing.T) {
	up := newOpsUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		// Drop the connection without an answer: an upstream crash mid-call.
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			conn.Close()
		}
	})
	g := testkit.StartGateway(t, testkit.BasicConfig(up.url(), ""), nil, nil)
	g.WaitReady(t)
	c := g.NewClient(t)
	m := c.Call(1, "echo", map[string]any{}, 0)
	code, name := testkit.ErrorOf(m)
	if code != -32000 || name != "UpstreamUnreachable" {
		t.Fatalf("got %v %q: %v", code, name, m)
	}
	corr, _ := testkit.Dig(m, "error", "data", "correlation_id").(string)
	if corr == "" {
		t.Fatalf("error without data.correlation_id: %v", m)
	}
	found := false
	sc := bufio.NewScanner(strings.NewReader(g.Logs.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) == nil && line["correlation_id"] == corr {
			found = true
			if line["level"] != "WARN" && line["level"] != "ERROR" {
				t.Errorf("the failure is logged at %v, want WARN or ERROR: %s", line["level"], sc.Bytes())
			}
		}
	}
	if !found {
		t.Errorf("no log line carries correlation_id %q:\n%s", corr, g.Logs.String())
	}
}

// TestStartupAnnotationSummary: the annotation decisions at start are one INFO line with the
// counts (a 1000-tool upstream used to write 1000 INFO lines); each tool's decision is at DEBUG.
func TestStartupAnnotationSummary(t *testing.T) {
	_, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, governedRules), map[string]string{"ALICE_TOKEN": "ops-alice-token-0123456789"}, nil)
	g.WaitReady(t)

	var summaries []map[string]any
	perTool := map[string]int{} // level → per-tool lines
	sc := bufio.NewScanner(strings.NewReader(g.Logs.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		msg, _ := line["msg"].(string)
		switch {
		case msg == "Tool annotations":
			summaries = append(summaries, line)
		case strings.HasPrefix(msg, "Tool annotation: "):
			perTool[line["level"].(string)]++
		}
	}
	if len(summaries) != 1 {
		t.Fatalf("%d summary lines, want 1:\n%s", len(summaries), g.Logs.String())
	}
	s := summaries[0]
	tools, _ := s["tools"].(float64)
	if s["level"] != "INFO" || tools < 2 || s["changed"] != tools {
		t.Errorf("summary %v: want INFO with tools = changed = the demo's tools", s)
	}
	if req, opt, forb := s["required"].(float64), s["optional"].(float64), s["forbidden"].(float64); req+opt+forb != tools || req == 0 {
		t.Errorf("summary %v: the counts by annotation must add up to tools, with governed tools required", s)
	}
	if perTool["INFO"] != 0 || perTool["DEBUG"] != int(tools) {
		t.Errorf("per-tool annotation lines by level %v, want %v at DEBUG only", perTool, tools)
	}
}
