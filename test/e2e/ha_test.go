package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/tasks/store/storetest"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// TestTwoReplicasSharedStore: two Tollgate replicas, each in front of its own upstream (the
// sidecar pattern), share a Redis task store. A call held on replica A is approved through
// replica B's admin API; A executes it against A's upstream, where the caller's session lives.
func TestTwoReplicasSharedStore(t *testing.T) {
	url := storetest.RedisURL(t) // skips loudly without redis-server
	cfg := func(up string) string {
		return testkit.BasicConfig(up, approvalRules+"tasks:\n  store: {type: redis, url: \""+url+"?key_prefix=ha-e2e-"+strings.ReplaceAll(t.Name(), "/", "-")+":\"}\n")
	}
	dA, upA := testkit.StartDemo(t)
	dB, upB := testkit.StartDemo(t)
	a := testkit.StartGateway(t, cfg(upA), approverEnv, nil)
	b := testkit.StartGateway(t, cfg(upB), approverEnv, nil)
	a.WaitReady(t)
	b.WaitReady(t)

	c := a.NewClient(t)
	tid := c.CallTask(1, "delete_user", `{"user_id":"u-002"}`)

	// B sees the pending approval and records the decision.
	if st, view := b.AdminRequest(t, "GET", "/api/v1/approvals/"+tid, "alice-secret-token", ""); st != 200 || view["tool"] != "delete_user" {
		t.Fatalf("replica B does not see the task: %d %v", st, view)
	}
	if st, _ := b.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/approve", "alice-secret-token", `{}`); st != 200 {
		t.Fatalf("approve on B: %d", st)
	}
	m := c.TaskRPC(2, "tasks/result", tid).Message(t)
	if m["result"] == nil {
		t.Fatalf("tasks/result on A after approval on B: %v", m)
	}
	if dA.Calls("delete_user") != 1 || dB.Calls("delete_user") != 0 {
		t.Errorf("executions: replica A's upstream %d (want 1), replica B's %d (want 0)", dA.Calls("delete_user"), dB.Calls("delete_user"))
	}
	// A second decision on A loses to B's.
	if st, _ := a.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/reject", "bob-secret-token", `{"reason":"late"}`); st != 409 {
		t.Errorf("late reject on A: %d, want 409", st)
	}
}

// TestSharedStoreAdoptsDeadlines: when the replica that created a task is gone, another
// replica sharing the store still applies its approval timeout.
func TestSharedStoreAdoptsDeadlines(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the adoption poll (about 10 s)")
	}
	url := storetest.RedisURL(t)
	cfg := func(up string) string {
		return testkit.BasicConfig(up, approvalRules+"tasks:\n  store: {type: redis, url: \""+url+"?key_prefix=ha-adopt:\"}\n")
	}
	_, upA := testkit.StartDemo(t)
	_, upB := testkit.StartDemo(t)
	a := testkit.StartGateway(t, cfg(upA), approverEnv, nil)
	b := testkit.StartGateway(t, cfg(upB), approverEnv, nil)
	a.WaitReady(t)
	b.WaitReady(t)
	c := a.NewClient(t)
	tid := c.CallTask(1, "list_users", `{}`) // workflow "quick": 400 ms, on_timeout deny
	a.Stop()
	// Nothing reads the task through B (a read would apply the deadline itself): only B's
	// adoption of orphaned deadlines can make B's audit log record the timeout.
	deadline := time.Now().Add(25 * time.Second)
	for time.Now().Before(deadline) {
		audit, _ := os.ReadFile(filepath.Join(b.Dir, "audit.log"))
		for _, line := range strings.Split(string(audit), "\n") {
			if strings.Contains(line, tid) && strings.Contains(line, `"kind":"timed_out"`) {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal("replica B did not time out the orphaned task on its own")
}
