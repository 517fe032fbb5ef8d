package notify

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

// okExec answers every approved call with a fixed result.
type okExec struct{}

func (okExec) Execute(context.Context, *tasks.Task) (json.RawMessage, *jsonrpc.Error) {
	return json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`), nil
}

// TestWithManager: a real tasks.Manager announces a held call once when it is created and
// once when it is approved; execution and completion send nothing more.
func TestWithManager(t *testing.T) {
	r := newReceiver(t, nil)
	ops := hook(r.srv.URL + "/hook?token=x")
	ops.Timeout = config.Duration(10 * time.Minute)
	wfs := map[string]config.Workflow{
		"ops":     ops,
		"marker":  hook(r.srv.URL + "/marker"),
		"default": {Destination: config.Destination{Type: config.DestinationConsole}, Timeout: config.Duration(time.Minute)},
	}
	workflow := func(name string) (config.Workflow, bool) { w, ok := wfs[name]; return w, ok }

	f := newFixture(t, wfs, true)
	m := tasks.NewManager(store.NewMemory(), okExec{}, nil, tasks.Options{Workflow: workflow})
	t.Cleanup(func() { _ = m.Close() })
	unsub := m.Subscribe(f.n.OnTaskChange)
	t.Cleanup(unsub)

	ctx := context.Background()
	tk, err := m.Create(ctx, tasks.CreateRequest{
		Owner: "session-1", SessionID: "session-1", RequestedBy: "carol", Tool: "delete_file",
		Arguments: args, Workflow: "ops",
	})
	if err != nil {
		t.Fatal(err)
	}
	first := decodeWebhook(t, r.next(t).body)
	if first.Event != EventRequested || first.TaskID != tk.ID || first.State != string(tasks.AwaitingApproval) ||
		first.ApprovalDeadline == nil || first.Decision != nil {
		t.Errorf("first event = %+v", first)
	}

	if _, err := m.Approve(ctx, tk.ID, "alice", "looks fine"); err != nil {
		t.Fatal(err)
	}
	second := decodeWebhook(t, r.next(t).body)
	if second.Event != EventDecided || second.TaskID != tk.ID || second.State != string(tasks.Approved) ||
		second.Decision == nil || !second.Decision.Approved || second.Decision.By != "alice" || second.Decision.Reason != "looks fine" {
		t.Errorf("second event = %+v", second)
	}

	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, rpcErr, err := m.Result(rctx, "session-1", tk.ID); err != nil || rpcErr != nil {
		t.Fatalf("Result: %v %v", err, rpcErr)
	}
	// Executing and Completed were published before Result returned. A marker event sent
	// now reaches the receiver after anything they could have queued (one FIFO worker).
	f.n.OnTaskChange(moved(&tasks.Task{ID: "tg_marker", Tool: "marker", Workflow: "marker", State: tasks.AwaitingApproval}))
	if d := decodeWebhook(t, r.next(t).body); d.TaskID != "tg_marker" {
		t.Errorf("after the approval the receiver got %s for task %s, want only the marker", d.Event, d.TaskID)
	}

	// A task of a console workflow is not announced.
	if _, err := m.Create(ctx, tasks.CreateRequest{Owner: "session-1", Tool: "delete_file", Workflow: "default"}); err != nil {
		t.Fatal(err)
	}
	f.n.OnTaskChange(moved(&tasks.Task{ID: "tg_marker2", Tool: "marker", Workflow: "marker", State: tasks.AwaitingApproval}))
	if d := decodeWebhook(t, r.next(t).body); d.TaskID != "tg_marker2" {
		t.Errorf("a console workflow's task was announced: %s %s", d.Event, d.TaskID)
	}
}

func decodeWebhook(t *testing.T, b []byte) Webhook {
	t.Helper()
	var w Webhook
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatalf("webhook body: %v", err)
	}
	return w
}
