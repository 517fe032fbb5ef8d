package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/tasks/store/storetest"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// TestModernTaskAnyReplica: a 2026-07-28 task has no upstream session, so with a shared store
// any replica serves it (the client routes on Mcp-Name: tg_…) and any replica may execute it
// once approved — here replica B, after the replica that created it is gone.
func TestModernTaskAnyReplica(t *testing.T) {
	url := storetest.RedisURL(t) // skips loudly without redis-server
	cfg := func(up string) string {
		return testkit.BasicConfig(up, approvalRules+"tasks:\n  store: {type: redis, url: \""+url+"?key_prefix=ha-modern-"+strings.ReplaceAll(t.Name(), "/", "-")+":\"}\n")
	}
	dA, upA := testkit.StartDemo(t)
	dB, upB := testkit.StartDemo(t)
	a := testkit.StartGateway(t, cfg(upA), approverEnv, nil)
	b := testkit.StartGateway(t, cfg(upB), approverEnv, nil)
	a.WaitReady(t)
	b.WaitReady(t)
	hdr := http.Header{"Authorization": {"Bearer ha-caller"}}
	onA := &modernClient{t: t, url: a.MCP, tasks: true, hdr: hdr}
	onB := &modernClient{t: t, url: b.MCP, tasks: true, hdr: hdr}
	m := onA.call(1, "tools/call", map[string]any{"name": "delete_user", "arguments": map[string]any{"user_id": "u-002"}})
	tid, _ := testkit.Dig(m, "result", "taskId").(string)
	if !strings.HasPrefix(tid, "tg_") {
		t.Fatalf("no task: %v", m)
	}
	if s := testkit.Dig(onB.call(2, "tasks/get", map[string]any{"taskId": tid}), "result", "status"); s != "working" {
		t.Fatalf("replica B does not serve the task: %v", s)
	}
	a.Stop()
	if st, _ := b.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/approve", "alice-secret-token", `{}`); st != 200 {
		t.Fatalf("approve on B: %d", st)
	}
	if s := testkit.Dig(onB.waitTask(tid), "result", "status"); s != "completed" {
		t.Fatalf("task after approval on B: %v", s)
	}
	if dA.Calls("delete_user") != 0 || dB.Calls("delete_user") != 1 {
		t.Errorf("executions: A's upstream %d (want 0), B's %d (want 1)", dA.Calls("delete_user"), dB.Calls("delete_user"))
	}
}

// TestModernUpstreamTaskAnyReplica: an upstream task (SEP-2663 CreateTaskResult) created
// through replica A is bound to its creator in the shared store: replica B serves tasks/get
// for that owner and answers "not found" to another caller, as A does. It used to live in A's
// memory only (B answered "not found" to the owner too).
func TestModernUpstreamTaskAnyReplica(t *testing.T) {
	url := storetest.RedisURL(t) // skips loudly without redis-server
	up := startFixture(t)        // the modern fixture, in front of both replicas
	cfg := testkit.BasicConfig(up, "governance:\n  defaults: {action: forward}\ntasks:\n  store: {type: redis, url: \""+url+"?key_prefix=ha-uptask-"+strings.ReplaceAll(t.Name(), "/", "-")+":\"}\n")
	a := testkit.StartGateway(t, cfg, approverEnv, nil)
	b := testkit.StartGateway(t, cfg, approverEnv, nil)
	a.WaitReady(t)
	b.WaitReady(t)
	ownerA := &modernClient{t: t, url: a.MCP, tasks: true, hdr: http.Header{"Authorization": {"Bearer one"}}}
	ownerB := &modernClient{t: t, url: b.MCP, tasks: true, hdr: http.Header{"Authorization": {"Bearer one"}}}
	otherB := &modernClient{t: t, url: b.MCP, tasks: true, hdr: http.Header{"Authorization": {"Bearer two"}}}
	m := ownerA.call(1, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 0, "label": "ha"}})
	tid, _ := testkit.Dig(m, "result", "taskId").(string)
	if testkit.Dig(m, "result", "resultType") != "task" || tid == "" || strings.HasPrefix(tid, "tg_") {
		t.Fatalf("upstream CreateTaskResult: %v", m)
	}
	if code, _ := testkit.ErrorOf(otherB.call(2, "tasks/get", map[string]any{"taskId": tid})); code != -32602 {
		t.Fatalf("another caller reached the upstream task through B: %v", code)
	}
	done := ownerB.waitTask(tid)
	if testkit.Dig(done, "result", "status") != "completed" {
		t.Fatalf("the owner through B: %v", done)
	}
}
