package gwtools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tollgate-mcp/tollgate/internal/events"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var alice = Caller{Owner: "alice", SessionID: "sess-alice"}

// decoded is a CallToolResult as a client sees it.
type decoded struct {
	Meta              map[string]json.RawMessage `json:"_meta"`
	Content           []struct{ Type, Text string }
	StructuredContent map[string]json.RawMessage `json:"structuredContent"`
	IsError           bool                       `json:"isError"`
	Extra             json.RawMessage            `json:"extra"`
}

func (d decoded) text() string {
	var parts []string
	for _, c := range d.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}

func call(t *testing.T, g *Tools, c Caller, name, args string) decoded {
	t.Helper()
	raw, rpcErr := g.Call(context.Background(), c, name, json.RawMessage(args))
	if rpcErr != nil {
		t.Fatalf("%s: unexpected JSON-RPC error %v", name, rpcErr)
	}
	var d decoded
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: result %s: %v", name, raw, err)
	}
	if strings.Contains(string(raw), "hunter2") {
		t.Fatalf("%s: result leaks tool arguments: %s", name, raw)
	}
	return d
}

func setup() (*fakeTasks, *events.Hub, *fakePending, *Tools) {
	f := newFake()
	f.add("tg_wait", "alice", "delete_user", tasks.AwaitingApproval)
	f.add("tg_run", "alice", "transfer_funds", tasks.Executing)
	f.add("tg_done", "alice", "delete_file", tasks.Completed)
	f.tasks["tg_done"].Result = json.RawMessage(`{"content":[{"type":"text","text":"deleted"}],"structuredContent":{"n":1},"extra":"kept"}`)
	f.add("tg_bob", "bob", "delete_user", tasks.AwaitingApproval)
	hub := events.NewHub(events.Options{})
	p := &fakePending{}
	return f, hub, p, New(f, hub, p, Options{MaxAwait: time.Minute, DefaultAwait: 50 * time.Millisecond})
}

func TestUnknownToolIsInvalidParams(t *testing.T) {
	_, _, _, g := setup()
	raw, rpcErr := g.Call(context.Background(), alice, "tollgate_nope", nil)
	if raw != nil || rpcErr == nil || rpcErr.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("got %s, %v; want -32602", raw, rpcErr)
	}
	if g.Has("tollgate_nope") || !g.Has(ToolAwaitActivity) {
		t.Fatal("Has is wrong")
	}
}

func TestListTasks(t *testing.T) {
	tests := []struct {
		name      string
		args      string
		wantErr   string // substring of an isError result
		wantIDs   []string
		wantFinal bool // filter IncludeFinished
	}{
		{"default lists unfinished", `{}`, "", []string{"tg_wait", "tg_run"}, false},
		{"null args", `null`, "", []string{"tg_wait", "tg_run"}, false},
		{"include finished", `{"include_finished":true}`, "", []string{"tg_wait", "tg_run", "tg_done"}, true},
		{"wire status working", `{"status":"working"}`, "", []string{"tg_wait", "tg_run"}, false},
		{"internal state", `{"status":"awaiting_approval"}`, "", []string{"tg_wait"}, false},
		{"finished status implies finished", `{"status":"completed"}`, "", []string{"tg_done"}, true},
		{"limit", `{"limit":1}`, "", []string{"tg_wait"}, false},
		{"unknown status", `{"status":"paused"}`, "unknown status", nil, false},
		{"status not a string", `{"status":3}`, "status must be a string", nil, false},
		{"bad bool", `{"include_finished":"yes"}`, "include_finished must be true or false", nil, false},
		{"negative limit", `{"limit":-1}`, "limit must be", nil, false},
		{"fractional limit", `{"limit":1.5}`, "limit must be", nil, false},
		{"unknown argument", `{"state":"working"}`, "unknown argument(s) state", nil, false},
		{"not an object", `[1]`, "expected a JSON object", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, _, _, g := setup()
			d := call(t, g, alice, ToolListTasks, tc.args)
			if tc.wantErr != "" {
				if !d.IsError || !strings.Contains(d.text(), tc.wantErr) {
					t.Fatalf("got isError=%v %q, want error containing %q", d.IsError, d.text(), tc.wantErr)
				}
				return
			}
			if d.IsError {
				t.Fatalf("unexpected error: %s", d.text())
			}
			var list []taskView
			if err := json.Unmarshal(d.StructuredContent["tasks"], &list); err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, v := range list {
				ids = append(ids, v.TaskID)
				if v.TaskID == "tg_bob" {
					t.Fatal("foreign task listed")
				}
			}
			if fmt.Sprint(ids) != fmt.Sprint(tc.wantIDs) {
				t.Fatalf("ids = %v, want %v", ids, tc.wantIDs)
			}
			if f.lastFilter.IncludeFinished != tc.wantFinal {
				t.Fatalf("IncludeFinished = %v, want %v", f.lastFilter.IncludeFinished, tc.wantFinal)
			}
			if !strings.Contains(d.Content[0].Text, fmt.Sprintf("%d task(s)", len(tc.wantIDs))) {
				t.Fatalf("summary = %q", d.Content[0].Text)
			}
		})
	}
}

