package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

type acceptElicitation struct{ calls int }

func (a *acceptElicitation) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	a.calls++
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
		Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"confirm": true},
	}}, nil
}

// TestMCPGoClientThroughGateway drives a real mcp-go client through Tollgate to the demo
// server: handshake, tools/list, tools/call, an elicitation answered by the client, close.
func TestMCPGoClientThroughGateway(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, "governance:\n  defaults: {action: forward}\n  rules:\n    - {match: \"delete_*\", action: approve}\ntasks: {sync_approval: error}\n"), nil, nil)
	g.WaitReady(t)

	el := &acceptElicitation{}
	c, err := client.NewStreamableHttpClient(g.MCP, transport.WithContinuousListening())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c = client.NewClient(c.GetTransport(), client.WithElicitationHandler(el))
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: "2025-11-25", ClientInfo: mcp.Implementation{Name: "e2e", Version: "1"},
		Capabilities: mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if init.ServerInfo.Name != "tollgate-demo" {
		t.Errorf("serverInfo passed through as %q", init.ServerInfo.Name)
	}

	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	support := map[string]string{}
	for _, tl := range tools.Tools {
		support[tl.Name] = string(tl.Execution.TaskSupport)
	}
	if support["delete_user"] != "required" || support["read_file"] != "forbidden" {
		t.Errorf("taskSupport: delete_user=%q read_file=%q", support["delete_user"], support["read_file"])
	}
	if _, ok := support["tollgate_await_activity"]; !ok {
		t.Errorf("Tollgate's own tools missing from tools/list: %v", support)
	}

	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "/etc/motd"}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || len(res.Content) == 0 {
		t.Fatalf("read_file: %+v", res)
	}

	res, err = c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "confirm_action", Arguments: map[string]any{"action": "restart"}}})
	if err != nil {
		t.Fatal(err)
	}
	if el.calls != 1 {
		t.Errorf("elicitation handler called %d times, want 1", el.calls)
	}
	if text := res.Content[0].(mcp.TextContent).Text; !strings.Contains(strings.ToLower(text), "accept") && !strings.Contains(strings.ToLower(text), "confirm") {
		t.Errorf("confirm_action result does not reflect the client's answer: %q", text)
	}
	if d.Calls("confirm_action") != 1 || d.Calls("read_file") != 1 {
		t.Errorf("upstream calls: %v", d.AllCalls())
	}
	if err := c.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

// reencode answers a request the way a careless server does: ids go through float64.
func reencode(body []byte) []byte {
	var m struct {
		ID     any    `json:"id"`
		Method string `json:"method"`
	}
	_ = json.Unmarshal(body, &m)
	out, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": map[string]any{"echo": m.Method, "x-extra": map[string]any{"kept": true}}})
	return out
}

