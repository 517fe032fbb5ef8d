package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/tollgate-mcp/tollgate/test/fixture/modern"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// startFixture serves the modern fixture upstream (mcp-go v1.2.1 with the tasks extension) on
// loopback.
func startFixture(t *testing.T) string {
	t.Helper()
	h, stop := modern.NewHandler(modern.Options{FailDelay: -1})
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		ts.Close()
		stop()
	})
	return ts.URL + "/mcp"
}

// startFixtureOnce is startFixture memoised per test (a config built twice names one upstream).
func startFixtureOnce(t *testing.T) string {
	t.Helper()
	if u, ok := fixtures.Load(t.Name()); ok {
		return u.(string)
	}
	u := startFixture(t)
	fixtures.Store(t.Name(), u)
	return u
}

var fixtures sync.Map

// TestModernUpstreamTasks: SEP-2663 tasks the upstream creates pass through Tollgate bound to
// the caller that created them; their lifecycle (inlined result, JSON-RPC failure, isError,
// input_required answered with tasks/update) is the upstream's, unchanged.
func TestModernUpstreamTasks(t *testing.T) {
	g := testkit.StartGateway(t, testkit.BasicConfig(startFixture(t), "governance:\n  defaults: {action: forward}\n"), nil, nil)
	g.WaitReady(t)
	owner := &modernClient{t: t, url: g.MCP, tasks: true, hdr: http.Header{"Authorization": {"Bearer one"}}}
	other := &modernClient{t: t, url: g.MCP, tasks: true, hdr: http.Header{"Authorization": {"Bearer two"}}}

	t.Run("completed, bound to its creator", func(t *testing.T) {
		owner.t, other.t = t, t
		m := owner.call(1, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 0, "label": "a"}})
		tid, _ := testkit.Dig(m, "result", "taskId").(string)
		if testkit.Dig(m, "result", "resultType") != "task" || tid == "" || strings.HasPrefix(tid, "tg_") {
			t.Fatalf("upstream CreateTaskResult: %v", m)
		}
		if code, _ := testkit.ErrorOf(other.call(2, "tasks/get", map[string]any{"taskId": tid})); code != -32602 {
			t.Fatalf("another caller reached the upstream task: %v", code)
		}
		done := owner.waitTask(tid)
		if testkit.Dig(done, "result", "status") != "completed" || !strings.Contains(testkit.Dig(done, "result", "result", "content").([]any)[0].(map[string]any)["text"].(string), "slow_compute(a)") {
			t.Fatalf("completed upstream task: %v", done)
		}
	})
	t.Run("failed with the JSON-RPC error", func(t *testing.T) {
		owner.t = t
		m := owner.call(3, "tools/call", map[string]any{"name": "protocol_error_job", "arguments": map[string]any{}})
		tid, _ := testkit.Dig(m, "result", "taskId").(string)
		done := owner.waitTask(tid)
		if testkit.Dig(done, "result", "status") != "failed" || testkit.Dig(done, "result", "error", "code") == nil {
			t.Fatalf("protocol_error_job: %v", done)
		}
	})
	t.Run("isError is completed", func(t *testing.T) {
		owner.t = t
		m := owner.call(4, "tools/call", map[string]any{"name": "failing_job", "arguments": map[string]any{}})
		tid, _ := testkit.Dig(m, "result", "taskId").(string)
		done := owner.waitTask(tid)
		if testkit.Dig(done, "result", "status") != "completed" || testkit.Dig(done, "result", "result", "isError") != true {
			t.Fatalf("failing_job: %v", done)
		}
	})
	t.Run("required task without the extension is the upstream's -32021", func(t *testing.T) {
		plain := &modernClient{t: t, url: g.MCP}
		r := plain.do(5, "tools/call", map[string]any{"name": "failing_job", "arguments": map[string]any{}}, nil)
		if code, _ := testkit.ErrorOf(r.Message(t)); code != -32021 || r.Status != 400 {
			t.Fatalf("HTTP %d %s", r.Status, r.Body)
		}
	})
	t.Run("input_required answered through tasks/update", func(t *testing.T) {
		owner.t = t
		m := owner.call(6, "tools/call", map[string]any{"name": "confirm_delete", "arguments": map[string]any{"filename": "x.txt"}})
		tid, _ := testkit.Dig(m, "result", "taskId").(string)
		got := owner.waitTask(tid)
		reqs, _ := testkit.Dig(got, "result", "inputRequests").(map[string]any)
		if testkit.Dig(got, "result", "status") != "input_required" || len(reqs) != 1 {
			t.Fatalf("confirm_delete: %v", got)
		}
		answers := map[string]any{}
		for k := range reqs {
			answers[k] = map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}
		}
		if ack := owner.call(7, "tasks/update", map[string]any{"taskId": tid, "inputResponses": answers}); testkit.Dig(ack, "result", "resultType") != "complete" {
			t.Fatalf("update: %v", ack)
		}
		for i := 0; i < 500; i++ {
			got = owner.call(8, "tasks/get", map[string]any{"taskId": tid})
			if s := testkit.Dig(got, "result", "status"); s != "working" && s != "input_required" {
				break
			}
		}
		if testkit.Dig(got, "result", "status") != "completed" {
			t.Fatalf("after update: %v", got)
		}
	})
}

