//go:build unix

package interop

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// marker is put into server-everything's environment; its get-env tool prints the environment,
// so the marker proves an approved call really ran upstream.
const marker = "TOLLGATE_INTEROP_MARKER=marker-7f3c"

const everythingRules = `governance:
  defaults: {action: forward}
  rules:
    - {match: "get-env", action: approve}
approval:
  default: {timeout: 10m, on_timeout: deny}
`

// startEverything runs @modelcontextprotocol/server-everything in streamable HTTP mode on a
// free loopback port (loopback.mjs pins the bind address) and returns its MCP URL.
func startEverything(t *testing.T, tc toolchain) string {
	t.Helper()
	addr := freeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	preload, err := filepath.Abs("loopback.mjs")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, exited := startProc(t, "server-everything", []string{"PORT=" + port, marker},
		tc.node, "--import", preload, tc.everything, "streamableHttp")
	// GET /mcp without a session answers 400: good enough to know it listens.
	waitHTTP(t, "http://"+addr+"/mcp", exited)
	t.Logf("server-everything ready at %s in %s", addr, time.Since(start).Round(time.Millisecond))
	return "http://" + addr + "/mcp"
}

// notes collects notifications an mcp-go client receives.
type notes struct {
	mu   sync.Mutex
	list []mcp.JSONRPCNotification
}

func (n *notes) add(x mcp.JSONRPCNotification) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.list = append(n.list, x)
}