func handshake(w http.ResponseWriter, body []byte) bool {
	if !strings.Contains(string(body), `"initialize"`) {
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Mcp-Session-Id", "raw-session-1")
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal(body, &m)
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"experimental":{"x":{}}},"serverInfo":{"name":"raw","version":"0"}}}`, m.ID)
	return true
}

// TestPassthroughFidelity: messages Tollgate does not intercept reach the upstream byte for
// byte, and the client gets its own id back even when the upstream re-encodes it.
func TestPassthroughFidelity(t *testing.T) {
	var useSSE atomic.Bool // read by the upstream's handler, also for Tollgate's background requests
	up := testkit.NewRawUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		if handshake(w, body) {
			return
		}
		if !strings.Contains(string(body), `"id"`) || !strings.Contains(string(body), `"method"`) {
			w.WriteHeader(http.StatusAccepted) // notification or response
			return
		}
		if useSSE.Load() {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, ": upstream comment\nid: ev-1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\nid: ev-2\ndata: %s\n\n", reencode(body))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(reencode(body))
	})
	g := testkit.StartGateway(t, testkit.BasicConfig(up.URL(), ""), nil, nil)
	c := g.NewClient(t)

	for _, mode := range []bool{false, true} {
		useSSE.Store(mode)
		cases := []struct{ name, body, wantID string }{
			{"big integer id", `{"jsonrpc":"2.0","id":9007199254740993,"method":"custom/unknown","params":{"a":1.50,"_meta":{"k":"<&>"},"extra":[1,2]},"zz":true}`, `9007199254740993`},
			{"string id", `{"jsonrpc":"2.0","id":"7","method":"vendor/thing","params":{}}`, `"7"`},
			{"spacing kept", `{ "jsonrpc" : "2.0", "id" : 12 , "method":"ping" }`, `12`},
		}
		for _, tc := range cases {
			t.Run(fmt.Sprintf("sse=%v/%s", mode, tc.name), func(t *testing.T) {
				r := c.Post(tc.body)
				if !up.Received(tc.body) {
					t.Fatalf("upstream did not receive the exact bytes %s", tc.body)
				}
				resp := r.ResponseBytes(t)
				var m map[string]json.RawMessage
				if err := json.Unmarshal(resp, &m); err != nil {
					t.Fatal(err)
				}
				if string(m["id"]) != tc.wantID {
					t.Errorf("id = %s, want %s (restored)", m["id"], tc.wantID)
				}
				if !strings.Contains(string(resp), `"x-extra":{"kept":true}`) {
					t.Errorf("unknown result fields lost: %s", resp)
				}
				if mode && !strings.Contains(string(r.Body), ": upstream comment") || mode && !strings.Contains(string(r.Body), "id: ev-2") {
					t.Errorf("SSE comment or event id not kept:\n%s", r.Body)
				}
			})
		}
	}

	// A notification and a response to a server→client request pass through untouched.
	for _, body := range []string{
		`{"jsonrpc":"2.0","method":"notifications/roots/list_changed","params":{"_meta":{"z":1}}}`,
		`{"jsonrpc":"2.0","id":"srv-1","result":{"action":"accept","content":{"ok":true}}}`,
	} {
		r := c.Post(body)
		if r.Status != http.StatusAccepted {
			t.Errorf("%s: status %d", body, r.Status)
		}
		if !up.Received(body) {
			t.Errorf("upstream did not receive %s byte for byte", body)
		}
	}
	// End-to-end headers pass, hop-by-hop ones do not.
	c.Header = http.Header{"Authorization": {"Bearer up-token"}, "X-Custom": {"v"}, "Connection": {"X-Drop"}, "X-Drop": {"1"}}
	const ping = `{"jsonrpc":"2.0","id":99,"method":"ping"}`
	c.Post(ping)
	// The ping's own request: Tollgate's annotation session may reach the upstream meanwhile
	// (its DELETE carries none of the caller's headers), so the last request is not the one.
	bodies, heads := up.Requests()
	var h http.Header
	for i, b := range bodies {
		if b == ping {
			h = heads[i]
		}
	}
	if h == nil {
		t.Fatal("the upstream never received the ping")
	}
	if h.Get("Authorization") != "Bearer up-token" || h.Get("X-Custom") != "v" || h.Get("Mcp-Session-Id") != "raw-session-1" {
		t.Errorf("end-to-end headers not forwarded: %v", h)
	}
	if h.Get("X-Drop") != "" {
		t.Errorf("header named in Connection was forwarded")
	}
}

// TestGETStreamResumption: the server→client stream passes Last-Event-ID to the upstream and
// relays events with their ids and comments.
func TestGETStreamResumption(t *testing.T) {
	var gotLast string
	up := testkit.NewRawUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		switch r.Method {
		case http.MethodPost:
			if handshake(w, body) {
				return
			}
			w.WriteHeader(http.StatusAccepted)
		case http.MethodGet:
			gotLast = r.Header.Get("Last-Event-ID")
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, ": resumed\r\nid: 6\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"n\":6}}\r\n\r\nid: 7\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"s1\",\"method\":\"elicitation/create\",\"params\":{}}\n\n")
		case http.MethodDelete:
			w.WriteHeader(http.StatusOK)
		}
	})
	g := testkit.StartGateway(t, testkit.BasicConfig(up.URL(), ""), nil, nil)
	c := g.NewClient(t)

	req, _ := http.NewRequest(http.MethodGet, g.MCP, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.Session)
	req.Header.Set("Last-Event-ID", "5")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && len(lines) < 7 {
		lines = append(lines, sc.Text())
	}
	got := strings.Join(lines, "\n")
	if gotLast != "5" {
		t.Errorf("upstream saw Last-Event-ID %q, want 5", gotLast)
	}
	for _, want := range []string{": resumed", "id: 6", "id: 7", `"method":"elicitation/create"`} {
		if !strings.Contains(got, want) {
			t.Errorf("stream lacks %q:\n%s", want, got)
		}
	}

	// DELETE ends the session upstream.
	dreq, _ := http.NewRequest(http.MethodDelete, g.MCP, nil)
	dreq.Header.Set("Mcp-Session-Id", c.Session)
	dresp, err := http.DefaultClient.Do(dreq)
	if err != nil {
		t.Fatal(err)
	}
	dresp.Body.Close()
	if dresp.StatusCode != 200 {
		t.Errorf("DELETE status %d", dresp.StatusCode)
	}
}

// TestUpstreamDown: a dead upstream yields JSON-RPC -32000, not a hang or an HTML page.
func TestUpstreamDown(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()
	g := testkit.StartGateway(t, testkit.BasicConfig(dead, ""), nil, nil)
	c := &testkit.RPC{T: t, URL: g.MCP}
	r := c.Post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e","version":"1"}}}`)
	m := r.Message(t)
	if code, name := testkit.ErrorOf(m); code != -32000 || name != "UpstreamUnreachable" {
		t.Fatalf("got %v %q: %s", code, name, r.Body)
	}
	if testkit.Dig(m, "id") != float64(1) || testkit.Dig(m, "error", "data", "correlation_id") == nil {
		t.Errorf("id or correlation id missing: %s", r.Body)
	}
	resp, _ := http.Get(g.Admin + "/readyz")
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("readyz with a dead upstream = %d, want 503", resp.StatusCode)
	}
}

