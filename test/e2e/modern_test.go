package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// modernClient speaks protocol 2026-07-28 by hand: _meta on every request and the mirrored
// headers (spec 2026-07-28 transports "Request Metadata").
type modernClient struct {
	t     testing.TB
	url   string
	hdr   http.Header // extra headers (Authorization, identity)
	tasks bool        // declare the io.modelcontextprotocol/tasks extension
	caps  map[string]any
	http  *http.Client // nil = testkit.HTTPClient
}

func (c *modernClient) meta() map[string]any {
	caps := map[string]any{}
	for k, v := range c.caps {
		caps[k] = v
	}
	if c.tasks {
		caps["extensions"] = map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}
	}
	return map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientCapabilities": caps,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "e2e", "version": "1"},
	}
}

// do sends method with params (the _meta is added) and the standard headers; override
// replaces or (with "") removes headers after they are set.
func (c *modernClient) do(id int, method string, params map[string]any, override map[string]string) testkit.Reply {
	c.t.Helper()
	r, body := c.build(id, method, params, override)
	return r.Post(body)
}

// tryDo is do for goroutines other than the test's own: a failed POST is a Reply with
// status 0, for the test goroutine to report.
func (c *modernClient) tryDo(id int, method string, params map[string]any) testkit.Reply {
	r, body := c.build(id, method, params, nil)
	rep, err := r.TryPost(body)
	if err != nil {
		return testkit.Reply{Body: []byte(err.Error())}
	}
	return rep
}

