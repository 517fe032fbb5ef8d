//go:build unix

package interop

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

const demoRules = `governance:
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve}
approval:
  default: {timeout: 10m, on_timeout: deny}
`

// TestTSClientDemoUpstream: the official TypeScript SDK client, through Tollgate, in front of
// the demo server (no task support upstream). Seed §9.2 with a real client.
func TestTSClientDemoUpstream(t *testing.T) {
	tc := needNode(t)
	d, upURL := testkit.StartDemo(t)
	g := startGateway(t, basicConfig(upURL, demoRules, "sync_approval: error"), nil)

	t.Run("approve, getTaskResult, listTasks", func(t *testing.T) {
		var approved []string
		before := d.Calls("delete_user")
		run := runTS(t, tc, g.MCP, "approve", func(e event) string {
			if e.name() == "awaitApproval" && d.Calls("delete_user") != before {
				t.Errorf("upstream called before approval")
			}
			return approver(t, g, &approved)(e)
		})
		defer func() {
			if t.Failed() {
				run.dump(t)
			}
		}()

		conn := run.find("connected")
		if dig(conn, "capabilities", "tasks", "requests", "tools", "call") == nil || dig(conn, "capabilities", "tasks", "list") == nil || dig(conn, "capabilities", "tasks", "cancel") == nil {
			t.Errorf("SDK does not see capabilities.tasks: %v", dig(conn, "capabilities"))
		}
		if dig(conn, "capabilities", "tools") == nil {
			t.Errorf("upstream tools capability lost: %v", dig(conn, "capabilities"))
		}
		sup := toolExecution(run.find("tools"))
		if sup["delete_user"] != "required" {
			t.Errorf("delete_user taskSupport = %q, want required", sup["delete_user"])
		}
		if sup["read_file"] != "forbidden" && sup["read_file"] != "" {
			t.Errorf("read_file taskSupport = %q, want forbidden (upstream without tasks)", sup["read_file"])
		}
		if _, ok := sup["tollgate_await_activity"]; !ok {
			t.Errorf("tollgate_* tools not appended: %v", sup)
		}

		created := run.find("taskCreated")
		tid, _ := dig(created, "task", "taskId").(string)
		if !strings.HasPrefix(tid, "tg_") || dig(created, "task", "status") != "working" {
			t.Fatalf("taskCreated: %v", created)
		}
		got := run.find("taskGet")
		if dig(got, "task", "status") != "working" || dig(got, "task", "statusMessage") != awaitingMessage(g, tid) {
			t.Errorf("getTask while held: %v", got)
		}
		if !listHas(run.find("listWhilePending"), tid) {
			t.Errorf("listTasks while pending lacks %s: %v", tid, run.find("listWhilePending"))
		}
		if len(approved) != 1 || approved[0] != tid {
			t.Fatalf("approved %v, want [%s]", approved, tid)
		}
		res := run.find("result")
		if res == nil || !strings.Contains(textOf(res["result"]), "u-002") {
			t.Errorf("callToolStream result: %v (stream error: %v)", res, run.find("streamError"))
		}
		tr := run.find("taskResult")
		if !strings.Contains(textOf(tr["result"]), "u-002") {
			t.Errorf("getTaskResult: %v", tr)
		}
		if dig(tr, "result", "_meta", "io.modelcontextprotocol/related-task", "taskId") != tid {
			t.Errorf("getTaskResult lacks related-task _meta: %v", tr)
		}
		if s := dig(run.find("taskFinal"), "task", "status"); s != "completed" {
			t.Errorf("final status %v", s)
		}
		if !listHas(run.find("list"), tid) {
			t.Errorf("listTasks lacks %s: %v", tid, run.find("list"))
		}
		if n := d.Calls("delete_user") - before; n != 1 {
			t.Errorf("upstream executions = %d, want 1", n)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		before := d.Calls("delete_user")
		run := runTS(t, tc, g.MCP, "cancel", nil)
		defer func() {
			if t.Failed() {
				run.dump(t)
			}
		}()
		c := run.find("cancelled")
		if dig(c, "task", "status") != "cancelled" || !strings.HasPrefix(dig(c, "task", "taskId").(string), "tg_") {
			t.Fatalf("cancelTask: %v / %v", c, run.find("cancelError"))
		}
		// The SDK's stream sees the terminal status and ends with its "was cancelled" error.
		if e := run.find("streamError"); e == nil || !strings.Contains(e["message"].(string), "cancelled") {
			t.Errorf("stream after cancel: %v", e)
		}
		// Cancel of a terminal task → -32602 (EC-SEP-008).
		if e := run.find("cancelAgainError"); e == nil || e["code"] != float64(-32602) {
			t.Errorf("second cancel: %v / %v", e, run.find("cancelAgain"))
		}
		if d.Calls("delete_user") != before {
			t.Errorf("cancelled call reached upstream")
		}
	})

	t.Run("plain call to required tool", func(t *testing.T) {
		before := d.Calls("delete_user")
		run := runTS(t, tc, g.MCP, "required", nil)
		defer func() {
			if t.Failed() {
				run.dump(t)
			}
		}()
		if g := run.find("sdkGuard"); g["refused"] != true {
			t.Errorf("SDK did not treat the tool as required: %v", g)
		}
		e := run.find("plainError")
		if e == nil {
			t.Fatalf("plain call succeeded: %v", run.find("plainResult"))
		}
		msg, _ := e["message"].(string)
		// The SDK prefixes "MCP error <code>: " to the server's message.
		msg = strings.TrimPrefix(msg, "MCP error -32601: ")
		if e["code"] != float64(-32601) || !strings.HasPrefix(msg, "TaskRequired:") || dig(e, "data", "error") != "TaskRequired" || dig(e, "data", "tool") != "delete_user" {
			t.Errorf("plain call error: %v", e)
		}
		if d.Calls("delete_user") != before {
			t.Errorf("plain call reached upstream")
		}
	})
}

// TestTSClientTaskUpstream: the SDK's task-augmented call to a tool of a task-capable upstream
// (mcp-go with task capabilities) returns the upstream's own task and result through Tollgate.
func TestTSClientTaskUpstream(t *testing.T) {
	tc := needNode(t)
	upURL, analyze := startTaskUpstream(t)
	g := startGateway(t, basicConfig(upURL, demoRules, "sync_approval: error"), nil)

	run := runTS(t, tc, g.MCP, "task", nil, "analyze", `{"data":"ts-sdk"}`)
	defer func() {
		if t.Failed() {
			run.dump(t)
		}
	}()
	sup := toolExecution(run.find("tools"))
	if sup["analyze"] != "optional" || sup["quick_check"] != "optional" || sup["delete_record"] != "required" {
		t.Errorf("taskSupport: %v", sup)
	}
	tid, _ := dig(run.find("taskCreated"), "task", "taskId").(string)
	if tid == "" || strings.HasPrefix(tid, "tg_") {
		t.Fatalf("want the upstream's task, got %q", tid)
	}
	if res := run.find("result"); !strings.Contains(textOf(res["result"]), "analyzed ts-sdk") {
		t.Errorf("stream result: %v / %v", res, run.find("streamError"))
	}
	if tr := run.find("taskResult"); !strings.Contains(textOf(tr["result"]), "analyzed ts-sdk") {
		t.Errorf("getTaskResult: %v", tr)
	}
	if !listHas(run.find("list"), tid) {
		t.Errorf("merged tasks/list lacks upstream task %s: %v", tid, run.find("list"))
	}
	if analyze.Load() != 1 {
		t.Errorf("upstream analyze executions = %d", analyze.Load())
	}

	// An upstream tool without task support becomes optional; Tollgate runs the task itself.
	run = runTS(t, tc, g.MCP, "task", nil, "quick_check", `{"input":"q"}`)
	tid, _ = dig(run.find("taskCreated"), "task", "taskId").(string)
	if !strings.HasPrefix(tid, "tg_") || !strings.Contains(textOf(run.find("taskResult")["result"]), "quick_check ran with q") {
		run.dump(t)
		t.Errorf("accelerated task through the SDK: %s", tid)
	}
}

// startTaskUpstream runs an mcp-go server with task capabilities: analyze is a task tool
// (optional), quick_check and delete_record are plain tools.
func startTaskUpstream(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	var analyze atomic.Int32
	s := mcpserver.NewMCPServer("task-upstream", "1.0.0", mcpserver.WithToolCapabilities(true), mcpserver.WithTaskCapabilities(true, true, true))
	s.AddTaskTool(mcp.NewTool("analyze", mcp.WithTaskSupport(mcp.TaskSupportOptional), mcp.WithString("data")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CreateTaskResult, error) {
			analyze.Add(1)
			return &mcp.CreateTaskResult{Content: []mcp.Content{mcp.NewTextContent("analyzed " + req.GetString("data", ""))}}, nil
		})
	for _, name := range []string{"quick_check", "delete_record"} {
		name := name
		s.AddTool(mcp.NewTool(name, mcp.WithString("input")), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(name + " ran with " + req.GetString("input", "")), nil
		})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: mcpserver.NewStreamableHTTPServer(s)}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return "http://" + ln.Addr().String() + "/mcp", &analyze
}

// listHas reports whether a listTasks event contains taskID.
func listHas(e event, taskID string) bool {
	tasks, _ := dig(e, "list", "tasks").([]any)
	for _, tk := range tasks {
		if dig(tk, "taskId") == taskID {
			return true
		}
	}
	return false
}

// awaitingMessage is the statusMessage of a task g holds for a human (docs/contract.md §2):
// what the SDK hands its caller while the approval is pending.
func awaitingMessage(g *testkit.Gateway, tid string) string {
	return "Awaiting approval by a human (workflow default): approve in the console at " + g.Admin +
		"/approvals or with `tollgate approvals approve " + tid + "`"
}