// legacyOnlyUpstream is an mcp-go v1.2.1 server that serves 2025-11-25 only: modern requests
// get -32022, so Tollgate must hold a legacy session for them.
func legacyOnlyUpstream(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	s := server.NewMCPServer("legacy-only", "0.9.0", server.WithToolCapabilities(true), server.WithInstructions("old server"))
	calls := new(atomic.Int32)
	s.AddTool(mcp.NewTool("delete_note", mcp.WithString("id", mcp.Required())), func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		calls.Add(1)
		return mcp.NewToolResultText("deleted " + r.GetString("id", "")), nil
	})
	s.AddTool(mcp.NewTool("echo", mcp.WithString("text")), func(_ context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(r.GetString("text", "")), nil
	})
	s.AddTool(mcp.NewTool("confirm", mcp.WithString("what")), func(ctx context.Context, r mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := s.RequestElicitation(ctx, mcp.ElicitationRequest{Params: mcp.ElicitationParams{
			Message:         "Really " + r.GetString("what", "") + "?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}},
		}})
		if err != nil {
			return mcp.NewToolResultError("no answer: " + err.Error()), nil
		}
		return mcp.NewToolResultText(fmt.Sprintf("answer %s %v", res.Action, res.Content)), nil
	})
	ts := httptest.NewServer(server.NewStreamableHTTPServer(s, server.WithStreamableHTTPProtocolVersions("2025-11-25", "2025-06-18", "2025-03-26")))
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp", calls
}

// TestModernBridgeToLegacyUpstream: a 2026-07-28 client in front of a legacy-only upstream:
// server/discover is made from the upstream's initialize, plain requests and approved calls
// travel on the session Tollgate holds (spec basic/versioning compatibility matrix: modern
// client + legacy server fails without a gateway).
func TestModernBridgeToLegacyUpstream(t *testing.T) {
	upURL, calls := legacyOnlyUpstream(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, "governance:\n  defaults: {action: forward}\n  rules:\n    - {match: \"delete_*\", action: approve}\n"), nil, nil)
	g.WaitReady(t)
	c := &modernClient{t: t, url: g.MCP, tasks: true}

	d := c.call(1, "server/discover", nil)
	if testkit.Dig(d, "result", "_meta", "io.modelcontextprotocol/serverInfo", "name") != "legacy-only" ||
		testkit.Dig(d, "result", "instructions") != "old server" ||
		testkit.Dig(d, "result", "capabilities", "extensions", "io.modelcontextprotocol/tasks") == nil ||
		testkit.Dig(d, "result", "resultType") != "complete" {
		t.Fatalf("synthesised discover: %v", d)
	}
	l := c.call(2, "tools/list", nil)
	names := []string{}
	for _, tl := range testkit.Dig(l, "result", "tools").([]any) {
		names = append(names, tl.(map[string]any)["name"].(string))
	}
	if j := strings.Join(names, ","); !strings.Contains(j, "echo") || !strings.Contains(j, "tollgate_await_activity") || testkit.Dig(l, "result", "resultType") != "complete" ||
		testkit.Dig(l, "result", "cacheScope") != "private" || testkit.Dig(l, "result", "ttlMs") == nil {
		t.Fatalf("bridged tools/list: %v", names)
	}
	e := c.call(3, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "hi"}})
	if testkit.Dig(e, "result", "resultType") != "complete" || testkit.Dig(e, "result", "content").([]any)[0].(map[string]any)["text"] != "hi" {
		t.Fatalf("bridged call: %v", e)
	}
	m := c.call(4, "tools/call", map[string]any{"name": "delete_note", "arguments": map[string]any{"id": "n1"}})
	tid, _ := testkit.Dig(m, "result", "taskId").(string)
	if st, _ := g.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/approve", testkit.AdminToken, `{}`); st != 200 {
		t.Fatalf("approve: %d (%v)", st, m)
	}
	done := c.waitTask(tid)
	if testkit.Dig(done, "result", "status") != "completed" || calls.Load() != 1 {
		t.Fatalf("approved bridged call: %v (calls %d)", done, calls.Load())
	}
}

