package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// answerApproval is a client user answering Tollgate's approval question.
type answerApproval struct {
	mu      sync.Mutex
	approve bool
	asked   []mcp.ElicitationRequest
}

func (a *answerApproval) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, req)
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
		Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"approve": a.approve, "reason": "asked the user"},
	}}, nil
}

// TestElicitationApproval: a workflow with destination elicitation asks the requester itself.
// The task shows input_required; tasks/result carries elicitation/create with the
// related-task _meta and the redacted arguments; the answer approves (or rejects) the call.
func TestElicitationApproval(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, `governance:
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve, approval: ask}
approval:
  ask: {destination: {type: elicitation}, timeout: 1m, redact_fields: [password]}
`), nil, nil)
	g.WaitReady(t)

	for _, approve := range []bool{true, false} {
		ans := &answerApproval{approve: approve}
		tr, err := transport.NewStreamableHTTP(g.MCP)
		if err != nil {
			t.Fatal(err)
		}
		c := client.NewClient(tr, client.WithElicitationHandler(ans))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
			ProtocolVersion: "2025-11-25", ClientInfo: mcp.Implementation{Name: "e2e-elicit", Version: "1"},
			Capabilities: mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{}},
		}}); err != nil {
			t.Fatal(err)
		}
		user := "u-002"
		if !approve {
			user = "u-003"
		}
		res, rpcErr := callWithTask(t, c, "delete_user", map[string]any{"user_id": user, "password": "hunter2"}, 60000)
		if rpcErr != nil {
			t.Fatal(rpcErr)
		}
		tid := taskIDOf(t, res)
		got, err := c.GetTask(ctx, mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: tid}})
		if err != nil || got.Status != "input_required" {
			t.Fatalf("tasks/get: %+v %v, want input_required", got, err)
		}

		result, err := c.TaskResult(ctx, mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: tid}})
		ans.mu.Lock()
		asked := ans.asked
		ans.mu.Unlock()
		if len(asked) != 1 {
			t.Fatalf("approve=%v: the requester was asked %d times", approve, len(asked))
		}
		q, _ := json.Marshal(asked[0].Params)
		if !strings.Contains(string(q), "[REDACTED]") || strings.Contains(string(q), "hunter2") || !strings.Contains(string(q), tid) {
			t.Errorf("question not redacted or not related to the task: %s", q)
		}
		if approve {
			if err != nil || len(result.Content) == 0 || !strings.Contains(result.Content[0].(mcp.TextContent).Text, user) {
				t.Fatalf("approved by the requester: %+v %v", result, err)
			}
		} else if err == nil || !strings.Contains(err.Error(), "32007") && !strings.Contains(strings.ToLower(err.Error()), "reject") {
			t.Fatalf("rejected by the requester: %+v %v", result, err)
		}
		_, view := g.AdminRequest(t, "GET", "/api/v1/approvals/"+tid, testkit.AdminToken, "")
		if testkit.Dig(view, "decision", "by") != "requester" {
			t.Errorf("decision = %v, want by requester", view["decision"])
		}
		cancel()
		_ = c.Close()
	}
	if d.Calls("delete_user") != 1 {
		t.Errorf("upstream executions = %d, want 1 (only the approved call)", d.Calls("delete_user"))
	}
}