func TestGetTask(t *testing.T) {
	tests := []struct {
		name       string
		caller     Caller
		args       string
		wantErr    string
		wantStatus string
		wantState  string
	}{
		{"own waiting task", alice, `{"task_id":"tg_wait"}`, "", "working", "awaiting_approval"},
		{"own finished task", alice, `{"task_id":"tg_done"}`, "", "completed", "completed"},
		{"foreign task is not found", alice, `{"task_id":"tg_bob"}`, "tg_bob not found", "", ""},
		{"unknown task", alice, `{"task_id":"tg_nope"}`, "not found", "", ""},
		{"missing id", alice, `{}`, "task_id is required", "", ""},
		{"empty id", alice, `{"task_id":""}`, "task_id is required", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, p, g := setup()
			p.server = []json.RawMessage{json.RawMessage(`{"taskId":"up-1","status":"working"}`)}
			p.client = []json.RawMessage{
				json.RawMessage(`{"jsonrpc":"2.0","id":7,"method":"elicitation/create","params":{"message":"Name?"}}`),
				json.RawMessage(`{"jsonrpc":"2.0","id":8,"method":"sampling/createMessage","params":{}}`),
				json.RawMessage(`{"jsonrpc":"2.0","id":9,"method":"roots/list"}`),
			}
			d := call(t, g, tc.caller, ToolGetTask, tc.args)
			if tc.wantErr != "" {
				if !d.IsError || !strings.Contains(d.text(), tc.wantErr) {
					t.Fatalf("got %q, want error containing %q", d.text(), tc.wantErr)
				}
				return
			}
			var v taskView
			if err := json.Unmarshal(d.StructuredContent["task"], &v); err != nil {
				t.Fatal(err)
			}
			if v.Status != tc.wantStatus || v.State != tc.wantState || v.TTL != 3600000 || v.PollInterval != 1000 {
				t.Fatalf("view = %+v", v)
			}
			if p.gotSession != "sess-alice" || p.gotTask != v.TaskID {
				t.Fatalf("PendingFor(%q, %q)", p.gotSession, p.gotTask)
			}
			var pc pendingClient
			if err := json.Unmarshal(d.StructuredContent["pending_client"], &pc); err != nil {
				t.Fatal(err)
			}
			if len(pc.Elicitations) != 1 || len(pc.SamplingRequests) != 1 || len(pc.Other) != 1 {
				t.Fatalf("pending_client = %+v", pc)
			}
			if !strings.Contains(string(d.StructuredContent["pending_server"]), `"up-1"`) {
				t.Fatalf("pending_server = %s", d.StructuredContent["pending_server"])
			}
		})
	}
}