// build makes the client and the body of do.
func (c *modernClient) build(id int, method string, params map[string]any, override map[string]string) (*testkit.RPC, string) {
	if params == nil {
		params = map[string]any{}
	}
	if _, ok := params["_meta"]; !ok {
		params["_meta"] = c.meta()
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	h := http.Header{}
	for k, v := range c.hdr {
		h[k] = v
	}
	h.Set("MCP-Protocol-Version", "2026-07-28")
	h.Set("Mcp-Method", method)
	for _, k := range []string{"name", "uri", "taskId"} {
		if v, ok := params[k].(string); ok {
			h.Set("Mcp-Name", v)
		}
	}
	for k, v := range override {
		if v == "" {
			h.Del(k)
		} else {
			h.Set(k, v)
		}
	}
	return &testkit.RPC{T: c.t, URL: c.url, Header: h, Client: c.http}, string(b)
}

func (c *modernClient) call(id int, method string, params map[string]any) map[string]any {
	c.t.Helper()
	return c.do(id, method, params, nil).Message(c.t)
}

// waitTask polls tasks/get (bounded) until the task leaves "working".
func (c *modernClient) waitTask(id string) map[string]any {
	c.t.Helper()
	for i := 0; i < 500; i++ {
		m := c.call(900+i, "tasks/get", map[string]any{"taskId": id})
		if s := testkit.Dig(m, "result", "status"); s != "working" {
			return m
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.t.Fatalf("task %s still working after 500 polls", id)
	return nil
}

const modernRules = `governance:
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve}
    - {match: "drop_*", action: deny}
    - {match: "transfer_*", action: approve, approval: ask}
approval:
  default: {timeout: 10m, on_timeout: deny}
  ask: {timeout: 10m, on_timeout: deny, destination: {type: elicitation}}
server:
  identity_header: X-User
tasks:
  sync_approval: error
`

// TestModernDiscover: server/discover through Tollgate in front of a modern upstream (the
// mcp-go v1.2.1 demo): both eras' versions, the upstream's capabilities and identity, plus the
// tasks extension (spec 2026-07-28 server/discover; tasks extension "Capability Negotiation").
func TestModernDiscover(t *testing.T) {
	_, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, modernRules), nil, nil)
	g.WaitReady(t)
	c := &modernClient{t: t, url: g.MCP}
	r := c.do(1, "server/discover", nil, nil)
	if r.Status != 200 {
		t.Fatalf("HTTP %d: %s", r.Status, r.Body)
	}
	m := r.Message(t)
	res, _ := m["result"].(map[string]any)
	if res["resultType"] != "complete" {
		t.Errorf("resultType = %v", res["resultType"])
	}
	sv := fmt.Sprint(res["supportedVersions"])
	if !strings.Contains(sv, "2026-07-28") || !strings.Contains(sv, "2025-11-25") {
		t.Errorf("supportedVersions = %v", sv)
	}
	if testkit.Dig(res, "capabilities", "extensions", "io.modelcontextprotocol/tasks") == nil || testkit.Dig(res, "capabilities", "tools") == nil {
		t.Errorf("capabilities = %v", res["capabilities"])
	}
	if testkit.Dig(res, "_meta", "io.modelcontextprotocol/serverInfo", "name") == nil {
		t.Errorf("no serverInfo in _meta: %v", res)
	}
}

// TestModernHeaderChecks: the 2026-07-28 transport's MUSTs, answered by Tollgate before any
// governance or upstream work (spec transports "Server Validation", versioning "Protocol
// Version Negotiation", tasks extension "Error Handling").
func TestModernHeaderChecks(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, modernRules), nil, nil)
	g.WaitReady(t)
	c := &modernClient{t: t, url: g.MCP, tasks: true}
	del := map[string]any{"name": "delete_user", "arguments": map[string]any{"user_id": "u-1"}}
	cases := []struct {
		name     string
		method   string
		params   map[string]any
		override map[string]string
		status   int
		code     float64
	}{
		{"Mcp-Name names another tool", "tools/call", del, map[string]string{"Mcp-Name": "read_file"}, 400, -32020},
		{"Mcp-Name missing", "tools/call", del, map[string]string{"Mcp-Name": ""}, 400, -32020},
		{"Mcp-Method differs", "tools/call", del, map[string]string{"Mcp-Method": "tools/list"}, 400, -32020},
		{"version header missing", "tools/call", del, map[string]string{"MCP-Protocol-Version": ""}, 400, -32020},
		{"legacy version header on a modern body", "tools/call", del, map[string]string{"MCP-Protocol-Version": "2025-11-25"}, 400, -32020},
		{"unsupported version", "server/discover", map[string]any{"_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion": "v999.0.0", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}},
			map[string]string{"MCP-Protocol-Version": "v999.0.0"}, 400, -32022},
		{"missing _meta", "tools/list", map[string]any{"_meta": nil}, nil, 400, -32602},
		{"tasks/result is not in the modern era", "tasks/result", map[string]any{"taskId": "tg_x"}, nil, 404, -32601},
		{"tasks/list is not in the modern era", "tasks/list", map[string]any{}, nil, 404, -32601},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c.t = t
			p := map[string]any{}
			for k, v := range tc.params {
				if v != nil {
					p[k] = v
				} else {
					p[k] = map[string]any{} // present but empty
				}
			}
			r := c.do(100+i, tc.method, p, tc.override)
			m := r.Message(t)
			code, _ := testkit.ErrorOf(m)
			if r.Status != tc.status || code != tc.code {
				t.Fatalf("HTTP %d code %v, want %d %v: %s", r.Status, code, tc.status, tc.code, r.Body)
			}
			if fmt.Sprint(m["id"]) != fmt.Sprint(100+i) {
				t.Errorf("error id %v, want the request's", m["id"])
			}
		})
	}
	if n := d.Calls("delete_user"); n != 0 {
		t.Fatalf("a refused request reached the upstream %d times", n)
	}
	if got := testkit.Dig(c.call(1, "tasks/result", map[string]any{"taskId": "tg_x"}), "error", "data", "error"); got != "MethodNotFound" {
		t.Errorf("tasks/result data.error = %v", got)
	}
}

