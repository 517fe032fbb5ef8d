package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/tasks/store/storetest"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// TestUpstreamTaskBindingsBoundedPerSource: two replicas share a Redis store, callers are told
// apart by server.identity_header (a sidecar: one address for all), and each identity may keep
// 3 upstream task bindings (tasks.quotas.max_upstream_tasks_per_source). An identity creating
// upstream task after task through replica A makes room with its own oldest bindings only:
// the quiet identity's upstream task stays reachable for it through A and through B (which
// knows it from the store alone), the flood's oldest is "not found" on both, its newest is
// served. A counts what gave way in memory and in the store.
func TestUpstreamTaskBindingsBoundedPerSource(t *testing.T) {
	url := storetest.RedisURL(t) // skips loudly without redis-server
	up := startFixture(t)        // the modern fixture, in front of both replicas
	cfg := testkit.BasicConfig(up, `governance:
  defaults: {action: forward}
server:
  identity_header: X-Test-User
tasks:
  quotas: {max_upstream_tasks_per_source: 3, max_upstream_tasks_total: 5}
  store: {type: redis, url: "`+url+`?key_prefix=ha-utbound-`+strings.ReplaceAll(t.Name(), "/", "-")+`:"}
`)
	a := testkit.StartGateway(t, cfg, approverEnv, nil)
	b := testkit.StartGateway(t, cfg, approverEnv, nil)
	a.WaitReady(t)
	b.WaitReady(t)
	client := func(g *testkit.Gateway, who string) *modernClient {
		return &modernClient{t: t, url: g.MCP, tasks: true, hdr: http.Header{"X-Test-User": {who}}}
	}
	create := func(c *modernClient, id int, label string) string {
		t.Helper()
		m := c.call(id, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 0, "label": label}})
		tid, _ := testkit.Dig(m, "result", "taskId").(string)
		if testkit.Dig(m, "result", "resultType") != "task" || tid == "" || strings.HasPrefix(tid, "tg_") {
			t.Fatalf("upstream CreateTaskResult: %v", m)
		}
		return tid
	}
	reachable := func(c *modernClient, tid string) bool {
		t.Helper()
		m := c.call(50, "tasks/get", map[string]any{"taskId": tid})
		if code, _ := testkit.ErrorOf(m); code != 0 {
			if code != -32602 {
				t.Fatalf("tasks/get %s: %v", tid, m)
			}
			return false
		}
		return testkit.Dig(m, "result", "taskId") == tid
	}

	quiet := create(client(a, "quiet"), 1, "quiet")
	floodA := client(a, "flood")
	var flood []string
	for i := range 5 {
		flood = append(flood, create(floodA, 10+i, "flood"))
	}
	for _, g := range []*testkit.Gateway{a, b} {
		if !reachable(client(g, "quiet"), quiet) {
			t.Errorf("%s: the flood made the quiet identity's upstream task not found", g.MCP)
		}
		for i, tid := range flood {
			if got, want := reachable(client(g, "flood"), tid), i >= 2; got != want {
				t.Errorf("%s: the flood's task %d reachable %v, want %v (3 kept)", g.MCP, i, got, want)
			}
		}
		if reachable(client(g, "mallory"), quiet) {
			t.Errorf("%s: another identity reached the quiet identity's upstream task", g.MCP)
		}
	}

	resp, err := testkit.HTTPClient.Get(a.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`tollgate_upstream_task_bindings_evicted_total{reason="source_share",table="memory"} 2`,
		`tollgate_upstream_task_bindings_evicted_total{reason="source_share",table="store"} 2`,
		`tollgate_upstream_task_bindings_evicted_total{reason="total",table="store"} 0`,
		"\ntollgate_upstream_task_bindings 4\n", // quiet's 1 and the flood's 3
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("replica A's metrics lack %q", want)
		}
	}
}
