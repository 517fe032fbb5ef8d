package e2e

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/tasks/store/storetest"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// TestLeaseReplicaKilled: two Tollgates share a Redis store (one real redis-server). Replica A
// is the real binary in its own process; the task's call runs there, blocked in the upstream
// (its go-sdk tool waits for the owner's answer to a question). A is killed with SIGKILL: no
// graceful stop fails the task. Replica B fails it with -32603 ExecutionInterrupted once A's
// execution lease (tasks.execution_lease: 3s) lapses, tasks/result through B returns that
// error, the upstream ran the call once, and B counts the lapse in
// tollgate_task_leases_lapsed_total. On the old code the task stays executing until
// its TTL, so the bounded wait fails.
func TestLeaseReplicaKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	url := storetest.RedisURL(t) // skips loudly without redis-server
	up := startGoSDK(t)
	bin := buildBinary(t)
	cfg := testkit.BasicConfig(up.url, `server:
  identity_header: X-Test-User
governance:
  defaults: {action: approve}
approval:
  default: {timeout: 10m, on_timeout: deny}
approvers:
  - {name: alice, token_env: ALICE_TOKEN}
tasks:
  execution_lease: 3s
  store: {type: redis, url: "`+url+`?key_prefix=ha-lease-`+strings.ReplaceAll(t.Name(), "/", "-")+`:"}
`)

	// Replica A: the binary, killable.
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "tollgate.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	listen, admin := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--config", cfgPath)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TOLLGATE_LISTEN=" + listen, "TOLLGATE_ADMIN_LISTEN=" + admin,
		"TOLLGATE_ADMIN_TOKEN=" + testkit.AdminToken, "TOLLGATE_DATA_DIR=" + filepath.Join(dir, "data")}
	for k, v := range approverEnv {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var logA bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logA, &logA
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("replica A's output:\n%s", logA.String())
		}
	})
	waitFor(t, "replica A ready", func() bool {
		resp, err := testkit.HTTPClient.Get("http://" + admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	a := &testkit.Gateway{MCP: "http://" + listen + "/mcp", Admin: "http://" + admin}

	b := testkit.StartGateway(t, cfg, approverEnv, nil)
	b.WaitReady(t)
	onA := identifiedClient(t, a, "carol")
	onB := identifiedClient(t, b, "carol")

	tid := onA.CallTask(1, "confirm", `{"what":"drop the table"}`)
	if st, _ := b.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/approve", "alice-secret-token", `{}`); st != 200 {
		t.Fatalf("approve on B: %d", st)
	}
	// The call runs on A (A created the task) and blocks upstream on its question.
	waitFor(t, "the call's question, seen through B", func() bool { return pendingQuestion(t, onB, tid) != "" })
	if n := up.stats(t).Calls["confirm"]; n != 1 {
		t.Fatalf("confirm ran %d times before the kill, want 1", n)
	}

	if err := cmd.Process.Kill(); err != nil { // SIGKILL: A cannot fail the task itself
		t.Fatal(err)
	}
	<-exited
	killed := time.Now()

	var task map[string]any
	waitFor(t, "B to fail the task of the killed replica", func() bool {
		sc, _ := ownTool(t, onB, 2, "tollgate_get_task", map[string]any{"task_id": tid})
		task, _ = sc["task"].(map[string]any)
		return task["status"] == "failed"
	})
	t.Logf("failed %s after the kill", time.Since(killed).Round(100*time.Millisecond))
	m := onB.TaskRPC(3, "tasks/result", tid).Message(t)
	if code, name := testkit.Dig(m, "error", "code"), testkit.Dig(m, "error", "data", "error"); code != float64(-32603) || name != "ExecutionInterrupted" {
		t.Fatalf("tasks/result through B: %v, want -32603 ExecutionInterrupted", m)
	}
	if msg, _ := testkit.Dig(m, "error", "message").(string); !strings.Contains(msg, "stopped answering") {
		t.Errorf("error message %q does not say the replica stopped answering", msg)
	}
	if n := up.stats(t).Calls["confirm"]; n != 1 {
		t.Errorf("confirm ran %d times, want once (a task executes at most once)", n)
	}
	if n := metricValue(t, b, "tollgate_task_leases_lapsed_total"); n != 1 {
		t.Errorf("tollgate_task_leases_lapsed_total on B = %v, want 1", n)
	}
}