// TestModernGovernance: tools/call of the modern era is governed like the legacy one; an
// approval becomes a tg_ task in the tasks extension's shape, owned without sessions.
func TestModernGovernance(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, modernRules), nil, nil)
	g.WaitReady(t)
	withTasks := &modernClient{t: t, url: g.MCP, tasks: true, hdr: http.Header{"Authorization": {"Bearer caller-one"}}}
	noTasks := &modernClient{t: t, url: g.MCP, hdr: http.Header{"Authorization": {"Bearer caller-one"}}}

	t.Run("forward", func(t *testing.T) {
		withTasks.t = t
		m := withTasks.call(1, "tools/call", map[string]any{"name": "read_file", "arguments": map[string]any{"path": "/etc/motd"}})
		if testkit.Dig(m, "result", "resultType") != "complete" || testkit.Dig(m, "result", "content") == nil {
			t.Fatalf("forwarded call: %v", m)
		}
	})
	t.Run("deny", func(t *testing.T) {
		withTasks.t = t
		m := withTasks.call(2, "tools/call", map[string]any{"name": "drop_table", "arguments": map[string]any{"table": "users"}})
		if code, name := testkit.ErrorOf(m); code != -32003 || name != "PolicyDenied" {
			t.Fatalf("denied call: %v", m)
		}
		if d.Calls("drop_table") != 0 {
			t.Fatal("denied call reached the upstream")
		}
	})
	t.Run("approval without the extension is -32021", func(t *testing.T) {
		noTasks.t = t
		r := noTasks.do(3, "tools/call", map[string]any{"name": "delete_user", "arguments": map[string]any{"user_id": "u-1"}}, nil)
		m := r.Message(t)
		if code, _ := testkit.ErrorOf(m); code != -32021 || r.Status != 400 {
			t.Fatalf("HTTP %d: %v", r.Status, m)
		}
		if testkit.Dig(m, "error", "data", "requiredCapabilities", "extensions", "io.modelcontextprotocol/tasks") == nil {
			t.Errorf("requiredCapabilities missing: %v", m)
		}
		if r := noTasks.do(4, "tasks/get", map[string]any{"taskId": "tg_x"}, nil); r.Status != 400 {
			t.Errorf("tasks/get without the extension: HTTP %d %s", r.Status, r.Body)
		}
	})
	t.Run("approve", func(t *testing.T) {
		withTasks.t = t
		m := withTasks.call(5, "tools/call", map[string]any{"name": "delete_user", "arguments": map[string]any{"user_id": "u-002"}})
		res, _ := m["result"].(map[string]any)
		tid, _ := res["taskId"].(string)
		if res["resultType"] != "task" || !strings.HasPrefix(tid, "tg_") || res["status"] != "working" || res["ttlMs"] == nil || res["pollIntervalMs"] == nil || res["task"] != nil {
			t.Fatalf("CreateTaskResult: %v", m)
		}
		// Every poll tells the requester that a human decides, and where (issue 19).
		waiting := "Awaiting approval by a human (workflow default): approve in the console at " + g.Admin + "/approvals or with `tollgate approvals approve " + tid + "`"
		if res["statusMessage"] != waiting {
			t.Errorf("CreateTaskResult statusMessage = %v, want %q", res["statusMessage"], waiting)
		}
		for poll := range 3 {
			got := withTasks.call(60+poll, "tasks/get", map[string]any{"taskId": tid})
			if testkit.Dig(got, "result", "resultType") != "complete" || testkit.Dig(got, "result", "status") != "working" ||
				testkit.Dig(got, "result", "statusMessage") != waiting {
				t.Fatalf("tasks/get while waiting (poll %d): %v", poll, got)
			}
		}
		// Another credential sees nothing; neither does an anonymous caller.
		other := &modernClient{t: t, url: g.MCP, tasks: true, hdr: http.Header{"Authorization": {"Bearer caller-two"}}}
		anon := &modernClient{t: t, url: g.MCP, tasks: true}
		for _, c := range []*modernClient{other, anon} {
			if code, name := testkit.ErrorOf(c.call(7, "tasks/get", map[string]any{"taskId": tid})); code != -32602 || name != "TaskNotFound" {
				t.Fatalf("foreign tasks/get: %v %v", code, name)
			}
		}
		if d.Calls("delete_user") != 0 {
			t.Fatal("executed before approval")
		}
		if st, _ := g.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/approve", testkit.AdminToken, `{"reason":"ok"}`); st != 200 {
			t.Fatalf("approve: HTTP %d", st)
		}
		done := withTasks.waitTask(tid)
		if testkit.Dig(done, "result", "status") != "completed" || testkit.Dig(done, "result", "result", "content") == nil {
			t.Fatalf("completed task: %v", done)
		}
		if n := d.Calls("delete_user"); n != 1 {
			t.Fatalf("executed %d times", n)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		withTasks.t = t
		m := withTasks.call(8, "tools/call", map[string]any{"name": "delete_user", "arguments": map[string]any{"user_id": "u-3"}})
		tid, _ := testkit.Dig(m, "result", "taskId").(string)
		ack := withTasks.call(9, "tasks/cancel", map[string]any{"taskId": tid})
		if testkit.Dig(ack, "result", "resultType") != "complete" {
			t.Fatalf("cancel ack: %v", ack)
		}
		if s := testkit.Dig(withTasks.call(10, "tasks/get", map[string]any{"taskId": tid}), "result", "status"); s != "cancelled" {
			t.Fatalf("status after cancel = %v", s)
		}
	})
	t.Run("rejected is failed with the JSON-RPC error inlined", func(t *testing.T) {
		withTasks.t = t
		m := withTasks.call(11, "tools/call", map[string]any{"name": "delete_user", "arguments": map[string]any{"user_id": "u-4"}})
		tid, _ := testkit.Dig(m, "result", "taskId").(string)
		if st, _ := g.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/reject", testkit.AdminToken, `{"reason":"no"}`); st != 200 {
			t.Fatalf("reject: HTTP %d", st)
		}
		got := withTasks.waitTask(tid)
		if testkit.Dig(got, "result", "status") != "failed" || testkit.Dig(got, "result", "error", "code") != float64(-32007) ||
			testkit.Dig(got, "result", "error", "data", "taskId") != tid {
			t.Fatalf("rejected task: %v; want -32007 naming data.taskId %s", got, tid)
		}
	})
}

