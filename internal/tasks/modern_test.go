package tasks

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
)

// TestModernWire pins the tasks extension's Task shapes (tasks-extension-spec.md "Task
// Status", "Task Polling" 1–5, "Task Execution Errors", "Task Creation").
func TestModernWire(t *testing.T) {
	now := time.Date(2026, 7, 28, 10, 0, 0, 0, time.UTC)
	base := func(s State) *Task {
		return &Task{ID: "tg_1", State: s, CreatedAt: now, UpdatedAt: now, TTL: time.Minute, PollInterval: 2 * time.Second}
	}
	rpcErr := jsonrpc.NewError(-32007, "ApprovalRejected", "no")
	cases := []struct {
		name, spec string
		task       *Task
		status     string
		has, hasnt []string
	}{
		{"awaiting approval is working", "Task Status: working", base(AwaitingApproval), "working", nil, []string{"result", "error", "inputRequests"}},
		{"asked of the requester is input_required with inputRequests", "Task Polling 2: MUST include inputRequests",
			func() *Task { t := base(AwaitingApproval); t.AskRequester = true; return t }(), "input_required", []string{"inputRequests"}, []string{"result"}},
		{"completed inlines result", "Task Polling 3: MUST include result",
			func() *Task { t := base(Completed); t.Result = json.RawMessage(`{"content":[]}`); return t }(), "completed", []string{"result"}, []string{"error"}},
		{"isError is completed, not failed", "Task Execution Errors: failed MUST NOT be used for isError",
			func() *Task { t := base(Failed); t.Result = json.RawMessage(`{"content":[],"isError":true}`); return t }(), "completed", []string{"result"}, []string{"error"}},
		{"a JSON-RPC error is failed with error", "Task Polling 5 / Task Execution Errors: MUST include error",
			func() *Task { t := base(Failed); t.Error = rpcErr; return t }(), "failed", []string{"error"}, []string{"result"}},
		{"rejected is failed with its error", "Task Execution Errors",
			func() *Task { t := base(Rejected); t.Error = rpcErr; return t }(), "failed", []string{"error"}, nil},
		{"cancelled", "Task Polling 4", func() *Task { t := base(Cancelled); t.Error = rpcErr; return t }(), "cancelled", nil, []string{"error", "result"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal(tc.task.DetailedJSON(json.RawMessage(`{"k":{"method":"elicitation/create","params":{}}}`)), &m); err != nil {
				t.Fatal(err)
			}
			if m["status"] != tc.status || m["resultType"] != "complete" || m["ttlMs"] != float64(60000) || m["pollIntervalMs"] != float64(2000) || m["ttl"] != nil {
				t.Fatalf("%s: %v", tc.spec, m)
			}
			for _, k := range tc.has {
				if m[k] == nil {
					t.Errorf("%s: %s missing in %v", tc.spec, k, m)
				}
			}
			for _, k := range tc.hasnt {
				if m[k] != nil {
					t.Errorf("%s: unexpected %s in %v", tc.spec, k, m)
				}
			}
			var c map[string]any
			_ = json.Unmarshal(tc.task.CreateTaskResult(), &c)
			if c["resultType"] != "task" || c["taskId"] != "tg_1" || c["inputRequests"] != nil || c["result"] != nil || c["error"] != nil {
				t.Errorf("Task Creation: CreateTaskResult = %v", c)
			}
		})
	}
}

// TestModernAwaitingStatusMessage: a 2026-07-28 requester learns from every poll (tasks/get's
// DetailedTask), and from the CreateTaskResult, that a human must decide and where (issue 19:
// a task-aware client waiting on an approval is told why).
func TestModernAwaitingStatusMessage(t *testing.T) {
	const console = "http://127.0.0.1:7469/approvals"
	e := newEnv(t, nil, func(o *Options, _ *fakeExec) { o.ConsoleURL = console })
	tk := e.create(t, "alice", func(r *CreateRequest) { r.Era = EraModern })
	want := "Awaiting approval by a human (workflow default): approve in the console at " + console +
		" or with `tollgate approvals approve " + tk.ID + "`"
	var c map[string]any
	if err := json.Unmarshal(tk.CreateTaskResult(), &c); err != nil || c["statusMessage"] != want {
		t.Fatalf("CreateTaskResult statusMessage = %v (%v); want %q", c["statusMessage"], err, want)
	}
	for poll := range 3 {
		e.clock.Advance(2 * time.Second)
		got, err := e.m.Get(bg, "alice", tk.ID)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(got.DetailedJSON(nil), &m); err != nil {
			t.Fatal(err)
		}
		if m["status"] != "working" || m["statusMessage"] != want {
			t.Fatalf("poll %d: tasks/get = %v; want working with statusMessage %q", poll, m, want)
		}
	}
}
