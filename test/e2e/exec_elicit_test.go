package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/tollgate-mcp/tollgate/internal/demo"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// TestApprovedCallUpstreamElicits: an approved 2025-11-25 task whose tool asks the client
// something (elicitation/create) while Tollgate executes it. Nobody is connected to that
// execution, so Tollgate answers the upstream's request at once with -32601 NotBridged; the
// tool gets the error and the task ends with the tool's own answer. It used to stay
// Executing until tasks.execution_timeout, the tool waiting for an answer nobody would send.
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

	ans := &answerApproval{approve: true}
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
		t.Fatalf("tasks/result: %v (the task must end, not wait for an answer nobody sends)", err)
	}
	var text string
	for _, ct := range result.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			text += tc.Text
		}
	}
	if !result.IsError || !strings.Contains(text, "elicitation failed") || !strings.Contains(text, "elicitation/create") {
		t.Fatalf("result: isError=%v %q, want the tool's error about the unanswered elicitation/create", result.IsError, text)
	}
	got, err := c.GetTask(ctx, mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: tid}})
	if err != nil || got.Status != mcp.TaskStatusFailed {
		t.Fatalf("tasks/get: %+v %v, want failed", got, err)
	}
	if n := d.Calls(demo.ToolConfirmAction); n != 1 {
		t.Errorf("confirm_action ran %d times, want 1", n)
	}
	ans.mu.Lock()
	defer ans.mu.Unlock()
	if len(ans.asked) != 0 {
		t.Errorf("the client was asked %d questions; the execution has no client", len(ans.asked))
	}
}