// TestModernElicitationApproval: the elicitation destination asks the requester through the
// task itself: input_required with inputRequests, answered with tasks/update (tasks extension
// "Task Update Requests").
func TestModernElicitationApproval(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, modernRules), nil, nil)
	g.WaitReady(t)
	c := &modernClient{t: t, url: g.MCP, tasks: true, hdr: http.Header{"X-User": {"alice"}}}
	m := c.call(1, "tools/call", map[string]any{"name": "transfer_funds", "arguments": map[string]any{"from": "a", "to": "b", "amount": 5}})
	tid, _ := testkit.Dig(m, "result", "taskId").(string)
	if testkit.Dig(m, "result", "status") != "input_required" || testkit.Dig(m, "result", "inputRequests") != nil {
		t.Fatalf("CreateTaskResult: %v", m)
	}
	got := c.call(2, "tasks/get", map[string]any{"taskId": tid})
	q := testkit.Dig(got, "result", "inputRequests", "tollgate-approval")
	if testkit.Dig(q, "method") != "elicitation/create" || testkit.Dig(q, "params", "requestedSchema") == nil {
		t.Fatalf("inputRequests: %v", got)
	}
	ack := c.call(3, "tasks/update", map[string]any{"taskId": tid, "inputResponses": map[string]any{
		"unknown":           map[string]any{"x": 1},
		"tollgate-approval": map[string]any{"action": "accept", "content": map[string]any{"approve": true}}}})
	if testkit.Dig(ack, "result", "resultType") != "complete" {
		t.Fatalf("update ack: %v", ack)
	}
	done := c.waitTask(tid)
	if testkit.Dig(done, "result", "status") != "completed" || d.Calls("transfer_funds") != 1 {
		t.Fatalf("after approval: %v (calls %d)", done, d.Calls("transfer_funds"))
	}
}

// TestCrossEraTask: a task created in one era is readable and cancellable in the other when
// the owner (server.identity_header) matches, and by nobody else.
func TestCrossEraTask(t *testing.T) {
	_, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, modernRules), nil, nil)
	g.WaitReady(t)
	legacy := g.NewClient(t)
	legacy.Header = http.Header{"X-User": {"bob"}}
	tid := legacy.CallTask(1, "delete_user", `{"user_id":"u-9"}`)
	modern := &modernClient{t: t, url: g.MCP, tasks: true, hdr: http.Header{"X-User": {"bob"}}}
	if s := testkit.Dig(modern.call(2, "tasks/get", map[string]any{"taskId": tid}), "result", "status"); s != "working" {
		t.Fatalf("modern read of a legacy task: %v", s)
	}
	stranger := &modernClient{t: t, url: g.MCP, tasks: true, hdr: http.Header{"X-User": {"eve"}}}
	if code, _ := testkit.ErrorOf(stranger.call(3, "tasks/get", map[string]any{"taskId": tid})); code != -32602 {
		t.Fatalf("stranger read: %v", code)
	}
	// And back: a modern task read and cancelled by the legacy session of the same user.
	m := modern.call(4, "tools/call", map[string]any{"name": "delete_user", "arguments": map[string]any{"user_id": "u-10"}})
	mid, _ := testkit.Dig(m, "result", "taskId").(string)
	if s := testkit.Dig(legacy.TaskRPC(5, "tasks/get", mid).Message(t), "result", "status"); s != "working" {
		t.Fatalf("legacy read of a modern task: %v", s)
	}
	if s := testkit.Dig(legacy.TaskRPC(6, "tasks/cancel", mid).Message(t), "result", "status"); s != "cancelled" {
		t.Fatalf("legacy cancel of a modern task: %v", s)
	}
}

