package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// taskUpstream is an mcp-go server that declares tasks.requests.tools.call, with one
// task-capable tool (analyze, optional) and plain tools.
type taskUpstream struct {
	url      string
	analyze  atomic.Int32
	plain    atomic.Int32
	shutdown func()
}

func startTaskUpstream(t *testing.T, addr string, withTasks bool) *taskUpstream {
	t.Helper()
	u := &taskUpstream{}
	opts := []server.ServerOption{server.WithToolCapabilities(true)}
	if withTasks {
		opts = append(opts, server.WithTaskCapabilities(true, true, true))
	}
	s := server.NewMCPServer("task-upstream", "1.0.0", opts...)
	if withTasks {
		s.AddTaskTool(mcp.NewTool("analyze", mcp.WithTaskSupport(mcp.TaskSupportOptional), mcp.WithString("data")),
			func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CreateTaskResult, error) {
				u.analyze.Add(1)
				return &mcp.CreateTaskResult{Content: []mcp.Content{mcp.NewTextContent("analyzed " + req.GetString("data", ""))}}, nil
			})
	} else {
		s.AddTool(mcp.NewTool("analyze", mcp.WithString("data")), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.analyze.Add(1)
			return mcp.NewToolResultText("analyzed " + req.GetString("data", "")), nil
		})
	}
	for _, name := range []string{"quick_check", "delete_record"} {
		name := name
		s.AddTool(mcp.NewTool(name, mcp.WithString("input")), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.plain.Add(1)
			return mcp.NewToolResultText(name + " ran with " + req.GetString("input", "")), nil
		})
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: server.NewStreamableHTTPServer(s)}
	go func() { _ = hs.Serve(ln) }()
	u.url = "http://" + ln.Addr().String() + "/mcp"
	u.shutdown = func() { _ = hs.Close() }
	t.Cleanup(u.shutdown)
	return u
}

const taskRules = `governance:
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve}
    - {match: "drop_*", action: deny}
approval:
  default: {timeout: 10m, on_timeout: deny}
tasks: {sync_approval: error} # these tests pin the TaskRequired contract (sync_approval error, the default before hold)
`

// mcpGoClient connects a real mcp-go client through the gateway.
func mcpGoClient(t *testing.T, url string) *client.Client {
	t.Helper()
	c, err := client.NewStreamableHttpClient(url)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: "2025-11-25", ClientInfo: mcp.Implementation{Name: "e2e-tasks", Version: "1"},
	}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// callWithTask sends a task-augmented tools/call through the client's transport and returns
// the raw result.
func callWithTask(t *testing.T, c *client.Client, tool string, args map[string]any, ttl int64) (json.RawMessage, *mcp.JSONRPCErrorDetails) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{
		JSONRPC: "2.0", ID: mcp.NewRequestId(time.Now().UnixNano()), Method: "tools/call",
		Params: map[string]any{"name": tool, "arguments": args, "task": map[string]any{"ttl": ttl}},
	})
	if err != nil {
		t.Fatalf("tools/call %s: %v", tool, err)
	}
	if resp.Error != nil {
		return nil, resp.Error
	}
	return resp.Result, nil
}

func taskIDOf(t *testing.T, res json.RawMessage) string {
	t.Helper()
	var r struct {
		Task mcp.Task `json:"task"`
	}
	if err := json.Unmarshal(res, &r); err != nil || r.Task.TaskId == "" {
		t.Fatalf("not a CreateTaskResult: %s", res)
	}
	return r.Task.TaskId
}

func toolSupport(t *testing.T, c *client.Client) map[string]string {
	t.Helper()
	tools, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, tl := range tools.Tools {
		out[tl.Name] = string(tl.Execution.TaskSupport)
	}
	return out
}