func TestGetTaskResult(t *testing.T) {
	rejected := jsonrpc.NewError(jsonrpc.CodeApprovalRejected, "ApprovalRejected", "rejected by alice: no")
	tests := []struct {
		name    string
		args    string
		prepare func(f *fakeTasks)
		later   func(f *fakeTasks) // run from another goroutine while the call waits
		check   func(t *testing.T, d decoded)
	}{
		{
			name: "completed returns the original result marked with the task",
			args: `{"task_id":"tg_done"}`,
			check: func(t *testing.T, d decoded) {
				if d.IsError || d.Content[0].Text != "deleted" || string(d.StructuredContent["n"]) != "1" || string(d.Extra) != `"kept"` {
					t.Fatalf("result not passed through: %+v", d)
				}
				if got := string(d.Meta[tasks.RelatedTaskKey]); got != `{"taskId":"tg_done"}` {
					t.Fatalf("related-task = %s", got)
				}
			},
		},
		{
			name:    "rejected is a tool error with the JSON-RPC error",
			args:    `{"task_id":"tg_wait","timeout_ms":0}`,
			prepare: func(f *fakeTasks) { f.finish("tg_wait", tasks.Rejected, nil, rejected) },
			check: func(t *testing.T, d decoded) {
				if !d.IsError || !strings.Contains(d.text(), "ApprovalRejected (-32007)") {
					t.Fatalf("got %+v", d)
				}
				if !strings.Contains(string(d.StructuredContent["error"]), `-32007`) {
					t.Fatalf("structured = %s", d.StructuredContent["error"])
				}
			},
		},
		{
			name:  "still working with zero timeout returns status, not an error",
			args:  `{"task_id":"tg_wait","timeout_ms":0}`,
			check: wantStillRunning("tg_wait"),
		},
		{
			name:  "wait ends before the task: status",
			args:  `{"task_id":"tg_run","timeout_ms":5}`,
			check: wantStillRunning("tg_run"),
		},
		{
			name:  "default wait ends before the task: status",
			args:  `{"task_id":"tg_run"}`,
			check: wantStillRunning("tg_run"),
		},
		{
			name: "task finishes while waiting",
			args: `{"task_id":"tg_run","timeout_ms":60000}`,
			later: func(f *fakeTasks) {
				f.finish("tg_run", tasks.Completed, json.RawMessage(`{"content":[{"type":"text","text":"sent"}]}`), nil)
			},
			check: func(t *testing.T, d decoded) {
				if d.IsError || d.Content[0].Text != "sent" {
					t.Fatalf("got %+v", d)
				}
			},
		},
		{
			name:  "foreign task",
			args:  `{"task_id":"tg_bob"}`,
			check: wantToolError("not found"),
		},
		{
			name:  "negative timeout",
			args:  `{"task_id":"tg_run","timeout_ms":-1}`,
			check: wantToolError("timeout_ms must be 0 or more"),
		},
		{
			name:  "timeout not a number",
			args:  `{"task_id":"tg_run","timeout_ms":"5s"}`,
			check: wantToolError("timeout_ms must be an integer"),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, _, _, g := setup()
			if tc.prepare != nil {
				tc.prepare(f)
			}
			var wg sync.WaitGroup
			if tc.later != nil {
				wg.Go(func() {
					waitUntil(t, func() bool { return waitersOf(f) })
					tc.later(f)
				})
			}
			d := call(t, g, alice, ToolGetTaskResult, tc.args)
			wg.Wait()
			tc.check(t, d)
		})
	}
}

func TestGetTaskResultCappedByMaxAwait(t *testing.T) {
	f, hub, _, _ := setup()
	g := New(f, hub, nil, Options{MaxAwait: 5 * time.Millisecond})
	d := call(t, g, alice, ToolGetTaskResult, `{"task_id":"tg_run","timeout_ms":86400000}`)
	wantStillRunning("tg_run")(t, d)
}

func TestCancelTask(t *testing.T) {
	tests := []struct {
		name    string
		args    string
		wantErr string
	}{
		{"cancel waiting task", `{"task_id":"tg_wait"}`, ""},
		{"finished task", `{"task_id":"tg_done"}`, "already finished (completed)"},
		{"foreign task", `{"task_id":"tg_bob"}`, "not found"},
		{"missing id", `{}`, "task_id is required"},
		{"id not a string", `{"task_id":42}`, "task_id must be a string"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, _, _, g := setup()
			d := call(t, g, alice, ToolCancelTask, tc.args)
			if tc.wantErr != "" {
				wantToolError(tc.wantErr)(t, d)
				if f.tasks["tg_bob"].State != tasks.AwaitingApproval {
					t.Fatal("foreign task changed")
				}
				return
			}
			if d.IsError || string(d.StructuredContent["success"]) != "true" || f.tasks["tg_wait"].State != tasks.Cancelled {
				t.Fatalf("got %+v", d)
			}
		})
	}
}