// wait returns the notifications of method matching keep once at least min arrived (or after
// the deadline, with what there is).
func (n *notes) wait(method string, keep func(map[string]any) bool, min int, within time.Duration) []map[string]any {
	deadline := time.Now().Add(within)
	for {
		var out []map[string]any
		n.mu.Lock()
		for _, x := range n.list {
			if x.Method != method {
				continue
			}
			b, _ := json.Marshal(x.Params)
			var p map[string]any
			_ = json.Unmarshal(b, &p)
			if keep == nil || keep(p) {
				out = append(out, p)
			}
		}
		n.mu.Unlock()
		if len(out) >= min || time.Now().After(deadline) {
			return out
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func mcpGoClient(t *testing.T, url string, n *notes) *client.Client {
	t.Helper()
	c, err := client.NewStreamableHttpClient(url, transport.WithContinuousListening())
	if err != nil {
		t.Fatal(err)
	}
	c.OnNotification(n.add)
	// The standalone GET listener lives on Start's context, so it must outlive this function.
	life, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	if err := c.Start(life); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: "2025-11-25", ClientInfo: mcp.Implementation{Name: "interop-mcp-go", Version: "1"},
	}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// rpcID numbers raw requests; small values, because server-everything (zod) rejects ids
// beyond 2^53 with -32700.
var rpcID atomic.Int64

// raw sends one request through the client's transport and returns the undecoded result, so
// assertions see the wire, not mcp-go's structs.
func raw(t *testing.T, c *client.Client, method string, params any) (map[string]any, *mcp.JSONRPCErrorDetails) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{
		JSONRPC: "2.0", ID: mcp.NewRequestId(1000 + rpcID.Add(1)), Method: method, Params: params,
	})
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	if resp.Error != nil {
		return nil, resp.Error
	}
	var m map[string]any
	if err := json.Unmarshal(resp.Result, &m); err != nil {
		t.Fatalf("%s result: %v: %s", method, err, resp.Result)
	}
	return m, nil
}

// TestServerEverythingThroughTollgate puts Tollgate in front of the reference server
// (which itself supports tasks) and drives it with mcp-go's client and the TypeScript SDK.
func TestServerEverythingThroughTollgate(t *testing.T) {
	tc := needNode(t)
	upURL := startEverything(t, tc)
	g := startGateway(t, basicConfig(upURL, everythingRules, "sync_approval: error"), nil)
	n := &notes{}
	c := mcpGoClient(t, g.MCP, n)
	ctx := context.Background()

	t.Run("initialize", func(t *testing.T) {
		caps := c.GetServerCapabilities()
		if caps.Tasks == nil || caps.Tools == nil || caps.Logging == nil || caps.Resources == nil || !caps.Resources.Subscribe {
			t.Errorf("capabilities: %+v", caps)
		}
	})

	t.Run("tools/list", func(t *testing.T) {
		res, rerr := raw(t, c, "tools/list", map[string]any{})
		if rerr != nil {
			t.Fatal(rerr)
		}
		tools, _ := res["tools"].([]any)
		sup := map[string]string{}
		var order []string
		for _, tl := range tools {
			name, _ := dig(tl, "name").(string)
			ts, ok := dig(tl, "execution", "taskSupport").(string)
			if !ok {
				t.Errorf("tool %s has no execution.taskSupport: %v", name, tl)
			}
			sup[name] = ts
			order = append(order, name)
		}
		t.Logf("taskSupport through Tollgate: %v", sup)
		// Upstream with tasks: forward tools become optional (docs/contract.md §2), the approval tool
		// required, the upstream's own required task tool stays required.
		want := map[string]string{"echo": "optional", "get-sum": "optional", "get-env": "required", "trigger-long-running-operation": "optional"}
		if _, ok := sup["simulate-research-query"]; ok {
			want["simulate-research-query"] = "required"
		}
		for k, v := range want {
			if sup[k] != v {
				t.Errorf("taskSupport[%s] = %q, want %q", k, sup[k], v)
			}
		}
		for _, tg := range []string{"tollgate_list_tasks", "tollgate_get_task", "tollgate_get_task_result", "tollgate_cancel_task", "tollgate_await_activity", "tollgate_answer_question"} {
			if _, ok := sup[tg]; !ok {
				t.Errorf("%s not appended (tools: %v)", tg, order)
			}
		}
		if len(order) > 0 && !strings.HasPrefix(order[len(order)-1], "tollgate_") {
			t.Errorf("tollgate_* tools not appended at the end: %v", order)
		}
	})

	t.Run("echo and get-sum", func(t *testing.T) {
		r, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "through tollgate"}}})
		if err != nil || r.IsError || len(r.Content) == 0 || !strings.Contains(r.Content[0].(mcp.TextContent).Text, "through tollgate") {
			t.Errorf("echo: %+v %v", r, err)
		}
		r, err = c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "get-sum", Arguments: map[string]any{"a": 2, "b": 40}}})
		if err != nil || r.IsError || len(r.Content) == 0 || !strings.Contains(r.Content[0].(mcp.TextContent).Text, "42") {
			t.Errorf("get-sum: %+v %v", r, err)
		}
	})

	t.Run("progress notifications", func(t *testing.T) {
		req := mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "trigger-long-running-operation", Arguments: map[string]any{"duration": 1, "steps": 3}}}
		req.Params.Meta = &mcp.Meta{ProgressToken: "interop-progress-1"}
		r, err := c.CallTool(ctx, req)
		if err != nil || r.IsError {
			t.Fatalf("long-running: %+v %v", r, err)
		}
		got := n.wait("notifications/progress", func(p map[string]any) bool { return p["progressToken"] == "interop-progress-1" }, 3, 2*time.Second)
		if len(got) != 3 {
			t.Errorf("progress notifications = %d, want 3: %v", len(got), got)
		}
	})

	t.Run("log notifications", func(t *testing.T) {
		if _, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "toggle-simulated-logging"}}); err != nil {
			t.Fatal(err)
		}
		defer func() {
			_, _ = c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "toggle-simulated-logging"}})
		}()
		// One message at once (if the GET stream is already open), then one every 5 s.
		if got := n.wait("notifications/message", nil, 1, 8*time.Second); len(got) == 0 {
			t.Errorf("no notifications/message on the standalone stream within 8s")
		}
	})

	t.Run("resources/list", func(t *testing.T) {
		var uris []string
		params := map[string]any{}
		for page := 0; page < 20; page++ {
			res, rerr := raw(t, c, "resources/list", params)
			if rerr != nil {
				t.Fatal(rerr)
			}
			for _, r := range res["resources"].([]any) {
				u, _ := dig(r, "uri").(string)
				uris = append(uris, u)
			}
			cur, _ := res["nextCursor"].(string)
			if cur == "" {
				break
			}
			params = map[string]any{"cursor": cur}
		}
		var diagrams, upstream bool
		for _, u := range uris {
			diagrams = diagrams || u == "tollgate://diagrams"
			upstream = upstream || strings.HasPrefix(u, "demo://")
		}
		if !diagrams || !upstream {
			t.Errorf("resources (diagrams %v, upstream %v): %v", diagrams, upstream, uris)
		}
		rr, err := c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: "tollgate://diagrams"}})
		if err != nil || len(rr.Contents) == 0 {
			t.Errorf("read tollgate://diagrams: %v", err)
		}
	})

	t.Run("approval-gated get-env", func(t *testing.T) {
		if _, rerr := raw(t, c, "tools/call", map[string]any{"name": "get-env", "arguments": map[string]any{}}); rerr == nil || rerr.Code != -32601 || !strings.HasPrefix(rerr.Message, "TaskRequired") {
			t.Errorf("plain call of required tool: %+v", rerr)
		}
		res, rerr := raw(t, c, "tools/call", map[string]any{"name": "get-env", "arguments": map[string]any{}, "task": map[string]any{"ttl": 60000}})
		if rerr != nil {
			t.Fatal(rerr)
		}
		tid, _ := dig(res, "task", "taskId").(string)
		if !strings.HasPrefix(tid, "tg_") || dig(res, "task", "status") != "working" {
			t.Fatalf("task-augmented get-env: %v", res)
		}
		got, err := c.GetTask(ctx, mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: tid}})
		if err != nil || got.Status != mcp.TaskStatusWorking || got.StatusMessage != awaitingMessage(g, tid) {
			t.Errorf("tasks/get while held: %+v %v", got, err)
		}
		approve(t, g, tid)
		tr, err := c.TaskResult(ctx, mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: tid}})
		if err != nil || len(tr.Content) == 0 {
			t.Fatalf("tasks/result: %+v %v", tr, err)
		}
		if !strings.Contains(tr.Content[0].(mcp.TextContent).Text, "marker-7f3c") {
			t.Errorf("get-env result does not come from server-everything")
		}
	})

	t.Run("plain call of the upstream's required task tool", func(t *testing.T) {
		res, rerr := raw(t, c, "tools/call", map[string]any{"name": "simulate-research-query", "arguments": map[string]any{"topic": "x"}})
		// Tollgate answers for the upstream (docs/contract.md §2: required without task → -32601).
		if rerr == nil || rerr.Code != -32601 || !strings.HasPrefix(rerr.Message, "TaskRequired:") {
			t.Errorf("plain call of simulate-research-query: result %v, error %+v", res, rerr)
		}
	})

	t.Run("TS SDK", func(t *testing.T) {
		t.Run("approval-gated get-env", func(t *testing.T) {
			var approved []string
			run := runTS(t, tc, g.MCP, "approve", approver(t, g, &approved), "get-env", "{}")
			tid, _ := dig(run.find("taskCreated"), "task", "taskId").(string)
			if !strings.HasPrefix(tid, "tg_") || len(approved) != 1 ||
				dig(run.find("taskGet"), "task", "statusMessage") != awaitingMessage(g, tid) ||
				!strings.Contains(textOf(run.find("taskResult")["result"]), "marker-7f3c") || !listHas(run.find("list"), tid) {
				run.dump(t)
				t.Errorf("get-env through the SDK (task %s, approved %v)", tid, approved)
			}
		})
		t.Run("upstream task tool", func(t *testing.T) {
			run := runTS(t, tc, g.MCP, "task", nil, "simulate-research-query", `{"topic":"tollgate"}`)
			tid, _ := dig(run.find("taskCreated"), "task", "taskId").(string)
			if tid == "" || strings.HasPrefix(tid, "tg_") || !strings.Contains(textOf(run.find("taskResult")["result"]), "tollgate") || !listHas(run.find("list"), tid) {
				run.dump(t)
				t.Errorf("simulate-research-query through the SDK: task %q", tid)
			}
		})
		t.Run("accelerated task", func(t *testing.T) {
			run := runTS(t, tc, g.MCP, "task", nil, "echo", `{"message":"sdk-task"}`)
			tid, _ := dig(run.find("taskCreated"), "task", "taskId").(string)
			if !strings.HasPrefix(tid, "tg_") || !strings.Contains(textOf(run.find("taskResult")["result"]), "sdk-task") {
				run.dump(t)
				t.Errorf("echo as a task through the SDK: task %q", tid)
			}
		})
		t.Run("progress", func(t *testing.T) {
			run := runTS(t, tc, g.MCP, "progress", nil, "trigger-long-running-operation", `{"duration":1,"steps":2}`)
			if len(run.all("progress")) != 2 || !strings.Contains(textOf(run.find("result")["result"]), "completed") {
				run.dump(t)
				t.Errorf("progress through the SDK")
			}
		})
	})
}