// TestSEP1686UpstreamWithTasks covers seed §9.2 with a task-capable upstream: annotations,
// mixed ownership, forward+task+optional passthrough, tasks/list merge, isolation.
func TestSEP1686UpstreamWithTasks(t *testing.T) {
	up := startTaskUpstream(t, "127.0.0.1:0", true)
	g := testkit.StartGateway(t, testkit.BasicConfig(up.url, taskRules), nil, nil)
	g.WaitReady(t)
	a := mcpGoClient(t, g.MCP)

	caps := a.GetServerCapabilities()
	if caps.Tasks == nil || caps.Tools == nil {
		t.Fatalf("capabilities lost or tasks not injected: %+v", caps)
	}
	sup := toolSupport(t, a)
	want := map[string]string{"analyze": "optional", "quick_check": "optional", "delete_record": "required"}
	for k, v := range want {
		if sup[k] != v {
			t.Errorf("taskSupport[%s] = %q, want %q (all: %v)", k, sup[k], v, sup)
		}
	}

	// Forward + task + upstream-optional → the upstream owns the task.
	res, rpcErr := callWithTask(t, a, "analyze", map[string]any{"data": "x"}, 60000)
	if rpcErr != nil {
		t.Fatalf("analyze: %+v", rpcErr)
	}
	upID := taskIDOf(t, res)
	if strings.HasPrefix(upID, "tg_") {
		t.Fatalf("forward+optional should be the upstream's task, got %s", upID)
	}
	ctx := context.Background()
	got, err := a.TaskResult(ctx, mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: upID}})
	if err != nil {
		t.Fatalf("tasks/result of upstream task: %v", err)
	}
	if len(got.Content) == 0 || !strings.Contains(got.Content[0].(mcp.TextContent).Text, "analyzed x") {
		t.Errorf("upstream task result: %+v", got)
	}

	// Forward + task + upstream tool without task support → Tollgate runs it (accelerated).
	res, rpcErr = callWithTask(t, a, "quick_check", map[string]any{"input": "q"}, 60000)
	if rpcErr != nil {
		t.Fatalf("quick_check: %+v", rpcErr)
	}
	accID := taskIDOf(t, res)
	if !strings.HasPrefix(accID, "tg_") {
		t.Fatalf("accelerated task id %s", accID)
	}
	got, err = a.TaskResult(ctx, mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: accID}})
	if err != nil || len(got.Content) == 0 || !strings.Contains(got.Content[0].(mcp.TextContent).Text, "quick_check ran with q") {
		t.Fatalf("accelerated result: %+v %v", got, err)
	}

	// Approve → Tollgate task, held (upstream not called).
	res, rpcErr = callWithTask(t, a, "delete_record", map[string]any{"input": "r1"}, 60000)
	if rpcErr != nil {
		t.Fatal(rpcErr)
	}
	heldID := taskIDOf(t, res)
	before := up.plain.Load()

	// tasks/list merges Tollgate's and the upstream's tasks for this caller.
	list, err := a.ListTasks(ctx, mcp.ListTasksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, tk := range list.Tasks {
		ids[tk.TaskId] = true
	}
	for _, id := range []string{upID, accID, heldID} {
		if !ids[id] {
			t.Errorf("tasks/list lacks %s: %v", id, ids)
		}
	}

	// Another session sees none of them.
	b := mcpGoClient(t, g.MCP)
	for _, id := range []string{upID, heldID} {
		if _, err := b.GetTask(ctx, mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: id}}); err == nil || !strings.Contains(err.Error(), "32602") && !strings.Contains(strings.ToLower(err.Error()), "not found") {
			t.Errorf("foreign tasks/get %s: err=%v, want -32602", id, err)
		}
	}
	bl, err := b.ListTasks(ctx, mcp.ListTasksRequest{})
	if err == nil {
		for _, tk := range bl.Tasks {
			if tk.TaskId == heldID || tk.TaskId == accID {
				t.Errorf("session B lists A's task %s", tk.TaskId)
			}
		}
	}
	if up.plain.Load() != before {
		t.Errorf("approval-gated call reached the upstream before approval")
	}
}