func TestAwaitActivity(t *testing.T) {
	tests := []struct {
		name         string
		args         string
		before       func(h *events.Hub)
		during       func(h *events.Hub) // published from another goroutine while waiting
		wantTrigger  string
		wantEvents   int
		wantErr      string
		wantLastID   bool
		wantEvictedN int
	}{
		{
			name:        "timeout with nothing",
			args:        `{"timeout_ms":1}`,
			wantTrigger: `[{"type":"timeout"}]`,
		},
		{
			name:        "zero timeout checks without waiting",
			args:        `{"timeout_ms":0}`,
			wantTrigger: `[{"type":"timeout"}]`,
		},
		{
			name:        "immediate when events are waiting",
			args:        `{"timeout_ms":60000}`,
			before:      func(h *events.Hub) { h.Publish("sess-alice", events.TypeTaskDecided, "tg_wait", nil) },
			wantTrigger: `[{"type":"immediate"}]`,
			wantEvents:  1,
			wantLastID:  true,
		},
		{
			name:        "woken by a publish from another goroutine",
			args:        `{"timeout_ms":60000}`,
			during:      func(h *events.Hub) { h.Publish("sess-alice", events.TypeTaskCompleted, "tg_run", nil) },
			wantTrigger: `[{"type":"event","eventType":"task_completed","taskId":"tg_run"}]`,
			wantEvents:  1,
			wantLastID:  true,
		},
		{
			name: "evictions reported",
			args: `{}`,
			before: func(h *events.Hub) {
				for range 5 {
					h.Publish("sess-alice", events.TypeNotification, "", nil)
				}
			},
			wantTrigger:  `[{"type":"immediate"}]`,
			wantEvents:   3,
			wantLastID:   true,
			wantEvictedN: 2,
		},
		{
			name:        "other sessions' events are not seen",
			args:        `{"timeout_ms":1}`,
			before:      func(h *events.Hub) { h.Publish("sess-bob", events.TypeTaskCreated, "tg_bob", nil) },
			wantTrigger: `[{"type":"timeout"}]`,
		},
		{
			name:        "session closed while waiting",
			args:        `{"timeout_ms":60000}`,
			during:      func(h *events.Hub) { h.CloseSession("sess-alice") },
			wantTrigger: `[{"type":"session_closed"}]`,
		},
		{name: "negative timeout", args: `{"timeout_ms":-5}`, wantErr: "timeout_ms must be 0 or more"},
		{name: "unknown argument", args: `{"timeout":5}`, wantErr: "unknown argument(s) timeout; allowed: timeout_ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			f.add("tg_wait", "alice", "delete_user", tasks.AwaitingApproval)
			f.add("tg_done", "alice", "delete_file", tasks.Completed)
			hub := events.NewHub(events.Options{MaxEventsPerSession: 3})
			p := &fakePending{client: []json.RawMessage{json.RawMessage(`{"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"message":"ok?"}}`)}}
			g := New(f, hub, p, Options{MaxAwait: time.Minute})
			if tc.before != nil {
				tc.before(hub)
			}
			var wg sync.WaitGroup
			if tc.during != nil {
				wg.Go(func() {
					waitUntil(t, func() bool { return hubWaiting(hub, "sess-alice") })
					tc.during(hub)
				})
			}
			d := call(t, g, alice, ToolAwaitActivity, tc.args)
			wg.Wait()
			if tc.wantErr != "" {
				wantToolError(tc.wantErr)(t, d)
				return
			}
			if d.IsError {
				t.Fatalf("unexpected error %s", d.text())
			}
			sc := d.StructuredContent
			if got := string(sc["triggers"]); got != tc.wantTrigger {
				t.Fatalf("triggers = %s, want %s", got, tc.wantTrigger)
			}
			var evs []events.Event
			if err := json.Unmarshal(sc["events"], &evs); err != nil || evs == nil {
				t.Fatalf("events = %s (must be an array, never omitted): %v", sc["events"], err)
			}
			if len(evs) != tc.wantEvents {
				t.Fatalf("events = %d, want %d", len(evs), tc.wantEvents)
			}
			if _, ok := sc["lastEventId"]; ok != tc.wantLastID {
				t.Fatalf("lastEventId present = %v", ok)
			}
			if tc.wantEvictedN > 0 && string(sc["events_evicted"]) != fmt.Sprint(tc.wantEvictedN) {
				t.Fatalf("events_evicted = %s", sc["events_evicted"])
			}
			// Category 3 and 4 snapshots (seed 000 §4): only alice's unfinished task.
			if ps := string(sc["pending_server"]); !strings.Contains(ps, `"tg_wait"`) || strings.Contains(ps, "tg_done") {
				t.Fatalf("pending_server = %s", ps)
			}
			if pc := string(sc["pending_client"]); !strings.Contains(pc, `"elicitations":[{`) || !strings.Contains(pc, `"sampling_requests":[]`) {
				t.Fatalf("pending_client = %s", pc)
			}
			if p.gotSession != "sess-alice" || p.gotTask != "" {
				t.Fatalf("PendingFor(%q, %q)", p.gotSession, p.gotTask)
			}
			// The JSON text block mirrors structuredContent (MCP structured content convention).
			if len(d.Content) < 2 || !json.Valid([]byte(d.Content[1].Text)) {
				t.Fatalf("content = %+v", d.Content)
			}
			if hub.Pending("sess-alice") != 0 {
				t.Fatal("events left undelivered")
			}
		})
	}
}