// listenStream opens subscriptions/listen through Tollgate and delivers each JSON-RPC message
// of the stream on the returned channel (closed when the stream ends).
func (c *modernClient) listen(t *testing.T, id int, notifications map[string]any) <-chan map[string]any {
	t.Helper()
	params := map[string]any{"_meta": c.meta(), "notifications": notifications}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": params})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	for k, v := range c.hdr {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("listen: HTTP %d %s", resp.StatusCode, body)
	}
	out := make(chan map[string]any, 64)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil {
				out <- m
			}
		}
	}()
	return out
}

// next waits (bounded) for the next message with the given method.
func next(t *testing.T, ch <-chan map[string]any, method string) map[string]any {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		select {
		case m, ok := <-ch:
			if !ok {
				t.Fatalf("stream ended before %s", method)
			}
			if m["method"] == method {
				return m
			}
		case <-deadline:
			t.Fatalf("no %s on the listen stream", method)
		}
	}
}

// TestModernListen: subscriptions/listen through Tollgate (spec 2026-07-28 subscriptions): the
// acknowledgement comes first and covers Tollgate's part (toolsListChanged, its own task ids),
// the upstream's own list_changed is relayed, Tollgate's task changes arrive as
// notifications/tasks, and a reload that changes governance sends list_changed.
func TestModernListen(t *testing.T) {
	cfg := func(action string) string {
		return testkit.BasicConfig(startFixtureOnce(t), "governance:\n  defaults: {action: forward}\n  rules:\n    - {match: \"greet\", action: approve}\n    - {match: \"slow_compute\", action: "+action+"}\n")
	}
	g := testkit.StartGateway(t, cfg("forward"), nil, nil)
	g.WaitReady(t)
	c := &modernClient{t: t, url: g.MCP, tasks: true, hdr: http.Header{"Authorization": {"Bearer listener"}}}
	m := c.call(1, "tools/call", map[string]any{"name": "greet", "arguments": map[string]any{"name": "ann"}})
	tid, _ := testkit.Dig(m, "result", "taskId").(string)
	if !strings.HasPrefix(tid, "tg_") {
		t.Fatalf("no Tollgate task: %v", m)
	}
	stream := c.listen(t, 42, map[string]any{"toolsListChanged": true, "taskIds": []string{tid}})
	var first map[string]any
	select {
	case first = <-stream:
	case <-time.After(15 * time.Second):
		t.Fatal("no acknowledgement")
	}
	if first["method"] != "notifications/subscriptions/acknowledged" || testkit.Dig(first, "params", "_meta", "io.modelcontextprotocol/subscriptionId") != float64(42) ||
		testkit.Dig(first, "params", "notifications", "toolsListChanged") != true || !strings.Contains(fmt.Sprint(testkit.Dig(first, "params", "notifications", "taskIds")), tid) {
		t.Fatalf("first message: %v", first)
	}
	if st, _ := g.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/approve", testkit.AdminToken, `{}`); st != 200 {
		t.Fatalf("approve: %d", st)
	}
	for {
		n := next(t, stream, "notifications/tasks")
		if testkit.Dig(n, "params", "taskId") != tid || testkit.Dig(n, "params", "_meta", "io.modelcontextprotocol/subscriptionId") != float64(42) {
			t.Fatalf("task notification: %v", n)
		}
		if testkit.Dig(n, "params", "status") == "completed" {
			if testkit.Dig(n, "params", "result", "content") == nil {
				t.Fatalf("completed notification without result: %v", n)
			}
			break
		}
	}
	// The upstream's own change is relayed.
	if r := c.call(2, "tools/call", map[string]any{"name": "test_trigger_tool_change", "arguments": map[string]any{}}); r["error"] != nil {
		t.Fatalf("trigger: %v", r)
	}
	next(t, stream, "notifications/tools/list_changed")
	// A reload that changes governance of a listed tool: Tollgate's own list_changed, on a
	// fresh stream the upstream has nothing to say on.
	quiet := c.listen(t, 43, map[string]any{"toolsListChanged": true})
	next(t, quiet, "notifications/subscriptions/acknowledged")
	if err := os.WriteFile(filepath.Join(g.Dir, "tollgate.yaml"), []byte(cfg("approve")), 0o644); err != nil {
		t.Fatal(err)
	}
	g.Srv.Reload() // the file watcher may be first; either reload sends it once
	n := next(t, quiet, "notifications/tools/list_changed")
	if testkit.Dig(n, "params", "_meta", "io.modelcontextprotocol/subscriptionId") != float64(43) {
		t.Fatalf("list_changed: %v", n)
	}
}

