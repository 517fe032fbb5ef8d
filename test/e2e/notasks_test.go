package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

func syncApprovalConfig(upURL, mode, extra string) string {
	return testkit.BasicConfig(upURL, `governance:
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve}
approvers:
  - {name: alice, token_env: ALICE_TOKEN}
tasks:
  sync_approval: `+mode+"\n"+extra)
}

func callText(t *testing.T, c *client.Client, tool string, args map[string]any) (string, *mcp.CallToolResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: args}})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var b strings.Builder
	for _, ct := range res.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
			b.WriteByte('\n')
		}
	}
	return b.String(), res
}

var taskIDRe = regexp.MustCompile(`tg_[0-9a-f-]{36}`)

// TestPromoteMode: a client without task support calls an approval-gated tool, gets a task id
// at once, waits in tollgate_await_activity, is woken by an approval made through the HTTP API,
// and collects the result with tollgate_get_task_result.
func TestPromoteMode(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, syncApprovalConfig(upURL, "promote", ""), approverEnv, nil)
	g.WaitReady(t)
	c := mcpGoClient(t, g.MCP)
	if sup := toolSupport(t, c); sup["delete_user"] != "optional" {
		t.Fatalf("promote mode advertises delete_user as %q, want optional", sup["delete_user"])
	}
	text, _ := callText(t, c, "delete_user", map[string]any{"user_id": "u-002"})
	tid := taskIDRe.FindString(text)
	if tid == "" || !strings.Contains(text, "tollgate_await_activity") {
		t.Fatalf("promoted result does not name the task and the next call: %q", text)
	}
	if d.Calls("delete_user") != 0 {
		t.Fatal("executed before approval")
	}

	approved := make(chan int, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		st, _, err := g.TryAdminRequest("POST", "/api/v1/approvals/"+tid+"/approve", "alice-secret-token", `{"reason":"ok"}`)
		if err != nil {
			t.Error(err) // not Fatal: this goroutine must still send
		}
		approved <- st
	}()
	start := time.Now()
	text, res := callText(t, c, "tollgate_await_activity", map[string]any{"timeout_ms": 10000})
	if st := <-approved; st != 200 {
		t.Fatalf("approve: %d", st)
	}
	if time.Since(start) > 9*time.Second {
		t.Errorf("await_activity was not woken by the approval (took %v)", time.Since(start))
	}
	sc, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(sc)+text, tid) {
		t.Errorf("await_activity result does not mention the task: %s %s", sc, text)
	}

	text, res = callText(t, c, "tollgate_get_task_result", map[string]any{"task_id": tid, "timeout_ms": 10000})
	if res.IsError || !strings.Contains(text, "u-002") {
		t.Fatalf("get_task_result: %q (isError=%v)", text, res.IsError)
	}
	if d.Calls("delete_user") != 1 {
		t.Errorf("executions = %d", d.Calls("delete_user"))
	}
}

// TestBlockMode: the plain call is held until decided and returns the real result.
func TestBlockMode(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, syncApprovalConfig(upURL, "block", ""), approverEnv, nil)
	g.WaitReady(t)
	c := mcpGoClient(t, g.MCP)
	approved := make(chan error, 1)
	go func() {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			_, list, err := g.TryAdminRequest("GET", "/api/v1/approvals", "alice-secret-token", "")
			if err != nil {
				approved <- err
				return
			}
			if items, _ := list["approvals"].([]any); len(items) > 0 {
				id, _ := testkit.Dig(items[0], "taskId").(string)
				_, _, err := g.TryAdminRequest("POST", "/api/v1/approvals/"+id+"/approve", "alice-secret-token", `{}`)
				approved <- err
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		approved <- errors.New("no approval showed up within 10s")
	}()
	text, res := callText(t, c, "delete_user", map[string]any{"user_id": "u-003"})
	if err := <-approved; err != nil {
		t.Fatalf("approving the held call: %v", err)
	}
	if res.IsError || !strings.Contains(text, "u-003") {
		t.Fatalf("blocked call result: %q", text)
	}
	if d.Calls("delete_user") != 1 {
		t.Errorf("executions = %d", d.Calls("delete_user"))
	}
}

