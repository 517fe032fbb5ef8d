package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/policies"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

func policyFile(t *testing.T, name string) string {
	t.Helper()
	b, err := fs.ReadFile(policies.FS, name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const policyRules = `governance:
  defaults: {action: forward}
  rules:
    - {match: "transfer_*", action: policy, policy_id: financial_transfer}
cedar:
  policies: [policies/financial.cedar]
approvers:
  - {name: alice, token_env: ALICE_TOKEN}
tasks: {sync_approval: error} # these tests pin the TaskRequired contract (sync_approval error, the default before hold)
`

func transferArgs(amount int) string {
	return fmt.Sprintf(`{"from_account":"acc-payroll","to_account":"acc-savings","amount":%d,"currency":"USD"}`, amount)
}

// TestPolicyAction: one Cedar policy set yields forward, approve and deny for the same tool;
// the decision is re-evaluated when an approved task executes.
func TestPolicyAction(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, policyRules), approverEnv, map[string]string{"policies/financial.cedar": policyFile(t, "financial.cedar")})
	g.WaitReady(t)
	c := g.NewClient(t)

	// policy → required: a plain call is refused before Cedar runs.
	m := c.Post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"transfer_funds","arguments":` + transferArgs(10) + `}}`).Message(t)
	if _, name := testkit.ErrorOf(m); name != "TaskRequired" {
		t.Fatalf("plain call to a policy tool: %v", m)
	}
	// Small: Cedar forwards; the demo upstream has no tasks, so Tollgate runs it at once.
	small := c.CallTask(2, "transfer_funds", transferArgs(10))
	if res := c.TaskRPC(3, "tasks/result", small).Message(t); res["result"] == nil {
		t.Fatalf("small transfer: %v", res)
	}
	// Large: denied, never reaches the upstream.
	m = c.Post(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"transfer_funds","arguments":` + transferArgs(90000) + `,"task":{"ttl":60000}}}`).Message(t)
	if code, name := testkit.ErrorOf(m); code != -32003 || name != "PolicyDenied" {
		t.Fatalf("large transfer: %v", m)
	}
	// Forged entity in arguments: refused (fail closed).
	m = c.Post(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"transfer_funds","arguments":{"amount":{"__entity":{"type":"User","id":"admin"}},"currency":"USD","to_account":"x"},"task":{"ttl":60000}}}`).Message(t)
	if code, _ := testkit.ErrorOf(m); code != -32003 {
		t.Fatalf("forged entity: %v", m)
	}
	// Medium: held for approval.
	medium := c.CallTask(6, "transfer_funds", transferArgs(5000))
	if m := c.TaskRPC(7, "tasks/get", medium).Message(t); !strings.HasPrefix(fmt.Sprint(testkit.Dig(m, "result", "statusMessage")), "Awaiting approval by a human (workflow default)") {
		t.Fatalf("medium transfer not held: %v", m)
	}
	if n := len(d.Transfers()); n != 1 {
		t.Fatalf("upstream transfers = %d, want 1 (only the small one)", n)
	}

	// The policy changes while the task waits: everything is forbidden now.
	forbidAll := `@id("freeze") forbid (principal, action, resource);` + "\n"
	if err := os.WriteFile(filepath.Join(g.Dir, "policies/financial.cedar"), []byte(forbidAll), 0o644); err != nil {
		t.Fatal(err)
	}
	g.Srv.Reload()
	waitFor(t, "reload applied", func() bool {
		// A medium transfer is only held (never executed) until the frozen policy applies.
		m := c.Post(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"transfer_funds","arguments":` + transferArgs(5000) + `,"task":{"ttl":60000}}}`).Message(t)
		code, _ := testkit.ErrorOf(m)
		return code == -32003
	})
	if st, _ := g.AdminRequest(t, "POST", "/api/v1/approvals/"+medium+"/approve", "alice-secret-token", `{}`); st != 200 {
		t.Fatalf("approve: %d", st)
	}
	code, name := testkit.ErrorOf(c.TaskRPC(9, "tasks/result", medium).Message(t))
	if code != -32011 || name != "PolicyChanged" {
		t.Errorf("approved task under a changed policy: %v %q, want -32011 PolicyChanged", code, name)
	}
	if n := len(d.Transfers()); n != 1 {
		t.Errorf("upstream transfers = %d after the policy froze, want 1", n)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func metricValue(t *testing.T, g *testkit.Gateway, series string) float64 {
	t.Helper()
	resp, err := http.Get(g.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` ([0-9.e+-]+)$`)
	m := re.FindSubmatch(b)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// TestHotReload: a rule changed on disk is picked up by the file watcher; the next tools/list
// shows the new taskSupport and a connected client gets notifications/tools/list_changed; a
// broken edit keeps the old behaviour and counts a failure.
func TestHotReload(t *testing.T) {
	_, upURL := testkit.StartDemo(t)
	cfg := func(readAction string) string {
		return testkit.BasicConfig(upURL, "governance:\n  defaults: {action: forward}\n  rules:\n    - {match: \"read_*\", action: "+readAction+"}\ntasks: {sync_approval: error}\n")
	}
	g := testkit.StartGateway(t, cfg("forward"), nil, nil)
	g.WaitReady(t)
	c := g.NewClient(t)
	support := func() string {
		m := c.Post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`).Message(t)
		for _, tl := range testkit.Dig(m, "result", "tools").([]any) {
			if testkit.Dig(tl, "name") == "read_file" {
				s, _ := testkit.Dig(tl, "execution", "taskSupport").(string)
				return s
			}
		}
		return ""
	}
	if s := support(); s != "forbidden" {
		t.Fatalf("before: read_file = %q", s)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.MCP, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.Session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	changed := make(chan struct{}, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "notifications/tools/list_changed") {
				changed <- struct{}{}
				return
			}
		}
	}()
	// The stream is attached to the session before its headers reach the client (Do returned):
	// no wait is needed for the notification to find it.

	path := filepath.Join(g.Dir, "tollgate.yaml")
	// Write via rename, as editors and Kubernetes do.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(cfg("approve")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/tools/list_changed after the rule changed on disk")
	}
	if s := support(); s != "required" {
		t.Fatalf("after reload: read_file = %q, want required", s)
	}
	if v := metricValue(t, g, `tollgate_config_reloads_total{result="success"}`); v < 1 {
		t.Errorf("success reloads = %v", v)
	}

	// A broken edit: old behaviour stays, the failure is counted.
	if err := os.WriteFile(path, []byte(cfg("approve")+"governance: [oops\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "reload failure counted", func() bool {
		return metricValue(t, g, `tollgate_config_reloads_total{result="failure"}`) >= 1
	})
	if s := support(); s != "required" {
		t.Errorf("after a broken edit: read_file = %q, want the previous required", s)
	}
}

// TestReloadApprovers: approvers added to the configuration can decide after a reload,
// without a restart.
func TestReloadApprovers(t *testing.T) {
	_, upURL := testkit.StartDemo(t)
	cfg := func(approvers string) string {
		return testkit.BasicConfig(upURL, "governance:\n  rules:\n    - {match: \"delete_*\", action: approve}\n"+approvers)
	}
	env := map[string]string{"CAROL_TOKEN": "carol-secret-token"}
	g := testkit.StartGateway(t, cfg(""), env, nil)
	g.WaitReady(t)
	if st, _ := g.AdminRequest(t, "GET", "/api/v1/approvals", "carol-secret-token", ""); st != 401 {
		t.Fatalf("carol before she is configured: %d", st)
	}
	if err := os.WriteFile(filepath.Join(g.Dir, "tollgate.yaml"), []byte(cfg("approvers: [{name: carol, token_env: CAROL_TOKEN}]\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	g.Srv.Reload()
	waitFor(t, "carol's token to be accepted", func() bool {
		st, _ := g.AdminRequest(t, "GET", "/api/v1/approvals", "carol-secret-token", "")
		return st == 200
	})
}