func TestAwaitActivityCallerGone(t *testing.T) {
	f := newFake()
	g := New(f, nil, nil, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	raw, rpcErr := g.Call(ctx, alice, ToolAwaitActivity, json.RawMessage(`{"timeout_ms":60000}`))
	if raw != nil || rpcErr == nil {
		t.Fatalf("got %s, %v", raw, rpcErr)
	}
}

func TestStoreFailureIsInternalError(t *testing.T) {
	for _, name := range []string{ToolListTasks, ToolGetTask, ToolGetTaskResult, ToolCancelTask} {
		t.Run(name, func(t *testing.T) {
			f, _, _, g := setup()
			f.failWith = errBoom
			raw, rpcErr := g.Call(context.Background(), alice, name, json.RawMessage(`{"task_id":"tg_wait"}`))
			if name == ToolListTasks {
				raw, rpcErr = g.Call(context.Background(), alice, name, nil)
			}
			if raw != nil || rpcErr == nil || rpcErr.Code != jsonrpc.CodeInternalError || strings.Contains(rpcErr.Message, "store down") {
				t.Fatalf("got %s, %v", raw, rpcErr)
			}
		})
	}
}

// Undelivered events ride along on every other tollgate_* result, exactly once.
func TestEventsAppendedOnce(t *testing.T) {
	tests := []struct {
		tool, args string
	}{
		{ToolListTasks, `{}`},
		{ToolGetTask, `{"task_id":"tg_wait"}`},
		{ToolGetTask, `{"task_id":"tg_nope"}`}, // error results carry them too
		{ToolCancelTask, `{"task_id":"tg_wait"}`},
		{ToolGetTaskResult, `{"task_id":"tg_done"}`}, // raw upstream result
	}
	for _, tc := range tests {
		t.Run(tc.tool+tc.args, func(t *testing.T) {
			_, hub, _, g := setup()
			hub.Publish("sess-alice", events.TypeTaskCreated, "tg_wait", map[string]any{"toolName": "delete_user"})
			hub.Publish("sess-alice", events.TypeNotification, "", nil)

			first := call(t, g, alice, tc.tool, tc.args)
			if n := strings.Count(first.text(), `"events_since_last_response"`); n != 1 {
				t.Fatalf("first result has %d event blocks: %s", n, first.text())
			}
			if !strings.Contains(first.text(), `"type":"task_created"`) || !strings.Contains(first.text(), `"type":"notification"`) {
				t.Fatalf("events missing: %s", first.text())
			}
			second := call(t, g, alice, tc.tool, tc.args)
			if strings.Contains(second.text(), "events_since_last_response") {
				t.Fatalf("events delivered twice: %s", second.text())
			}
			bob := call(t, g, Caller{Owner: "bob", SessionID: "sess-bob"}, ToolListTasks, `{}`)
			if strings.Contains(bob.text(), "events_since_last_response") {
				t.Fatal("events leaked to another session")
			}
		})
	}
}

func TestDefinitions(t *testing.T) {
	_, _, _, g := setup()
	defs := g.Definitions()
	names := g.Names()
	want := []string{ToolListTasks, ToolGetTask, ToolGetTaskResult, ToolCancelTask, ToolAwaitActivity, ToolAnswerQuestion}
	if fmt.Sprint(names) != fmt.Sprint(want) || len(defs) != len(want) {
		t.Fatalf("names = %v, %d definitions", names, len(defs))
	}
	for i, raw := range defs {
		var def struct {
			Name        string
			Description string
			InputSchema struct {
				Type       string
				Properties map[string]json.RawMessage
				Required   []string
			}
			Execution struct{ TaskSupport string }
		}
		if err := json.Unmarshal(raw, &def); err != nil {
			t.Fatal(err)
		}
		if def.Name != want[i] || def.Description == "" || def.InputSchema.Type != "object" || def.Execution.TaskSupport != "forbidden" {
			t.Fatalf("definition %s", raw)
		}
		if g.Has(def.Name) != true {
			t.Fatalf("Has(%s) = false", def.Name)
		}
		_, hasTaskID := def.InputSchema.Properties["task_id"]
		needsTaskID := def.Name == ToolGetTask || def.Name == ToolGetTaskResult || def.Name == ToolCancelTask || def.Name == ToolAnswerQuestion
		required := "[task_id]"
		if def.Name == ToolAnswerQuestion {
			required = "[task_id question_id answer]"
		}
		if hasTaskID != needsTaskID || (needsTaskID && fmt.Sprint(def.InputSchema.Required) != required) {
			t.Fatalf("task_id schema wrong in %s", raw)
		}
	}
	defs[0][0] = 'X' // callers may not change the tools' copies
	if g.Definitions()[0][0] != '{' {
		t.Fatal("Definitions shares memory")
	}
}

func TestTaskEvent(t *testing.T) {
	tests := []struct {
		from, state tasks.State // from "" is the task's creation
		accelerated bool
		want        string
		ok          bool
	}{
		{"", tasks.AwaitingApproval, false, events.TypeTaskCreated, true},
		{tasks.AwaitingApproval, tasks.Approved, false, events.TypeTaskDecided, true},
		{"", tasks.Approved, true, events.TypeTaskCreated, true},
		{tasks.Approved, tasks.Executing, false, "", false},
		{tasks.AwaitingApproval, tasks.Rejected, false, events.TypeTaskDecided, true},
		{tasks.Executing, tasks.Completed, false, events.TypeTaskCompleted, true},
		{tasks.Executing, tasks.Failed, false, events.TypeTaskFailed, true},
		{tasks.AwaitingApproval, tasks.TimedOut, false, events.TypeTaskFailed, true},
		{tasks.AwaitingApproval, tasks.Cancelled, false, events.TypeTaskCancelled, true},
		{tasks.AwaitingApproval, tasks.Expired, false, events.TypeTaskExpired, true},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.state, tc.accelerated), func(t *testing.T) {
			hub := events.NewHub(events.Options{})
			g := New(newFake(), hub, nil, Options{})
			task := &tasks.Task{ID: "tg_1", Owner: "alice", SessionID: "s1", Tool: "x", State: tc.state,
				Accelerated: tc.accelerated, Arguments: json.RawMessage(`{"secret":"hunter2"}`),
				Decision: &tasks.Decision{Approved: tc.state == tasks.Approved, By: "bob", At: t0}}
			tr := tasks.Transition{From: tc.from, To: tc.state, Task: task}
			typ, _, ok := TaskEvent(tr, nil)
			if typ != tc.want || ok != tc.ok {
				t.Fatalf("TaskEvent = %q, %v; want %q, %v", typ, ok, tc.want, tc.ok)
			}
			g.PublishTaskChange(tr)
			b := hub.Take("s1")
			if !tc.ok {
				if len(b.Events) != 0 {
					t.Fatal("published an event for a quiet state")
				}
				return
			}
			if len(b.Events) != 1 || b.Events[0].Type != tc.want || b.Events[0].TaskID != "tg_1" {
				t.Fatalf("events = %+v", b.Events)
			}
			if strings.Contains(string(b.Events[0].Data), "hunter2") {
				t.Fatal("event data leaks arguments")
			}
		})
	}
}