// TestSyncForwardTimeout: a hung plain tools/call is answered with -32001.
func TestSyncForwardTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	up := testkit.NewRawUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if handshake(w, body) {
			return
		}
		if strings.Contains(string(body), `"tools/call"`) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		if strings.Contains(string(body), `"tools/list"`) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"jsonrpc":"2.0","id":"tollgate-tools-0","result":{"tools":[{"name":"hang","inputSchema":{"type":"object"}}]}}`)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	g := testkit.StartGateway(t, testkit.BasicConfig(up.URL(), ""), map[string]string{"TOLLGATE_SYNC_FORWARD_TIMEOUT_SECS": "1"}, nil)
	c := g.NewClient(t)
	start := time.Now()
	r := c.Post(`{"jsonrpc":"2.0","id":"h","method":"tools/call","params":{"name":"hang","arguments":{}}}`)
	if code, name := testkit.ErrorOf(r.Message(t)); code != -32001 || name != "UpstreamTimeout" {
		t.Fatalf("got %v %q: %s", code, name, r.Body)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("timeout took %v", time.Since(start))
	}
}

// TestHTTPGuards: origin validation, body limit, batches, future protocol.
func TestHTTPGuards(t *testing.T) {
	up := testkit.NewRawUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(reencode(body))
	})
	g := testkit.StartGateway(t, testkit.BasicConfig(up.URL(), "server:\n  max_body_bytes: 2048\n  allowed_origins: [\"https://console.example.com\"]\n"), nil, nil)
	post := func(body string, hdr map[string]string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, g.MCP, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			req.Header.Set(k, v)
			if k == "Host" {
				req.Host = v
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	cases := []struct {
		name     string
		body     string
		hdr      map[string]string
		status   int
		wantCode string
	}{
		{"foreign origin", ping, map[string]string{"Origin": "https://evil.example"}, 403, ""},
		{"allowed origin", ping, map[string]string{"Origin": "https://console.example.com"}, 200, ""},
		{"loopback origin", ping, map[string]string{"Origin": "http://localhost:5173"}, 200, ""},
		{"rebinding host", ping, map[string]string{"Host": "attacker.example"}, 403, ""},
		{"body too large", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 4096) + `"}}`, nil, 413, "-32600"},
		{"batch", `[` + ping + `]`, nil, 400, "-32600"},
		{"not json", `{oops`, nil, 400, "-32700"},
		// A 2026-07-28 request without _meta or headers is refused before anything else
		// (spec 2026-07-28 basic/index "_meta"; test/e2e/modern_test.go covers the era).
		{"server/discover without _meta", `{"jsonrpc":"2.0","id":1,"method":"server/discover"}`, nil, 400, "-32602"},
		{"2026 header without _meta", ping, map[string]string{"MCP-Protocol-Version": "2026-07-28"}, 400, "-32602"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(tc.body, tc.hdr)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			if tc.wantCode != "" && !strings.Contains(string(b), `"code":`+tc.wantCode) {
				t.Errorf("body lacks code %s: %s", tc.wantCode, b)
			}
		})
	}
}

