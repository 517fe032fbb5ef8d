package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// TestPendingApprovalSurvivesRestart: with the default store (tasks.store.type auto) and a
// data directory, a call awaiting approval when Tollgate stops is still pending after it
// starts again on the same directory; approved there, it executes exactly once and its
// caller gets the result through the new process.
func TestPendingApprovalSurvivesRestart(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	dataDir := t.TempDir()
	env := map[string]string{"TOLLGATE_DATA_DIR": dataDir}
	for k, v := range approverEnv {
		env[k] = v
	}
	cfg := testkit.BasicConfig(upURL, approvalRules)

	first := testkit.StartGateway(t, cfg, env, nil)
	first.WaitReady(t)
	c := first.NewClient(t)
	tid := c.CallTask(1, "delete_user", `{"user_id":"u-restart"}`)
	first.Stop()
	if d.Calls("delete_user") != 0 {
		t.Fatal("executed before approval")
	}
	if _, err := os.Stat(filepath.Join(dataDir, "tasks.db")); err != nil {
		t.Fatalf("no store file in the data directory: %v", err)
	}

	second := testkit.StartGateway(t, cfg, env, nil)
	second.WaitReady(t)
	st, view := second.AdminRequest(t, "GET", "/api/v1/approvals/"+tid, "alice-secret-token", "")
	if st != http.StatusOK || view["state"] != "awaiting_approval" {
		t.Fatalf("after restart the approval is %d %v, want it pending", st, view)
	}
	if st, _ := second.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/approve", "alice-secret-token", `{"reason":"after restart"}`); st != http.StatusOK {
		t.Fatalf("approve after restart: HTTP %d", st)
	}
	c.URL = second.MCP // same MCP session: the task's owner
	r := c.TaskRPC(2, "tasks/result", tid)
	res, _ := json.Marshal(r.Message(t))
	if !strings.Contains(string(res), `"result"`) || strings.Contains(string(res), `"error"`) {
		t.Fatalf("tasks/result after restart: %s", res)
	}
	if n := d.Calls("delete_user"); n != 1 {
		t.Errorf("delete_user executed %d times, want 1", n)
	}
	if !strings.Contains(second.Logs.String(), `"why":"tasks.store.type auto: $TOLLGATE_DATA_DIR"`) {
		t.Errorf("start-up log does not say which store was chosen and why:\n%s", second.Logs.String())
	}
}

// TestStoreFallsBackToMemoryLoudly: with the default store and no writable data directory,
// Tollgate runs on memory, logs a WARN and says so in /readyz.
func TestStoreFallsBackToMemoryLoudly(t *testing.T) {
	_, upURL := testkit.StartDemo(t)
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, ""), map[string]string{"TOLLGATE_DATA_DIR": notADir}, nil)
	g.WaitReady(t)
	resp, err := testkit.HTTPClient.Get(g.Admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "degraded: tasks are kept in memory") ||
		!strings.Contains(string(body), "will not survive a restart") {
		t.Errorf("/readyz %d:\n%s", resp.StatusCode, body)
	}
	if !strings.Contains(g.Logs.String(), `"level":"WARN","msg":"task store: MEMORY ONLY"`) {
		t.Errorf("no WARN about the memory store:\n%s", g.Logs.String())
	}
}