func wantStillRunning(id string) func(*testing.T, decoded) {
	return func(t *testing.T, d decoded) {
		t.Helper()
		if d.IsError || string(d.StructuredContent["done"]) != "false" || !strings.Contains(d.Content[0].Text, id+" has no result yet") {
			t.Fatalf("got %+v", d)
		}
	}
}

func wantToolError(sub string) func(*testing.T, decoded) {
	return func(t *testing.T, d decoded) {
		t.Helper()
		if !d.IsError || !strings.Contains(d.text(), sub) {
			t.Fatalf("got isError=%v %q, want error containing %q", d.IsError, d.text(), sub)
		}
	}
}

func waitersOf(f *fakeTasks) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.waiting > 0
}

func hubWaiting(h *events.Hub, session string) bool { return h.Waiters(session) > 0 }

func waitUntil(t *testing.T, cond func() bool) {
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Error("condition not reached")
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// TestTaskEventDataAsBefore: a queued task event's data, kept compact and encoded when read,
// is byte for byte the JSON object the event carried when it was built as a map and encoded at
// once (what clients of tollgate_await_activity read): awaiting approval with the standard
// message (rebuilt, one or two approvals needed) and another one, decided, failed, input required.
func TestTaskEventDataAsBefore(t *testing.T) {
	const console = "http://127.0.0.1:7469/approvals?x=<&>"
	asMap := func(tr tasks.Transition, typ string) []byte { // the encoding before
		tk := tr.Task
		data := map[string]any{"toolName": tk.Tool, "status": tk.WireStatus(), "state": string(tk.State)}
		if tk.StatusMessage != "" {
			data["statusMessage"] = tk.StatusMessage
		}
		if d := tk.Decision; d != nil && (typ == events.TypeTaskDecided || tk.State == tasks.TimedOut) {
			data["decision"] = decisionView{Approved: d.Approved, By: d.By, Reason: d.Reason, At: d.At.UTC().Truncate(time.Millisecond)}
		}
		if tk.Error != nil {
			data["error"] = map[string]any{"code": tk.Error.Code, "name": tk.Error.Name(), "message": tk.Error.Message}
		}
		b, _ := json.Marshal(data)
		return b
	}
	at := time.Date(2026, 11, 26, 10, 0, 0, 123456789, time.FixedZone("x", 3600))
	awaiting := func(given, need int) *tasks.Task {
		return &tasks.Task{ID: "tg_a", Tool: "delete_<file>", Workflow: "ops & co", State: tasks.AwaitingApproval, RequiredApprovals: need,
			Approvals: make([]tasks.Vote, given), StatusMessage: tasks.AwaitingMessage("ops & co", "tg_a", console, given, need)}
	}
	other := awaiting(0, 1)
	other.StatusMessage = "Waiting for the requester's answer"
	input := &tasks.Task{ID: "tg_q", Tool: "t", State: tasks.Executing, StatusMessage: "Executing (input required)",
		Question: &tasks.Question{ID: "q1", Method: tasks.MethodElicit}}
	for name, tr := range map[string]tasks.Transition{
		"requested":  {To: tasks.AwaitingApproval, Task: awaiting(0, 1)},
		"other msg":  {To: tasks.AwaitingApproval, Task: other},
		"two needed": {To: tasks.AwaitingApproval, Task: awaiting(0, 2)},
		"no message": {To: tasks.AwaitingApproval, Task: &tasks.Task{ID: "tg_n", Tool: "t", State: tasks.AwaitingApproval}},
		"rejected": {From: tasks.AwaitingApproval, To: tasks.Rejected, Task: &tasks.Task{ID: "tg_r", Tool: "t", State: tasks.Rejected,
			StatusMessage: "Rejected by bob", Decision: &tasks.Decision{By: "bob", Reason: "no <way>", At: at},
			Error: jsonrpc.NewError(jsonrpc.CodeApprovalRejected, "ApprovalRejected", "rejected by bob: no <way>")}},
		"timed out": {From: tasks.AwaitingApproval, To: tasks.TimedOut, Task: &tasks.Task{ID: "tg_t", Tool: "t", State: tasks.TimedOut,
			Decision: &tasks.Decision{By: tasks.ByTimeout, At: at}, Error: jsonrpc.NewError(jsonrpc.CodeApprovalTimedOut, "ApprovalTimedOut", "timed out")}},
		"input": {From: tasks.Executing, To: tasks.Executing, Task: input},
	} {
		typ, data, ok := TaskEvent(tr, new(console))
		if !ok {
			t.Fatalf("%s: no event", name)
		}
		if d := data.(*taskEventData); d.rebuild != (name == "requested" || name == "two needed") || (d.rebuild && d.msg != "") {
			t.Errorf("%s: message rebuilt %v, kept %q", name, d.rebuild, d.msg)
		}
		if got, want := string(data.EventData()), string(asMap(tr, typ)); got != want {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
}
