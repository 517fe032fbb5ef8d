package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/tollgate-mcp/tollgate/internal/demo"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// confirmer answers every elicitation with accept {confirm: true} and records what it was asked.
type confirmer struct {
	mu    sync.Mutex
	asked []mcp.ElicitationRequest
}

func (c *confirmer) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = append(c.asked, req)
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
		Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"confirm": true, "comment": "asked the user"},
	}}, nil
}

// TestApprovedCallUpstreamElicits: an approved 2025-11-25 task whose tool asks the client
// something (elicitation/create) while Tollgate executes it. The question belongs to the
// task: it goes to the owner on its tasks/result stream with the related-task _meta (spec
// 2025-11-25 tasks), the owner's answer goes back to the upstream, and the task ends with
// the tool's result. It used to be refused at once with -32601 NotBridged (the tool failed).
func TestApprovedCallUpstreamElicits(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, `governance:
  defaults: {action: forward}
  rules:
    - {match: "confirm_*", action: approve}
approval:
  default: {timeout: 10m, on_timeout: deny}
approvers:
  - {name: alice, token_env: ALICE_TOKEN}
`), approverEnv, nil)
	g.WaitReady(t)

	ans := &confirmer{}
	tr, err := transport.NewStreamableHTTP(g.MCP)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithElicitationHandler(ans))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: "2025-11-25", ClientInfo: mcp.Implementation{Name: "e2e-exec-elicit", Version: "1"},
		Capabilities: mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{}},
	}}); err != nil {
		t.Fatal(err)
	}
	res, rpcErr := callWithTask(t, c, demo.ToolConfirmAction, map[string]any{"action": "drop the table"}, 600000)
	if rpcErr != nil {
		t.Fatal(rpcErr)
	}
	tid := taskIDOf(t, res)
	decide(t, g, tid, "approve")

	result, err := c.TaskResult(ctx, mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: tid}})
	if err != nil {
		t.Fatalf("tasks/result: %v", err)
	}
	var text string
	for _, ct := range result.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			text += tc.Text
		}
	}
	if result.IsError || !strings.Contains(text, `"confirmed":true`) || !strings.Contains(text, "asked the user") {
		t.Fatalf("result: isError=%v %q, want the tool's result with the owner's answer", result.IsError, text)
	}
	got, err := c.GetTask(ctx, mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: tid}})
	if err != nil || got.Status != mcp.TaskStatusCompleted {
		t.Fatalf("tasks/get: %+v %v, want completed", got, err)
	}
	if n := d.Calls(demo.ToolConfirmAction); n != 1 {
		t.Errorf("confirm_action ran %d times, want 1", n)
	}
	ans.mu.Lock()
	defer ans.mu.Unlock()
	if len(ans.asked) != 1 || !strings.Contains(ans.asked[0].Params.Message, "drop the table") {
		t.Fatalf("the owner was asked %+v, want the tool's one question", ans.asked)
	}
	if rel, _ := ans.asked[0].Params.Meta.AdditionalFields["io.modelcontextprotocol/related-task"].(map[string]any); rel["taskId"] != tid {
		t.Errorf("the question's _meta: %+v, want related-task %s", ans.asked[0].Params.Meta, tid)
	}
}