// modernOnlyUpstream is the modern fixture behind a filter that refuses every legacy message
// (initialize included) the way a server serving only 2026-07-28 does: HTTP 400 for a POST
// without the modern version header, 405 for GET and DELETE.
func modernOnlyUpstream(t *testing.T) (string, *modern.Server) {
	t.Helper()
	s := modern.New(modern.Options{FailDelay: -1})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			http.Error(w, "only 2026-07-28", http.StatusMethodNotAllowed)
			return
		}
		if r.Header.Get("MCP-Protocol-Version") != "2026-07-28" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"]}}}`))
			return
		}
		s.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		ts.Close()
		s.Close()
	})
	return ts.URL + "/mcp", s
}

// TestLegacyClientModernOnlyUpstream: a 2025-11-25 client in front of an upstream that serves
// 2026-07-28 only: Tollgate answers initialize from server/discover, keeps the session itself,
// and sends each request on as a modern one; governance and Tollgate's tasks work as usual.
func TestLegacyClientModernOnlyUpstream(t *testing.T) {
	upURL, up := modernOnlyUpstream(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, "governance:\n  defaults: {action: forward}\n  rules:\n    - {match: \"greet\", action: approve}\n"), nil, nil)
	g.WaitReady(t)
	c := g.NewClient(t)
	if !strings.HasPrefix(c.Session, "tgs_") {
		t.Fatalf("session %q: want one Tollgate keeps itself", c.Session)
	}
	l := c.Post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`).Message(t)
	found := map[string]any{}
	for _, tl := range testkit.Dig(l, "result", "tools").([]any) {
		found[tl.(map[string]any)["name"].(string)] = testkit.Dig(tl, "execution", "taskSupport")
	}
	// greet needs approval: optional under the default tasks.sync_approval (hold).
	if found["greet"] != "optional" || found["slow_compute"] != "forbidden" || found["tollgate_await_activity"] == nil {
		t.Fatalf("tools/list through the bridge: %v", found)
	}
	m := c.Call(2, "slow_compute", map[string]any{"seconds": 0, "label": "plain"}, 0)
	if !strings.Contains(fmt.Sprint(testkit.Dig(m, "result", "content")), "slow_compute(plain)") {
		t.Fatalf("forwarded call: %v", m)
	}
	tid := c.CallTask(3, "greet", `{"name":"Ada"}`)
	if st, _ := g.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/approve", testkit.AdminToken, `{}`); st != 200 {
		t.Fatalf("approve: %d", st)
	}
	res := c.TaskRPC(4, "tasks/result", tid).Message(t)
	if !strings.Contains(fmt.Sprint(testkit.Dig(res, "result", "content")), "Hello, Ada!") || up.Calls("greet") != 1 {
		t.Fatalf("tasks/result: %v (greet ran %d times)", res, up.Calls("greet"))
	}
}

// TestModernBridgeMRTR: an elicitation a legacy upstream sends during a bridged call reaches the
// modern client as an InputRequiredResult; its retry with inputResponses and the requestState
// answers the upstream, which then completes (spec 2026-07-28 basic/patterns/mrtr).
func TestModernBridgeMRTR(t *testing.T) {
	upURL, _ := legacyOnlyUpstream(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, "governance:\n  defaults: {action: forward}\n"), nil, nil)
	g.WaitReady(t)
	c := &modernClient{t: t, url: g.MCP, caps: map[string]any{"elicitation": map[string]any{}}, hdr: http.Header{"Authorization": {"Bearer mrtr"}}}
	args := map[string]any{"name": "confirm", "arguments": map[string]any{"what": "ship it"}}
	r1 := c.call(1, "tools/call", args)
	reqs, _ := testkit.Dig(r1, "result", "inputRequests").(map[string]any)
	state, _ := testkit.Dig(r1, "result", "requestState").(string)
	if testkit.Dig(r1, "result", "resultType") != "input_required" || len(reqs) != 1 || state == "" {
		t.Fatalf("round 1: %v", r1)
	}
	answers := map[string]any{}
	for k, v := range reqs {
		if testkit.Dig(v, "method") != "elicitation/create" || !strings.Contains(fmt.Sprint(testkit.Dig(v, "params", "message")), "ship it") {
			t.Fatalf("input request %s: %v", k, v)
		}
		answers[k] = map[string]any{"action": "accept", "content": map[string]any{"ok": true}}
	}
	// Another caller cannot resume it.
	other := &modernClient{t: t, url: g.MCP, caps: c.caps, hdr: http.Header{"Authorization": {"Bearer someone-else"}}}
	stolen := map[string]any{"name": "confirm", "arguments": args["arguments"], "inputResponses": answers, "requestState": state}
	if code, _ := testkit.ErrorOf(other.call(2, "tools/call", stolen)); code != -32602 {
		t.Fatalf("foreign requestState: %v", code)
	}
	r2 := c.call(3, "tools/call", map[string]any{"name": "confirm", "arguments": args["arguments"], "inputResponses": answers, "requestState": state})
	if testkit.Dig(r2, "result", "resultType") != "complete" || !strings.Contains(fmt.Sprint(testkit.Dig(r2, "result", "content")), "answer accept") {
		t.Fatalf("round 2: %v", r2)
	}
	// Without the elicitation capability the upstream is told no; the client is never asked.
	plain := &modernClient{t: t, url: g.MCP}
	r3 := plain.call(4, "tools/call", map[string]any{"name": "confirm", "arguments": map[string]any{"what": "ship it"}})
	if testkit.Dig(r3, "result", "resultType") != "complete" || testkit.Dig(r3, "result", "isError") != true {
		t.Fatalf("no capability: %v", r3)
	}
}

type sayHello struct{ asked atomic.Int32 }

func (s *sayHello) Elicit(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	s.asked.Add(1)
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
		Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"name": "hello"},
	}}, nil
}

// TestLegacyClientModernOnlyMRTR: a modern-only upstream's InputRequiredResult reaches a
// 2025-11-25 client (mcp-go v1.2.1 pinned to the legacy handshake) as its own
// elicitation/create; the answer goes back as inputResponses on the retry.
func TestLegacyClientModernOnlyMRTR(t *testing.T) {
	upURL, _ := modernOnlyUpstream(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, "governance:\n  defaults: {action: forward}\n"), nil, nil)
	g.WaitReady(t)
	h := &sayHello{}
	tr, err := transport.NewStreamableHTTP(g.MCP)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithElicitationHandler(h))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: "2025-11-25", ClientInfo: mcp.Implementation{Name: "legacy-mrtr", Version: "1"},
		Capabilities: mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{}},
	}}); err != nil {
		t.Fatal(err)
	}
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "test_streaming_elicitation", Arguments: map[string]any{}}})
	if err != nil {
		t.Fatal(err)
	}
	if h.asked.Load() != 1 || len(res.Content) == 0 || !strings.Contains(fmt.Sprint(res.Content[0]), "answer received") {
		t.Fatalf("result %+v after %d questions", res, h.asked.Load())
	}
}