// TestTimeoutPromotion: a forwarded plain call that outlives tasks.promote_after becomes a
// Tollgate task whose result is collected when the upstream answers.
func TestTimeoutPromotion(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, syncApprovalConfig(upURL, "promote", "  promote_after: 300ms\n"), approverEnv, nil)
	g.WaitReady(t)
	c := mcpGoClient(t, g.MCP)
	start := time.Now()
	text, _ := callText(t, c, "slow_operation", map[string]any{"seconds": 4})
	if time.Since(start) > 3*time.Second { // answered long before the tool finished
		t.Fatalf("slow call was not promoted (took %v): %q", time.Since(start), text)
	}
	tid := taskIDRe.FindString(text)
	if tid == "" {
		t.Fatalf("promoted result names no task: %q", text)
	}
	text, res := callText(t, c, "tollgate_get_task_result", map[string]any{"task_id": tid, "timeout_ms": 10000})
	if res.IsError || !strings.Contains(strings.ToLower(text), "done") && !strings.Contains(strings.ToLower(text), "second") {
		t.Fatalf("promoted call's result: %q (isError=%v)", text, res.IsError)
	}
	if d.Calls("slow_operation") != 1 {
		t.Errorf("slow_operation executed %d times, want 1", d.Calls("slow_operation"))
	}
	// A fast call is not promoted.
	text, _ = callText(t, c, "read_file", map[string]any{"path": "/etc/motd"})
	if taskIDRe.MatchString(text) {
		t.Errorf("fast call was promoted: %q", text)
	}
}

// TestPromotedCallKeepsServerRequests: a server→client request the upstream sends for a call
// after it was promoted to a task is kept and shown as a pending item of that task.
func TestPromotedCallKeepsServerRequests(t *testing.T) {
	promoted, release := make(chan struct{}), make(chan struct{})
	up := testkit.NewRawUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		switch m.Method {
		case "initialize":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Mcp-Session-Id", "raw-promote")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"0"}}}`, m.ID)
		case "tools/list":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"slow_ask","inputSchema":{"type":"object"}}]}}`, m.ID)
		case "tools/call":
			w.Header().Set("Content-Type", "text/event-stream")
			select { // the request comes after the call was promoted to a task
			case <-promoted:
			case <-r.Context().Done():
				return
			}
			fmt.Fprint(w, "data: {\"jsonrpc\":\"2.0\",\"id\":\"ask-1\",\"method\":\"elicitation/create\",\"params\":{\"message\":\"which region?\",\"requestedSchema\":{\"type\":\"object\"}}}\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"done in eu\"}]}}\n\n", m.ID)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	})
	g := testkit.StartGateway(t, testkit.BasicConfig(up.URL(), "tasks:\n  promote_after: 150ms\n"), nil, nil)
	g.WaitReady(t)
	c := g.NewClient(t)
	tid := promotedCall(t, c, 1, "slow_ask")
	close(promoted)
	waitFor(t, "the server request to show as pending", func() bool {
		r := c.Call(2, "tollgate_get_task", map[string]any{"task_id": tid}, 0)
		b, _ := json.Marshal(testkit.Dig(r, "result", "structuredContent"))
		return strings.Contains(string(b), "elicitation/create") && strings.Contains(string(b), "which region?")
	})
	close(release)
	r := c.Call(3, "tollgate_get_task_result", map[string]any{"task_id": tid, "timeout_ms": 5000}, 0)
	if b, _ := json.Marshal(r); !strings.Contains(string(b), "done in eu") {
		t.Fatalf("result after the upstream answered: %s", b)
	}
}