// TestModernHeldApproval: a 2026-07-28 client without the tasks extension gets the configured
// fallback (tasks.sync_approval hold): the call is held, then answered with a normal result
// naming the approval; the same call again after the approval attaches to it and returns the
// one execution's result.
func TestModernHeldApproval(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, `governance:
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve}
tasks: {sync_approval: hold, hold_budget: 100ms}
`), nil, nil)
	g.WaitReady(t)
	c := &modernClient{t: t, url: g.MCP, hdr: http.Header{"Authorization": {"Bearer holder"}}}
	args := map[string]any{"name": "delete_user", "arguments": map[string]any{"user_id": "u-7"}}
	m := c.call(1, "tools/call", args)
	ap, _ := testkit.Dig(m, "result", "_meta", "io.tollgate/approval").(map[string]any)
	tid, _ := ap["taskId"].(string)
	if testkit.Dig(m, "result", "resultType") != "complete" || !strings.HasPrefix(tid, "tg_") || d.Calls("delete_user") != 0 {
		t.Fatalf("held answer: %v", m)
	}
	if st, _ := g.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/approve", testkit.AdminToken, `{}`); st != 200 {
		t.Fatalf("approve: %d", st)
	}
	again := c.call(2, "tools/call", args)
	if testkit.Dig(again, "result", "resultType") != "complete" || testkit.Dig(again, "result", "content") == nil || d.Calls("delete_user") != 1 {
		t.Fatalf("retry after approval: %v (calls %d)", again, d.Calls("delete_user"))
	}
}

// TestModernOperatorSurfaces: a 2026-07-28 caller's task shows in Tollgate's own tools, the
// CLI, the audit log and the metrics like a legacy one.
func TestModernOperatorSurfaces(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, modernRules), nil, nil)
	g.WaitReady(t)
	c := &modernClient{t: t, url: g.MCP, tasks: true, hdr: http.Header{"X-User": {"alice"}}}
	m := c.call(1, "tools/call", map[string]any{"name": "delete_user", "arguments": map[string]any{"user_id": "u-002"}})
	tid, _ := testkit.Dig(m, "result", "taskId").(string)
	if tid == "" {
		t.Fatalf("no task: %v", m)
	}
	list := c.call(2, "tools/call", map[string]any{"name": "tollgate_list_tasks", "arguments": map[string]any{}})
	if testkit.Dig(list, "result", "resultType") != "complete" || !strings.Contains(fmt.Sprint(list["result"]), tid) {
		t.Fatalf("tollgate_list_tasks: %v", list)
	}

	bin := buildBinary(t)
	env := append(os.Environ(), "TOLLGATE_ADMIN_URL="+g.Admin, "TOLLGATE_ADMIN_TOKEN="+testkit.AdminToken)
	cli := func(args ...string) string {
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tollgate %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := cli("approvals", "list"); !strings.Contains(out, tid) || !strings.Contains(out, "delete_user") {
		t.Fatalf("approvals list:\n%s", out)
	}
	cli("approvals", "approve", tid, "--reason", "modern ok")
	if s := testkit.Dig(c.waitTask(tid), "result", "status"); s != "completed" || d.Calls("delete_user") != 1 {
		t.Fatalf("after CLI approval: %v", s)
	}
	res := c.call(3, "tools/call", map[string]any{"name": "tollgate_get_task_result", "arguments": map[string]any{"task_id": tid}})
	if testkit.Dig(res, "result", "resultType") != "complete" || testkit.Dig(res, "result", "isError") == true {
		t.Fatalf("tollgate_get_task_result: %v", res)
	}

	audit, err := os.ReadFile(filepath.Join(g.Dir, "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(audit), tid) || !strings.Contains(string(audit), `"approved"`) || strings.Contains(string(audit), "user:alice") {
		t.Fatalf("audit log:\n%s", audit)
	}

	c.do(4, "server/discover", nil, nil)
	c.do(5, "tools/call", map[string]any{"name": "read_file", "arguments": map[string]any{}}, map[string]string{"Mcp-Name": "other"})
	resp, err := http.Get(g.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`tollgate_requests_total{method="server/discover",outcome="ok"}`, `method="tools/call",outcome="header_mismatch"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
