package gwtools

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/events"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

type echoExecutor struct{}

func (echoExecutor) Execute(context.Context, *tasks.Task) (json.RawMessage, *jsonrpc.Error) {
	return json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`), nil
}

// With the real task manager: Subscribe → PublishTaskChange → tollgate_await_activity, and
// tollgate_get_task_result waiting across an approval.
func TestWithManager(t *testing.T) {
	m := tasks.NewManager(store.NewMemory(), echoExecutor{}, nil, tasks.Options{})
	defer m.Close()
	hub := events.NewHub(events.Options{})
	g := New(m, hub, nil, Options{})
	defer m.Subscribe(g.PublishTaskChange)()

	ctx := context.Background()
	task, err := m.Create(ctx, tasks.CreateRequest{Owner: "alice", SessionID: "sess-alice", Tool: "delete_user",
		Arguments: json.RawMessage(`{"secret":"hunter2"}`), Workflow: "default"})
	if err != nil {
		t.Fatal(err)
	}
	d := call(t, g, alice, ToolAwaitActivity, `{"timeout_ms":0}`)
	if !strings.Contains(string(d.StructuredContent["events"]), `"task_created"`) {
		t.Fatalf("events = %s", d.StructuredContent["events"])
	}
	if got := call(t, g, Caller{Owner: "bob", SessionID: "sess-bob"}, ToolGetTask, `{"task_id":"`+task.ID+`"}`); !got.IsError {
		t.Fatal("bob sees alice's task")
	}

	var wg sync.WaitGroup
	wg.Go(func() {
		// Approval may land before or while the call waits; both must give the result.
		if _, err := m.Approve(ctx, task.ID, "carol", "fine"); err != nil {
			t.Error(err)
		}
	})
	d = call(t, g, alice, ToolGetTaskResult, `{"task_id":"`+task.ID+`","timeout_ms":60000}`)
	wg.Wait()
	if d.IsError || d.Content[0].Text != "done" || !strings.Contains(string(d.Meta[tasks.RelatedTaskKey]), task.ID) {
		t.Fatalf("result = %+v", d)
	}

	// Events ride along on the result (seed 002: any tool response delivers them); anything
	// published after it comes with the next await.
	seen := map[string]bool{}
	for _, typ := range []string{events.TypeTaskDecided, events.TypeTaskCompleted} {
		if strings.Contains(d.text(), `"type":"`+typ+`"`) {
			seen[typ] = true
		}
	}
	for !seen[events.TypeTaskCompleted] {
		d = call(t, g, alice, ToolAwaitActivity, `{"timeout_ms":10000}`)
		var evs []events.Event
		if err := json.Unmarshal(d.StructuredContent["events"], &evs); err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			t.Fatalf("no events: %s", d.text())
		}
		for _, e := range evs {
			seen[e.Type] = true
		}
	}
	if !seen[events.TypeTaskDecided] {
		t.Fatalf("events seen: %v", seen)
	}
}
