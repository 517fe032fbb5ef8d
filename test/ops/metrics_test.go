package ops

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// governedConfig: read_* forwarded, delete_* held for approval, drop_* denied.
const governedRules = `governance:
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve}
    - {match: "drop_*",   action: deny}
approval:
  default:
    destination: {type: console}
    timeout: 5m
approvers: [{name: alice, token_env: ALICE_TOKEN}]
tasks: {sync_approval: error} # these tests pin the TaskRequired contract (sync_approval error, the default before hold)
`

// scrape GETs /metrics; it returns the raw text and the parsed families.
func scrape(t *testing.T, g *testkit.Gateway) ([]byte, map[string]*dto.MetricFamily) {
	t.Helper()
	resp, err := http.Get(g.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: HTTP %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return raw, mfs
}

// value sums the samples of family name whose labels include want (counters, gauges; for
// histograms the observation count).
func value(mfs map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	mf := mfs[name]
	if mf == nil {
		return 0
	}
	var sum float64
next:
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			sum += m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			sum += m.GetGauge().GetValue()
		case dto.MetricType_HISTOGRAM:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

type l = map[string]string

// TestMetricsEndToEnd runs initialize, tools/list, a forwarded, a denied and an approved call
// (task created, approved through the admin API, tasks/result) and checks the scrape moved.
func TestMetricsEndToEnd(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, governedRules), map[string]string{"ALICE_TOKEN": "ops-alice-token-0123"}, nil)
	g.WaitReady(t)
	_, before := scrape(t, g)

	c := g.NewClient(t)
	if m := c.Post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`).Message(t); testkit.Dig(m, "result", "tools") == nil {
		t.Fatalf("tools/list: %v", m)
	}
	if m := c.Call(2, "read_file", map[string]any{"path": "/etc/motd"}, 0); m["result"] == nil {
		t.Fatalf("forwarded call: %v", m)
	}
	if m := c.Call(3, "drop_table", map[string]any{"table": "users"}, 0); m["error"] == nil {
		t.Fatalf("drop_table was not denied: %v", m)
	}
	m := c.Call(4, "delete_user", map[string]any{"user_id": "u-002"}, 60000)
	taskID, _ := testkit.Dig(m, "result", "task", "taskId").(string)
	if taskID == "" {
		t.Fatalf("delete_user with a task: %v", m)
	}
	if _, held := scrape(t, g); value(held, "tollgate_pending_tasks", l{"workflow": "default"}) != 1 {
		t.Errorf("tollgate_pending_tasks{workflow=\"default\"} = %v while the task waits, want 1",
			value(held, "tollgate_pending_tasks", l{"workflow": "default"}))
	}
	if code, ans := g.AdminRequest(t, http.MethodPost, "/api/v1/approvals/"+taskID+"/approve", "ops-alice-token-0123", `{"reason":"ops test"}`); code != 200 {
		t.Fatalf("approve: HTTP %d %v", code, ans)
	}
	res := c.Post(`{"jsonrpc":"2.0","id":5,"method":"tasks/result","params":{"taskId":"` + taskID + `"}}`).Message(t)
	if res["result"] == nil || d.Calls("delete_user") != 1 {
		t.Fatalf("tasks/result: %v (upstream calls %v)", res, d.AllCalls())
	}

	raw, after := scrape(t, g)
	delta := func(name string, labels l) float64 { return value(after, name, labels) - value(before, name, labels) }
	checks := []struct {
		what string
		got  float64
		want float64
		min  bool // got >= want
	}{
		{"decisions deny", delta("tollgate_decisions_total", l{"action": "deny"}), 1, false},
		{"decisions forward", delta("tollgate_decisions_total", l{"action": "forward"}), 1, false},
		{"decisions approve", delta("tollgate_decisions_total", l{"action": "approve"}), 1, false},
		{"requests tools/call", delta("tollgate_requests_total", l{"method": "tools/call"}), 3, false},
		{"requests tools/list", delta("tollgate_requests_total", l{"method": "tools/list"}), 1, false},
		{"requests initialize", delta("tollgate_requests_total", l{"method": "initialize"}), 1, false},
		{"requests tasks/result", delta("tollgate_requests_total", l{"method": "tasks/result"}), 1, false},
		{"duration tools/call observed", delta("tollgate_request_duration_seconds", l{"method": "tools/call"}), 3, false},
		{"upstream ok", delta("tollgate_upstream_requests_total", l{"outcome": "ok"}), 1, true},
		{"tasks completed", value(after, "tollgate_tasks", l{"state": "completed"}), 1, false},
		{"tasks awaiting", value(after, "tollgate_tasks", l{"state": "awaiting_approval"}), 0, false},
		{"approval wait observed", delta("tollgate_approval_wait_seconds", nil), 1, false},
		{"task executions completed", delta("tollgate_task_executions_total", l{"result": "completed"}), 1, false},
		{"upstream up", value(after, "tollgate_upstream_up", nil), 1, false},
		{"build info", value(after, "tollgate_build_info", l{"version": "test"}), 1, false},
		{"tools by annotation (some)", value(after, "tollgate_tools_by_annotation", nil), 1, true},
		{"pending (none left)", value(after, "tollgate_pending_tasks", nil), 0, false},
	}
	{
		checks = append(checks, []struct {
			what string
			got  float64
			want float64
			min  bool
		}{
			{"tool calls read_file forward", delta("tollgate_tool_calls_total", l{"tool": "read_file", "action": "forward"}), 1, false},
			{"tool calls drop_table deny", delta("tollgate_tool_calls_total", l{"tool": "drop_table", "action": "deny"}), 1, false},
			{"tool calls delete_user approve", delta("tollgate_tool_calls_total", l{"tool": "delete_user", "action": "approve"}), 1, false},
			{"active sessions", value(after, "tollgate_active_sessions", nil), 1, true},
			{"upstream POST timed", delta("tollgate_upstream_request_duration_seconds", l{"http_method": "POST"}), 2, true},
		}...)
	}
	for _, ck := range checks {
		if ck.min && ck.got < ck.want || !ck.min && ck.got != ck.want {
			t.Errorf("%s: got %v, want %s%v", ck.what, ck.got, map[bool]string{true: ">= ", false: ""}[ck.min], ck.want)
		}
	}

	checkDocumented(t, after)
	t.Run("promtool", func(t *testing.T) { promtoolCheck(t, raw) })
}

// docNames are the metric names in the table of docs/metrics.md (rows starting "| `tollgate_").
func docNames(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\|\\s*`(tollgate_[a-z0-9_]+)`")
	out := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		if out[m[1]] {
			t.Errorf("docs/metrics.md lists %s twice", m[1])
		}
		out[m[1]] = true
	}
	if len(out) == 0 {
		t.Fatal("docs/metrics.md has no metric table")
	}
	return out
}

// checkDocumented: every family the server exposes (but the Go runtime's and process
// collectors') is in docs/metrics.md, and every documented one is exposed (docs/contract.md §5.8).
func checkDocumented(t *testing.T, mfs map[string]*dto.MetricFamily) {
	t.Helper()
	docs := docNames(t)
	var undocumented, missing []string
	for name := range mfs {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") || strings.HasPrefix(name, "promhttp_") {
			continue
		}
		if !docs[name] {
			undocumented = append(undocumented, name)
		}
	}
	for name := range docs {
		if mfs[name] == nil {
			missing = append(missing, name)
		}
	}
	sort.Strings(undocumented)
	sort.Strings(missing)
	if len(undocumented) > 0 {
		t.Errorf("exposed but not in docs/metrics.md: %v", undocumented)
	}
	if len(missing) > 0 {
		t.Errorf("in docs/metrics.md but not exposed: %v", missing)
	}
}

// promtoolCheck lints the scrape with `promtool check metrics` (Debian package "prometheus").
func promtoolCheck(t *testing.T, raw []byte) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("SKIPPED: promtool not on PATH; install it with `apt-get install prometheus` to lint the scrape")
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = bytes.NewReader(raw)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