// TestSEP1686UpstreamWithoutTasks: forward tools are forbidden, approval tools required,
// validation errors carry the contract's codes and names.
func TestSEP1686UpstreamWithoutTasks(t *testing.T) {
	up := startTaskUpstream(t, "127.0.0.1:0", false)
	g := testkit.StartGateway(t, testkit.BasicConfig(up.url, taskRules), nil, nil)
	g.WaitReady(t)
	c := &testkit.RPC{T: t, URL: g.MCP}
	init := c.Initialize()
	if testkit.Dig(init, "result", "capabilities", "tasks", "requests", "tools", "call") == nil {
		t.Fatalf("tasks capability not injected: %v", init)
	}
	r := c.Post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`).Message(t)
	for _, tl := range testkit.Dig(r, "result", "tools").([]any) {
		name := testkit.Dig(tl, "name").(string)
		ts := testkit.Dig(tl, "execution", "taskSupport")
		want := map[string]string{"analyze": "forbidden", "quick_check": "forbidden", "delete_record": "required"}[name]
		if want != "" && ts != want {
			t.Errorf("%s taskSupport = %v, want %s", name, ts, want)
		}
	}
	cases := []struct {
		name     string
		params   string
		code     float64
		errName  string
		upstream bool
	}{
		{"EC-SEP-001 malformed task", `{"name":"delete_record","arguments":{},"task":"soon"}`, -32602, "InvalidTaskMetadata", false},
		{"EC-SEP-002 ttl zero", `{"name":"delete_record","arguments":{},"task":{"ttl":0}}`, -32602, "InvalidTaskMetadata", false},
		{"ttl not integer", `{"name":"delete_record","arguments":{},"task":{"ttl":1.5}}`, -32602, "InvalidTaskMetadata", false},
		{"required without task", `{"name":"delete_record","arguments":{"input":"x"}}`, -32601, "TaskRequired", false},
		{"forbidden with task", `{"name":"analyze","arguments":{},"task":{"ttl":1000}}`, -32601, "TaskForbidden", false},
		{"case-variant key", `{"name":"analyze","Name":"delete_record","arguments":{}}`, -32602, "InvalidParams", false},
		{"plain forward", `{"name":"analyze","arguments":{"data":"d"}}`, 0, "", true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := up.analyze.Load() + up.plain.Load()
			m := c.Post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, 10+i, tc.params)).Message(t)
			code, name := testkit.ErrorOf(m)
			if code != tc.code || name != tc.errName {
				t.Fatalf("got %v %q, want %v %q: %v", code, name, tc.code, tc.errName, m)
			}
			if tc.errName == "TaskRequired" && testkit.Dig(m, "error", "data", "hint") == nil {
				t.Errorf("TaskRequired lacks data.hint")
			}
			if reached := up.analyze.Load()+up.plain.Load() != before; reached != tc.upstream {
				t.Errorf("upstream reached = %v, want %v", reached, tc.upstream)
			}
		})
	}
	// EC-SEP-003: ttl above max is clamped.
	m := c.Post(`{"jsonrpc":"2.0","id":40,"method":"tools/call","params":{"name":"delete_record","arguments":{},"task":{"ttl":999999999999}}}`).Message(t)
	if ttl := testkit.Dig(m, "result", "task", "ttl"); ttl != float64(24*time.Hour/time.Millisecond) {
		t.Errorf("ttl not clamped to max: %v", ttl)
	}
	// EC-SEP-005…007: unknown ids.
	for i, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		m := c.Post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{"taskId":"tg_00000000-0000-4000-8000-000000000000"}}`, 50+i, method)).Message(t)
		if code, _ := testkit.ErrorOf(m); code != -32602 {
			t.Errorf("%s unknown id: %v", method, m)
		}
	}
	// Upstream-looking id never created through this session → -32602, not forwarded.
	m = c.Post(`{"jsonrpc":"2.0","id":60,"method":"tasks/get","params":{"taskId":"someone-elses"}}`).Message(t)
	if code, _ := testkit.ErrorOf(m); code != -32602 {
		t.Errorf("unbound upstream id: %v", m)
	}
	// tasks/list with a bad cursor.
	m = c.Post(`{"jsonrpc":"2.0","id":61,"method":"tasks/list","params":{"cursor":"!!"}}`).Message(t)
	if code, _ := testkit.ErrorOf(m); code != -32602 {
		t.Errorf("bad cursor: %v", m)
	}
}

// TestUpstreamReconnectChangesCapabilities (EC-SEP-010): the upstream restarts on the same
// address with tasks support; a new handshake sees the change and annotations follow.
func TestUpstreamReconnectChangesCapabilities(t *testing.T) {
	up := startTaskUpstream(t, "127.0.0.1:0", false)
	addr := strings.TrimSuffix(strings.TrimPrefix(up.url, "http://"), "/mcp")
	g := testkit.StartGateway(t, testkit.BasicConfig(up.url, taskRules), nil, nil)
	g.WaitReady(t)
	if sup := toolSupport(t, mcpGoClient(t, g.MCP)); sup["quick_check"] != "forbidden" {
		t.Fatalf("before: quick_check = %q", sup["quick_check"])
	}
	up.shutdown()
	var up2 *taskUpstream
	deadline := time.Now().Add(5 * time.Second)
	for up2 == nil && time.Now().Before(deadline) {
		func() {
			defer func() { _ = recover() }()
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				time.Sleep(50 * time.Millisecond)
				return
			}
			ln.Close()
			up2 = startTaskUpstream(t, addr, true)
		}()
	}
	if up2 == nil {
		t.Skip("could not rebind the upstream address")
	}
	c := mcpGoClient(t, g.MCP)
	if c.GetServerCapabilities().Tasks == nil {
		t.Fatal("tasks capability missing after reconnect")
	}
	sup := toolSupport(t, c)
	if sup["quick_check"] != "optional" || sup["analyze"] != "optional" || sup["delete_record"] != "required" {
		t.Errorf("after reconnect with tasks: %v", sup)
	}
}
