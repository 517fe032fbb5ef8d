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

// askingExecutor is a tool that asks its owner one elicitation and one sampling question
// during the call (tasks.AskerFrom) and returns what it got.
type askingExecutor struct{}

func (askingExecutor) Execute(ctx context.Context, _ *tasks.Task) (json.RawMessage, *jsonrpc.Error) {
	ask := tasks.AskerFrom(ctx)
	var got []string
	for _, m := range []string{tasks.MethodElicit, tasks.MethodSample} {
		res, rpcErr := ask(ctx, m, json.RawMessage(`{"message":"type the repository name","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}`))
		if rpcErr != nil {
			return nil, rpcErr
		}
		got = append(got, string(res))
	}
	b, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": strings.Join(got, " | ")}}})
	return b, nil
}

// TestAnswerQuestionWithManager: a client without tasks sees the tool's question in
// tollgate_await_activity (woken by task_input_required) and tollgate_get_task, with its ids
// and schema; another caller cannot answer it; tollgate_answer_question answers it once; the
// result carries both answers.
func TestAnswerQuestionWithManager(t *testing.T) {
	m := tasks.NewManager(store.NewMemory(), askingExecutor{}, nil, tasks.Options{})
	defer m.Close()
	hub := events.NewHub(events.Options{})
	g := New(m, hub, nil, Options{})
	defer m.Subscribe(g.PublishTaskChange)()
	ctx := context.Background()
	task, err := m.Create(ctx, tasks.CreateRequest{Owner: "alice", SessionID: "sess-alice", Tool: "delete_repo", Workflow: "default"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Approve(ctx, task.ID, "carol", ""); err != nil {
		t.Fatal(err)
	}

	// waitQuestion awaits activity until the task's pending question of kind shows.
	waitQuestion := func(kind string) taskQuestion {
		t.Helper()
		for range 20 {
			d := call(t, g, alice, ToolAwaitActivity, `{"timeout_ms":5000}`)
			var pc map[string][]taskQuestion
			_ = json.Unmarshal(d.StructuredContent["pending_client"], &pc)
			if qs := pc[kind]; len(qs) == 1 {
				if !strings.Contains(string(d.StructuredContent["events"]), `"task_input_required"`) && !strings.Contains(d.text(), "waiting for your answer") {
					t.Fatalf("await_activity shows the question without saying so: %s", d.text())
				}
				return qs[0]
			}
		}
		t.Fatalf("no pending %s", kind)
		return taskQuestion{}
	}
	q := waitQuestion("elicitations")
	if q.TaskID != task.ID || q.Method != tasks.MethodElicit || !strings.Contains(string(q.Params), "requestedSchema") {
		t.Fatalf("question %+v", q)
	}
	d := call(t, g, alice, ToolGetTask, `{"task_id":"`+task.ID+`"}`)
	if !strings.Contains(string(d.StructuredContent["pending_client"]), `"questionId":"`+q.QuestionID+`"`) ||
		!strings.Contains(string(d.StructuredContent["task"]), `"status":"input_required"`) {
		t.Fatalf("get_task: %s", d.text())
	}
	answer := func(c Caller, qid, ans string) decoded {
		return call(t, g, c, ToolAnswerQuestion, `{"task_id":"`+task.ID+`","question_id":"`+qid+`","answer":`+ans+`}`)
	}
	if d := answer(Caller{Owner: "bob", SessionID: "sess-bob"}, q.QuestionID, `{"action":"accept","content":{"name":"x"}}`); !d.IsError || !strings.Contains(d.text(), "not found") {
		t.Fatalf("bob answered alice's question: %s", d.text())
	}
	if d := answer(alice, q.QuestionID, `{"action":"perhaps"}`); !d.IsError {
		t.Fatalf("an invalid answer was taken: %s", d.text())
	}
	if d := answer(alice, q.QuestionID, `{"action":"accept","content":{"name":"tollgate"}}`); d.IsError {
		t.Fatalf("answer: %s", d.text())
	}
	if d := answer(alice, q.QuestionID, `{"action":"decline"}`); !d.IsError || !strings.Contains(d.text(), "no pending question") {
		t.Fatalf("second answer: %s", d.text())
	}
	q = waitQuestion("sampling_requests")
	if d := answer(alice, q.QuestionID, `"{\"role\":\"assistant\",\"content\":{\"type\":\"text\",\"text\":\"ok\"},\"model\":\"m\"}"`); d.IsError {
		t.Fatalf("sampling answer (as a JSON string): %s", d.text())
	}
	d = call(t, g, alice, ToolGetTaskResult, `{"task_id":"`+task.ID+`","timeout_ms":10000}`)
	want := `{"action":"accept","content":{"name":"tollgate"}} | {"role":"assistant","content":{"type":"text","text":"ok"},"model":"m"}`
	if d.IsError || len(d.Content) == 0 || d.Content[0].Text != want {
		t.Fatalf("result %+v, want %q", d, want)
	}
}