// TestRateLimit: beyond server.rate_limit a caller's tools/call gets -32009 with retry_after,
// other callers are unaffected, and Tollgate's own tools are not limited.
func TestRateLimit(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, "server:\n  rate_limit: {requests_per_second: 0.001, burst: 2}\n"), nil, nil)
	g.WaitReady(t)
	a, b := g.NewClient(t), g.NewClient(t)
	read := `{"path":"/etc/motd"}`
	for i := 1; i <= 2; i++ {
		if m := a.Post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"read_file","arguments":%s}}`, i, read)).Message(t); m["result"] == nil {
			t.Fatalf("call %d within the burst: %v", i, m)
		}
	}
	m := a.Post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_file","arguments":` + read + `}}`).Message(t)
	if code, name := testkit.ErrorOf(m); code != -32009 || name != "RateLimited" {
		t.Fatalf("third call: %v", m)
	}
	if ra, _ := testkit.Dig(m, "error", "data", "retry_after").(float64); ra < 1 {
		t.Errorf("retry_after = %v", testkit.Dig(m, "error", "data", "retry_after"))
	}
	if m := b.Post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":` + read + `}}`).Message(t); m["result"] == nil {
		t.Errorf("another caller was limited: %v", m)
	}
	if m := a.Post(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"tollgate_list_tasks","arguments":{}}}`).Message(t); m["result"] == nil {
		t.Errorf("Tollgate's own tool was limited: %v", m)
	}
	if d.Calls("read_file") != 3 {
		t.Errorf("upstream read_file calls = %d, want 3", d.Calls("read_file"))
	}
}

// TestRequestTimeout: a request other than tools/call whose upstream never answers gets
// -32001 after server.request_timeout instead of holding the connection.
func TestRequestTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	up := testkit.NewRawUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if handshake(w, body) {
			return
		}
		if strings.Contains(string(body), `"resources/read"`) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(reencode(body))
	})
	g := testkit.StartGateway(t, testkit.BasicConfig(up.URL(), "server:\n  request_timeout: 300ms\n"), nil, nil)
	c := g.NewClient(t)
	m := c.Post(`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"x://hang"}}`).Message(t)
	if code, name := testkit.ErrorOf(m); code != -32001 || name != "UpstreamTimeout" {
		t.Fatalf("hung resources/read: %v", m)
	}
}
