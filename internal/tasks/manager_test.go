package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

var bg = context.Background()

func TestCreate(t *testing.T) {
	const console = "http://127.0.0.1:7469/approvals"
	tests := []struct {
		name        string
		req         CreateRequest
		consoleURL  string
		wantTTL     time.Duration
		wantState   State
		wantMessage string // %[1]s is the task id
	}{
		{"ttl 0 uses default", CreateRequest{Workflow: "ops"}, console, 10 * time.Minute, AwaitingApproval,
			"Awaiting approval by a human (workflow ops): approve in the console at " + console + " or with `tollgate approvals approve %[1]s`"},
		{"ttl above max is clamped", CreateRequest{TTL: 48 * time.Hour}, console, time.Hour, AwaitingApproval,
			"Awaiting approval by a human (workflow default): approve in the console at " + console + " or with `tollgate approvals approve %[1]s`"},
		{"ttl kept", CreateRequest{TTL: 90 * time.Second}, console, 90 * time.Second, AwaitingApproval,
			"Awaiting approval by a human (workflow default): approve in the console at " + console + " or with `tollgate approvals approve %[1]s`"},
		{"negative ttl uses default, no console URL", CreateRequest{TTL: -time.Second}, "", 10 * time.Minute, AwaitingApproval,
			"Awaiting approval by a human (workflow default): approve in the approvals console or with `tollgate approvals approve %[1]s`"},
		{"asked of the requester", CreateRequest{AskRequester: true}, console, 10 * time.Minute, AwaitingApproval,
			"Awaiting your approval (default): call tasks/result to answer"},
		{"accelerated", CreateRequest{Accelerated: true, DeferStart: true}, console, 10 * time.Minute, Approved,
			"Approved (forwarded by rule)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil, func(o *Options, _ *fakeExec) { o.ConsoleURL = tc.consoleURL })
			req := tc.req
			req.Owner, req.Tool = "alice", "delete_file"
			req.Arguments = json.RawMessage(`{"path":"/x"}`)
			req.Headers = http.Header{"Authorization": {"Bearer secret"}}
			tk, err := e.m.Create(bg, req)
			if err != nil {
				t.Fatal(err)
			}
			want := strings.ReplaceAll(tc.wantMessage, "%[1]s", tk.ID)
			if tk.TTL != tc.wantTTL || tk.State != tc.wantState || tk.StatusMessage != want {
				t.Errorf("got ttl %s state %s message %q; want %s %s %q", tk.TTL, tk.State, tk.StatusMessage, tc.wantTTL, tc.wantState, want)
			}
			if !strings.HasPrefix(tk.ID, IDPrefix) || tk.ArgsHash != e.m.argsHash("delete_file", req.Arguments) ||
				tk.Version != 1 || tk.PollInterval != 2*time.Second || tk.State.Wire() != "working" {
				t.Errorf("unexpected task %+v", tk)
			}
			got, err := e.m.Get(bg, "alice", tk.ID)
			if err != nil || got.Headers.Get("Authorization") != "Bearer secret" || string(got.Arguments) != `{"path":"/x"}` || got.StatusMessage != want {
				t.Errorf("Get = %+v, %v", got, err)
			}
		})
	}
}

func TestApproveExecutesOnce(t *testing.T) {
	e := newEnv(t, nil)
	tk := e.create(t, "alice")
	if e.exec.calls.Load() != 0 {
		t.Fatal("executed before approval")
	}
	got, err := e.m.Approve(bg, tk.ID, "bob", "looks fine")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != Approved || got.StatusMessage != "Approved by bob" || got.Decision == nil || got.Decision.By != "bob" {
		t.Errorf("after Approve: %+v", got)
	}
	res, rpcErr := e.result(t, "alice", tk.ID)
	if rpcErr != nil || string(res) != okResult {
		t.Errorf("Result = %s, %v; want the exact upstream bytes", res, rpcErr)
	}
	if n := e.exec.calls.Load(); n != 1 {
		t.Errorf("Execute called %d times", n)
	}
	if s := e.state(t, tk.ID); s != Completed {
		t.Errorf("state %s", s)
	}
	// a late second decision conflicts and shows the standing one
	_, err = e.m.Reject(bg, tk.ID, "carol", "")
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Task.Decision.By != "bob" || !ce.Task.Decision.Approved {
		t.Errorf("late Reject err = %v", err)
	}
}

// TestExecutionTimeout: an execution that outlives Options.ExecutionTimeout has its context
// cancelled and fails with -32001 ExecutionTimeout, well before the TTL; it is not run again.
func TestExecutionTimeout(t *testing.T) {
	e := newEnv(t, nil, func(o *Options, f *fakeExec) {
		o.ExecutionTimeout = 50 * time.Millisecond
		f.block = make(chan struct{}) // never closed: a hung upstream
	})
	tk := e.create(t, "alice", func(r *CreateRequest) { r.TTL = time.Hour })
	if _, err := e.m.Approve(bg, tk.ID, "bob", ""); err != nil {
		t.Fatal(err)
	}
	_, rpcErr := e.result(t, "alice", tk.ID)
	if rpcErr == nil || rpcErr.Code != jsonrpc.CodeUpstreamTimeout || rpcErr.Name() != "ExecutionTimeout" {
		t.Fatalf("Result error = %+v, want -32001 ExecutionTimeout", rpcErr)
	}
	if err, _ := e.exec.ctxErr.Load().(error); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the execution's context ended with %v, want its deadline", err)
	}
	if s := e.state(t, tk.ID); s != Failed {
		t.Errorf("state %s, want failed", s)
	}
	e.m.launchApproved(bg) // a restart-like rescan finds nothing to run
	if n := e.exec.calls.Load(); n != 1 {
		t.Errorf("Execute called %d times, want 1", n)
	}
}

func TestDecisions(t *testing.T) {
	tests := []struct {
		name      string
		approve   bool
		approver  string
		exec      *jsonrpc.Error
		result    string
		wantErr   error
		wantState State
		wantCode  int // 0 = a result
	}{
		{"reject", false, "bob", nil, okResult, nil, Rejected, jsonrpc.CodeApprovalRejected},
		{"self approval", true, "alice-id", nil, okResult, ErrSelfApproval, AwaitingApproval, 0},
		{"self rejection", false, "alice-id", nil, okResult, ErrSelfApproval, AwaitingApproval, 0},
		{"self approval in other case", true, "Alice-ID", nil, okResult, ErrSelfApproval, AwaitingApproval, 0},
		{"self approval with spaces", true, " alice-id ", nil, okResult, ErrSelfApproval, AwaitingApproval, 0},
		{"self approval full-width", true, "\uff41lice-id", nil, okResult, ErrSelfApproval, AwaitingApproval, 0},
		{"upstream error", true, "bob", jsonrpc.NewError(-32000, "UpstreamUnreachable", "down"), "", nil, Failed, -32000},
		{"tool isError", true, "bob", nil, `{"content":[],"isError":true}`, nil, Failed, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			e.exec.err, e.exec.result = tc.exec, json.RawMessage(tc.result)
			tk := e.create(t, "alice", func(r *CreateRequest) { r.RequestedBy = "alice-id" })
			decide := e.m.Reject
			if tc.approve {
				decide = e.m.Approve
			}
			_, err := decide(bg, tk.ID, tc.approver, "no")
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil {
				if s := e.state(t, tk.ID); s != tc.wantState {
					t.Errorf("state %s, want %s", s, tc.wantState)
				}
				return
			}
			res, rpcErr := e.result(t, "alice", tk.ID)
			if s := e.state(t, tk.ID); s != tc.wantState {
				t.Errorf("state %s, want %s", s, tc.wantState)
			}
			switch {
			case tc.wantCode == 0 && (rpcErr != nil || string(res) != tc.result):
				t.Errorf("Result = %s, %v; want %s", res, rpcErr, tc.result)
			case tc.wantCode != 0 && (rpcErr == nil || rpcErr.Code != tc.wantCode):
				t.Errorf("Result error = %v, want code %d", rpcErr, tc.wantCode)
			}
		})
	}
}

func TestCancel(t *testing.T) {
	e := newEnv(t, nil)
	e.exec.block, e.exec.started = make(chan struct{}), make(chan string, 1)

	waiting := e.create(t, "alice")
	got, err := e.m.Cancel(bg, "alice", waiting.ID)
	if err != nil || got.State != Cancelled {
		t.Fatalf("Cancel waiting: %+v, %v", got, err)
	}
	if _, rpcErr := e.result(t, "alice", waiting.ID); rpcErr == nil || rpcErr.Name() != "TaskCancelled" {
		t.Errorf("Result of cancelled = %v", rpcErr)
	}
	// seed 003: a cancel after completion is "too late", the result stands
	if _, err := e.m.Cancel(bg, "alice", waiting.ID); !errors.Is(err, ErrTerminal) {
		t.Errorf("second Cancel err = %v, want ErrTerminal", err)
	}

	// cancel while executing: the call's ctx ends, the task stays cancelled
	running := e.create(t, "alice")
	if _, err := e.m.Approve(bg, running.ID, "bob", ""); err != nil {
		t.Fatal(err)
	}
	<-e.exec.started
	if _, err := e.m.Cancel(bg, "alice", running.ID); err != nil {
		t.Fatal(err)
	}
	if _, rpcErr := e.result(t, "alice", running.ID); rpcErr == nil || rpcErr.Name() != "TaskCancelled" {
		t.Errorf("Result = %v, want TaskCancelled", rpcErr)
	}
	_ = e.m.Close() // waits for the execution goroutine
	if s := e.state(t, running.ID); s != Cancelled {
		t.Errorf("state after execution ended: %s", s)
	}
	if err, _ := e.exec.ctxErr.Load().(error); !errors.Is(err, context.Canceled) {
		t.Errorf("executor ctx err = %v, want canceled", err)
	}
}

func TestCancelAfterComplete(t *testing.T) {
	e := newEnv(t, nil)
	tk := e.create(t, "alice", func(r *CreateRequest) { r.Accelerated, r.Workflow = true, "" })
	if res, _ := e.result(t, "alice", tk.ID); string(res) != okResult {
		t.Fatalf("Result = %s", res)
	}
	got, err := e.m.Cancel(bg, "alice", tk.ID)
	if !errors.Is(err, ErrTerminal) || got == nil || got.State != Completed {
		t.Errorf("Cancel = %+v, %v; want the completed task and ErrTerminal", got, err)
	}
	if res, _ := e.result(t, "alice", tk.ID); string(res) != okResult {
		t.Errorf("result changed after a late cancel: %s", res)
	}
}

func TestAccelerated(t *testing.T) {
	e := newEnv(t, nil)
	tk := e.create(t, "alice", func(r *CreateRequest) { r.Accelerated, r.Workflow = true, "" })
	if tk.Decision == nil || tk.Decision.By != ByAccelerated || tk.Workflow != "" {
		t.Errorf("accelerated task %+v", tk)
	}
	if _, rpcErr := e.result(t, "alice", tk.ID); rpcErr != nil || e.exec.calls.Load() != 1 {
		t.Errorf("rpcErr %v, calls %d", rpcErr, e.exec.calls.Load())
	}
	if _, err := e.m.Approve(bg, tk.ID, "bob", ""); !errors.As(err, new(*ConflictError)) {
		t.Errorf("Approve of an accelerated task: %v", err)
	}
}

func TestRecheck(t *testing.T) {
	denied := jsonrpc.NewError(jsonrpc.CodePolicyChanged, "PolicyChanged", "PolicyChanged: rule now denies")
	var seen string
	e := newEnv(t, func(_ context.Context, t *Task) *jsonrpc.Error { seen = t.ID; return denied })
	tk := e.create(t, "alice")
	if _, err := e.m.Approve(bg, tk.ID, "bob", ""); err != nil {
		t.Fatal(err)
	}
	_, rpcErr := e.result(t, "alice", tk.ID)
	if rpcErr == nil || rpcErr.Code != jsonrpc.CodePolicyChanged || seen != tk.ID {
		t.Errorf("Result err = %v (recheck saw %q)", rpcErr, seen)
	}
	if e.exec.calls.Load() != 0 || e.state(t, tk.ID) != Failed {
		t.Errorf("executed %d times, state %s", e.exec.calls.Load(), e.state(t, tk.ID))
	}
}

func TestExpiry(t *testing.T) {
	t.Run("during execution the result is discarded", func(t *testing.T) {
		e := newEnv(t, nil, func(o *Options, _ *fakeExec) { o.Retention = time.Hour })
		e.exec.block, e.exec.started = make(chan struct{}), make(chan string, 1)
		tk := e.create(t, "alice", func(r *CreateRequest) { r.TTL = time.Minute })
		if _, err := e.m.Approve(bg, tk.ID, "bob", ""); err != nil {
			t.Fatal(err)
		}
		<-e.exec.started
		// a waiter that saw the task alive is told TaskExpired
		type answer struct {
			rpcErr *jsonrpc.Error
			err    error
		}
		done := make(chan answer, 1)
		go func() {
			_, rpcErr, err := e.m.Result(bg, "alice", tk.ID)
			done <- answer{rpcErr, err}
		}()
		e.clock.Advance(time.Minute)
		if n := e.m.Sweep(bg); n == 0 {
			t.Error("Sweep found nothing due")
		}
		a := <-done
		if a.err != nil || a.rpcErr == nil || a.rpcErr.Code != jsonrpc.CodeTaskExpired || a.rpcErr.Name() != "TaskExpired" {
			t.Errorf("Result = %v, %v; want -32005 TaskExpired", a.rpcErr, a.err)
		}
		close(e.exec.block) // upstream answers late
		_ = e.m.Close()
		got, _ := e.m.Lookup(bg, tk.ID)
		if got.State != Expired || got.Result != nil {
			t.Errorf("after late result: state %s result %s", got.State, got.Result)
		}
		// after the TTL the owner no longer sees it at all
		if _, err := e.m.Get(bg, "alice", tk.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get after TTL err = %v", err)
		}
	})
	t.Run("finished tasks are deleted after TTL plus retention", func(t *testing.T) {
		e := newEnv(t, nil, func(o *Options, _ *fakeExec) { o.Retention = time.Hour })
		tk := e.create(t, "alice", func(r *CreateRequest) { r.TTL = time.Minute })
		if _, err := e.m.Reject(bg, tk.ID, "bob", ""); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(time.Minute)
		e.m.Sweep(bg)
		if _, err := e.m.Get(bg, "alice", tk.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("owner Get after TTL err = %v", err)
		}
		if s := e.state(t, tk.ID); s != Rejected { // approvers still see it during retention
			t.Errorf("state during retention %s", s)
		}
		e.clock.Advance(time.Hour)
		e.m.Sweep(bg)
		if _, err := e.m.Lookup(bg, tk.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("Lookup after retention err = %v", err)
		}
		if _, err := e.st.Get(bg, tk.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("still in store: %v", err)
		}
	})
}

func TestApprovalTimeout(t *testing.T) {
	tests := []struct {
		onTimeout string
		wantState State
		wantCode  int
		wantCalls int32
	}{
		{"deny", TimedOut, jsonrpc.CodeApprovalTimedOut, 0},
		{"", TimedOut, jsonrpc.CodeApprovalTimedOut, 0},
		{"approve", Completed, 0, 1},
	}
	for _, tc := range tests {
		t.Run("on_timeout="+tc.onTimeout, func(t *testing.T) {
			e := newEnv(t, nil, workflows(map[string]config.Workflow{
				"default": {Timeout: config.Duration(time.Minute), OnTimeout: tc.onTimeout},
			}))
			tk := e.create(t, "alice")
			if !tk.ApprovalDeadline.Equal(tk.CreatedAt.Add(time.Minute)) {
				t.Fatalf("deadline %s", tk.ApprovalDeadline)
			}
			e.clock.Advance(59 * time.Second)
			e.m.Sweep(bg)
			if s := e.state(t, tk.ID); s != AwaitingApproval {
				t.Fatalf("timed out early: %s", s)
			}
			e.clock.Advance(time.Second)
			e.m.Sweep(bg)
			res, rpcErr := e.result(t, "alice", tk.ID)
			got, _ := e.m.Lookup(bg, tk.ID)
			if got.State != tc.wantState || got.Decision == nil || got.Decision.By != ByTimeout {
				t.Errorf("task %+v", got)
			}
			if tc.wantCode == 0 && (rpcErr != nil || string(res) != okResult) || tc.wantCode != 0 && (rpcErr == nil || rpcErr.Code != tc.wantCode) {
				t.Errorf("Result = %s, %v", res, rpcErr)
			}
			if e.exec.calls.Load() != tc.wantCalls {
				t.Errorf("Execute calls %d, want %d", e.exec.calls.Load(), tc.wantCalls)
			}
			if _, err := e.m.Approve(bg, tk.ID, "bob", ""); !errors.As(err, new(*ConflictError)) {
				t.Errorf("Approve after timeout err = %v", err)
			}
		})
	}
}

// TestLateDecisionSeesTimeout: a decision arriving after the deadline, before the sweeper ran,
// still loses to the timeout.
func TestLateDecisionSeesTimeout(t *testing.T) {
	e := newEnv(t, nil, workflows(map[string]config.Workflow{"default": {Timeout: config.Duration(time.Minute)}}))
	tk := e.create(t, "alice")
	e.clock.Advance(2 * time.Minute)
	_, err := e.m.Approve(bg, tk.ID, "bob", "")
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Task.State != TimedOut {
		t.Errorf("err = %v", err)
	}
}

func TestResultBlocksUntilTerminal(t *testing.T) {
	e := newEnv(t, nil)
	tk := e.create(t, "alice")

	ctx, cancel := context.WithCancel(bg)
	errc := make(chan error, 1)
	go func() { _, _, err := e.m.Result(ctx, "alice", tk.ID); errc <- err }()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("Result after ctx cancel: %v", err)
	}
	if s := e.state(t, tk.ID); s != AwaitingApproval {
		t.Errorf("ctx end changed the task: %s", s)
	}

	type answer struct {
		res json.RawMessage
		err error
	}
	done := make(chan answer, 3)
	for range 3 {
		go func() { res, _, err := e.m.Result(bg, "alice", tk.ID); done <- answer{res, err} }()
	}
	select {
	case a := <-done:
		t.Fatalf("Result returned before a decision: %+v", a)
	case <-time.After(20 * time.Millisecond):
	}
	if _, err := e.m.Approve(bg, tk.ID, "bob", ""); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if a := <-done; a.err != nil || string(a.res) != okResult {
			t.Errorf("Result = %s, %v", a.res, a.err)
		}
	}
	e.m.mu.Lock()
	left := len(e.m.waiters)
	e.m.mu.Unlock()
	if left != 0 {
		t.Errorf("%d waiters left behind", left)
	}
}

func TestOwnerIsolation(t *testing.T) {
	e := newEnv(t, nil)
	tk := e.create(t, "alice")
	calls := []struct {
		name string
		call func(owner, id string) error
	}{
		{"Get", func(o, id string) error { _, err := e.m.Get(bg, o, id); return err }},
		{"Cancel", func(o, id string) error { _, err := e.m.Cancel(bg, o, id); return err }},
		{"Result", func(o, id string) error { _, _, err := e.m.Result(bg, o, id); return err }},
	}
	for _, c := range calls {
		foreign := c.call("mallory", tk.ID)
		unknown := c.call("mallory", NewID())
		if !errors.Is(foreign, ErrNotFound) || foreign.Error() != unknown.Error() {
			t.Errorf("%s: foreign %v vs unknown %v must be the same ErrNotFound", c.name, foreign, unknown)
		}
	}
	if l, _ := e.m.List(bg, "mallory", Filter{IncludeFinished: true}); len(l) != 0 {
		t.Errorf("List for mallory = %d tasks", len(l))
	}
	if l, _ := e.m.List(bg, "alice", Filter{}); len(l) != 1 || l[0].ID != tk.ID {
		t.Errorf("List for alice = %v", l)
	}
	if s := e.state(t, tk.ID); s != AwaitingApproval {
		t.Errorf("foreign cancel changed state: %s", s)
	}
}

func TestList(t *testing.T) {
	e := newEnv(t, nil)
	a := e.create(t, "alice")
	e.clock.Advance(time.Second)
	b := e.create(t, "alice")
	e.clock.Advance(time.Second)
	c := e.create(t, "bob")
	if _, err := e.m.Reject(bg, b.ID, "x", ""); err != nil {
		t.Fatal(err)
	}
	ids := func(ts []*Task) string {
		var s []string
		for _, t := range ts {
			s = append(s, map[string]string{a.ID: "a", b.ID: "b", c.ID: "c"}[t.ID])
		}
		return strings.Join(s, ",")
	}
	tests := []struct {
		name  string
		owner string // "*" = ListAll
		f     Filter
		want  string
	}{
		{"pending", "alice", Filter{}, "a"},
		{"with finished", "alice", Filter{IncludeFinished: true}, "a,b"},
		{"by state", "alice", Filter{States: []State{Rejected}}, "b"},
		{"all pending", "*", Filter{}, "a,c"},
		{"all with limit", "*", Filter{IncludeFinished: true, Limit: 2}, "a,b"},
		{"awaiting", "*", Filter{States: []State{AwaitingApproval}}, "a,c"},
	}
	for _, tc := range tests {
		var got []*Task
		var err error
		if tc.owner == "*" {
			got, err = e.m.ListAll(bg, tc.f)
		} else {
			got, err = e.m.List(bg, tc.owner, tc.f)
		}
		if err != nil || ids(got) != tc.want {
			t.Errorf("%s: got %q (%v), want %q", tc.name, ids(got), err, tc.want)
		}
	}
}

func TestQuotas(t *testing.T) {
	tests := []struct {
		name    string
		q       config.Quotas
		before  []string // owners of tasks created first
		owner   string
		args    string
		wantErr bool
	}{
		{"per owner", config.Quotas{MaxPendingPerOwner: 2}, []string{"alice", "alice"}, "alice", `{}`, true},
		{"per owner, other owner ok", config.Quotas{MaxPendingPerOwner: 2}, []string{"alice", "alice"}, "bob", `{}`, false},
		{"total", config.Quotas{MaxPendingTotal: 2}, []string{"alice", "bob"}, "carol", `{}`, true},
		{"argument bytes", config.Quotas{MaxArgumentBytes: 10}, nil, "alice", `{"k":"0123456789"}`, true},
		{"stored bytes", config.Quotas{MaxStoredBytes: 30}, []string{"alice"}, "bob", `{"k":"0123456789"}`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil, func(o *Options, _ *fakeExec) { o.Quotas = tc.q })
			for _, o := range tc.before {
				e.create(t, o)
			}
			var created *Task
			sub := e.m.Subscribe(func(tr Transition) { created = tr.Task })
			defer sub()
			_, err := e.m.Create(bg, CreateRequest{Owner: tc.owner, Tool: "t", Arguments: json.RawMessage(tc.args)})
			var rpcErr *jsonrpc.Error
			if !tc.wantErr {
				if err != nil {
					t.Fatalf("Create: %v", err)
				}
				return
			}
			if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeCapacityExceeded || rpcErr.Name() != "CapacityExceeded" ||
				!strings.HasPrefix(rpcErr.Message, "CapacityExceeded: ") {
				t.Fatalf("err = %v, want -32013 CapacityExceeded", err)
			}
			all, _ := e.m.ListAll(bg, Filter{IncludeFinished: true})
			if len(all) != len(tc.before) || created != nil {
				t.Errorf("rejected Create left %d tasks (want %d) or announced one", len(all), len(tc.before))
			}
		})
	}
	t.Run("finished tasks free the quota", func(t *testing.T) {
		e := newEnv(t, nil, func(o *Options, _ *fakeExec) { o.Quotas = config.Quotas{MaxPendingPerOwner: 1} })
		tk := e.create(t, "alice")
		if _, err := e.m.Cancel(bg, "alice", tk.ID); err != nil {
			t.Fatal(err)
		}
		e.create(t, "alice")
	})
}

// TestRace: 100 goroutines approve, reject, cancel and wait on the same tasks; every task ends
// in exactly one outcome and each approved task reaches the upstream exactly once.
func TestRace(t *testing.T) {
	e := newEnv(t, nil)
	const nTasks = 10
	ids := make([]string, nTasks)
	for i := range ids {
		ids[i] = e.create(t, "alice").ID
	}
	var mu sync.Mutex
	approvedBy := map[string]int{}
	var wg sync.WaitGroup
	for g := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := ids[g%nTasks]
			switch g % 4 {
			case 0:
				if _, err := e.m.Approve(bg, id, fmt.Sprint("approver", g), ""); err == nil {
					mu.Lock()
					approvedBy[id]++
					mu.Unlock()
				} else if !errors.As(err, new(*ConflictError)) {
					t.Errorf("Approve: %v", err)
				}
			case 1:
				if _, err := e.m.Reject(bg, id, "rejector", ""); err != nil && !errors.As(err, new(*ConflictError)) {
					t.Errorf("Reject: %v", err)
				}
			case 2:
				if _, err := e.m.Cancel(bg, "alice", id); err != nil && !errors.Is(err, ErrTerminal) {
					t.Errorf("Cancel: %v", err)
				}
			case 3:
				ctx, cancel := context.WithTimeout(bg, 5*time.Second)
				defer cancel()
				if _, _, err := e.m.Result(ctx, "alice", id); err != nil {
					t.Errorf("Result: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	_ = e.m.Close() // let executions finish
	var executed int32
	for _, id := range ids {
		if approvedBy[id] > 1 {
			t.Errorf("task %s approved %d times", id, approvedBy[id])
		}
		tk, _ := e.m.Lookup(bg, id)
		if !tk.State.Terminal() {
			t.Errorf("task %s not terminal: %s", id, tk.State)
		}
		if approvedBy[id] == 1 {
			executed++
		}
	}
	// An approved task runs exactly once, unless a cancel won the race before its execution
	// claimed it (then it never runs); no task runs twice.
	for _, id := range ids {
		tk, _ := e.m.Lookup(bg, id)
		n := e.exec.callsFor(id)
		switch {
		case n > 1:
			t.Errorf("task %s executed %d times", id, n)
		case tk.State == Completed && (n != 1 || approvedBy[id] != 1):
			t.Errorf("task %s completed with %d executions and %d approvals", id, n, approvedBy[id])
		case approvedBy[id] == 0 && n != 0:
			t.Errorf("task %s executed without approval", id)
		case approvedBy[id] == 1 && n == 0 && tk.State != Cancelled:
			t.Errorf("approved task %s never executed and is %s", id, tk.State)
		}
	}
	if n := e.exec.calls.Load(); n > executed {
		t.Errorf("Execute called %d times for %d approved tasks", n, executed)
	}
}

// TestExecutesAtMostOnce: concurrent launches of the same approved task (approve racing
// on_timeout, a restart) reach the upstream once.
func TestExecutesAtMostOnce(t *testing.T) {
	e := newEnv(t, nil)
	tk := e.create(t, "alice")
	if _, err := e.m.Approve(bg, tk.ID, "bob", ""); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		e.m.launch(tk.ID)
	}
	e.result(t, "alice", tk.ID)
	_ = e.m.Close()
	if n := e.exec.calls.Load(); n != 1 {
		t.Errorf("Execute called %d times", n)
	}
}

func TestRestartRecovery(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	st, err := store.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	put := func(state State) string {
		tk := &Task{ID: NewID(), Owner: "alice", Tool: "delete_file", Arguments: json.RawMessage(`{}`),
			State: state, CreatedAt: now, UpdatedAt: now, TTL: time.Hour}
		tk.ArgsHash = CanonicalHash(testKey, tk.Tool, tk.Arguments)
		rec, _ := encodeTask(tk)
		if _, err := st.Create(bg, rec, store.Limits{}); err != nil {
			t.Fatal(err)
		}
		return tk.ID
	}
	executing, approved, waiting := put(Executing), put(Approved), put(AwaitingApproval)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st, err = store.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	exec := &fakeExec{result: json.RawMessage(okResult)}
	m := NewManager(st, exec, nil, Options{ArgumentHashKey: testKey})
	defer m.Close()
	var seen []string
	var mu sync.Mutex
	m.Subscribe(func(tr Transition) { mu.Lock(); seen = append(seen, string(tr.From)+">"+string(tr.To)); mu.Unlock() })
	if n := exec.calls.Load(); n != 0 {
		t.Fatalf("NewManager executed %d tasks; loading waits for Run", n)
	}
	ctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- m.Run(ctx) }()
	defer func() { cancel(); <-runErr }()

	_, rpcErr, err := m.Result(ctx, "alice", executing)
	if err != nil || rpcErr == nil || rpcErr.Name() != "ExecutionInterrupted" || !strings.Contains(rpcErr.Message, "restart") {
		t.Errorf("interrupted task: %v, %v", rpcErr, err)
	}
	if res, _, err := m.Result(ctx, "alice", approved); err != nil || string(res) != okResult {
		t.Errorf("approved task after restart: %s, %v", res, err)
	}
	if tk, _ := m.Lookup(ctx, waiting); tk.State != AwaitingApproval {
		t.Errorf("waiting task: %s", tk.State)
	}
	if n := exec.calls.Load(); n != 1 {
		t.Errorf("Execute calls %d, want 1 (only the approved task)", n)
	}
	// The recovery is published to subscribers attached before Run.
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(seen, ","); !strings.Contains(got, "executing>failed") || !strings.Contains(got, "approved>executing") {
		t.Errorf("transitions seen: %s", got)
	}
}

// TestRunSweeper uses the real clock: the single timer fires at the TTL and wakes Result.
func TestRunSweeper(t *testing.T) {
	st := store.NewMemory()
	m := NewManager(st, &fakeExec{}, nil, Options{})
	ctx, cancel := context.WithCancel(bg)
	runErr := make(chan error, 1)
	go func() { runErr <- m.Run(ctx) }()
	tk, err := m.Create(bg, CreateRequest{Owner: "alice", Tool: "t", TTL: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(bg, 5*time.Second)
	defer rcancel()
	_, rpcErr, err := m.Result(rctx, "alice", tk.ID)
	if err != nil || rpcErr == nil || rpcErr.Code != jsonrpc.CodeTaskExpired {
		t.Errorf("Result = %v, %v; want TaskExpired", rpcErr, err)
	}
	cancel()
	if err := <-runErr; err != nil {
		t.Errorf("Run: %v", err)
	}
	if _, err := m.Create(bg, CreateRequest{Owner: "alice", Tool: "t"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Create after Run ended: %v", err)
	}
	_ = m.Close()
}

func TestSubscribe(t *testing.T) {
	e := newEnv(t, nil)
	var mu sync.Mutex
	var seen []string
	unsub := e.m.Subscribe(func(tr Transition) {
		mu.Lock()
		seen = append(seen, string(tr.From)+">"+string(tr.To))
		if tr.To != tr.Task.State || tr.Created() != (tr.From == "") {
			t.Errorf("transition %s>%s carries a task in state %s", tr.From, tr.To, tr.Task.State)
		}
		mu.Unlock()
		tr.Task.State = "tampered" // a copy: must not affect the manager
	})
	tk := e.create(t, "alice")
	if _, err := e.m.Approve(bg, tk.ID, "bob", ""); err != nil {
		t.Fatal(err)
	}
	e.result(t, "alice", tk.ID)
	unsub()
	e.create(t, "alice")
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(seen, ","); got != ">awaiting_approval,awaiting_approval>approved,approved>executing,executing>completed" {
		t.Errorf("transitions seen: %s", got)
	}
	if s := e.state(t, tk.ID); s != Completed {
		t.Errorf("state %s", s)
	}
}

// TestSubscribersShareOneCopy: every subscriber of a transition gets the same copy of the task
// (one clone per transition, not one per subscriber: with the server's eight subscribers the
// copies were most of a create's garbage besides the store's), and the copy is not the task
// the manager goes on changing.
func TestSubscribersShareOneCopy(t *testing.T) {
	e := newEnv(t, nil)
	var mu sync.Mutex
	got := map[int][]*Task{}
	for i := range 3 {
		e.m.Subscribe(func(tr Transition) { mu.Lock(); got[i] = append(got[i], tr.Task); mu.Unlock() })
	}
	tk := e.create(t, "alice")
	if _, err := e.m.Approve(bg, tk.ID, "bob", ""); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got[0]) < 2 {
		t.Fatalf("subscriber saw %d transitions, want at least 2", len(got[0]))
	}
	for n, first := range got[0] {
		for i := 1; i < 3; i++ {
			if len(got[i]) != len(got[0]) || got[i][n] != first {
				t.Fatalf("transition %d: subscriber %d got another copy of the task than subscriber 0", n, i)
			}
		}
	}
	if got[0][0] == got[0][1] || got[0][0].State != AwaitingApproval || got[0][1].State != Approved {
		t.Errorf("transitions share a copy across changes: states %s, %s", got[0][0].State, got[0][1].State)
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, nil, func(o *Options, _ *fakeExec) { o.Registerer = reg })
	a := e.create(t, "alice")
	b := e.create(t, "alice")
	e.create(t, "alice")
	if _, err := e.m.Approve(bg, a.ID, "bob", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Reject(bg, b.ID, "bob", ""); err != nil {
		t.Fatal(err)
	}
	e.result(t, "alice", a.ID)
	// a second manager on the same registry must not panic
	NewManager(store.NewMemory(), e.exec, nil, Options{Registerer: reg}).Close()

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range mt.GetLabel() {
				key += "{" + l.GetValue() + "}"
			}
			switch {
			case mt.Gauge != nil:
				got[key] = mt.GetGauge().GetValue()
			case mt.Counter != nil:
				got[key] = mt.GetCounter().GetValue()
			case mt.Histogram != nil:
				got[key] = float64(mt.GetHistogram().GetSampleCount())
			}
		}
	}
	want := map[string]float64{
		"tollgate_tasks{awaiting_approval}":         1,
		"tollgate_tasks{completed}":                 1,
		"tollgate_tasks{rejected}":                  1,
		"tollgate_tasks{executing}":                 0,
		"tollgate_approval_wait_seconds{approved}":  1,
		"tollgate_approval_wait_seconds{rejected}":  1,
		"tollgate_task_executions_total{completed}": 1,
		"tollgate_task_executions_total{failed}":    0,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

// A task is created only for a session Tollgate knows: a made-up or ended session must not
// own pending tasks or use up quota.
func TestCreateRefusesUnknownSession(t *testing.T) {
	e := newEnv(t, nil, func(o *Options, _ *fakeExec) {
		o.SessionLive = func(id string) bool { return id == "live" }
	})
	for _, tc := range []struct {
		session string
		ok      bool
	}{{"live", true}, {"forged", false}, {"", true}} {
		_, err := e.m.Create(context.Background(), CreateRequest{Owner: "o", SessionID: tc.session, Tool: "t", Workflow: "default"})
		var je *jsonrpc.Error
		switch {
		case tc.ok && err != nil:
			t.Errorf("session %q: %v", tc.session, err)
		case !tc.ok && (!errors.As(err, &je) || je.Name() != "SessionNotFound"):
			t.Errorf("session %q: %v, want SessionNotFound", tc.session, err)
		}
	}
	if ts, _ := e.m.ListAll(context.Background(), Filter{}); len(ts) != 2 {
		t.Errorf("%d tasks stored, want 2 (nothing for the unknown session)", len(ts))
	}
}

// TestAnonymousOwners: each task of an anonymous caller is its own owner: never listed, not
// counted against one shared per-owner quota, reachable by id by an anonymous caller only.
func TestAnonymousOwners(t *testing.T) {
	e := newEnv(t, nil, func(o *Options, _ *fakeExec) { o.Quotas = config.Quotas{MaxPendingPerOwner: 1} })
	a := e.create(t, Anonymous)
	b := e.create(t, Anonymous) // a shared owner would hit max_pending_per_owner here
	if a.Owner == b.Owner || !IsAnonymous(a.Owner) || !IsAnonymous(b.Owner) {
		t.Fatalf("owners %q and %q: want two distinct anonymous owners", a.Owner, b.Owner)
	}
	if l, err := e.m.List(bg, Anonymous, Filter{IncludeFinished: true}); err != nil || len(l) != 0 {
		t.Errorf("List(Anonymous) = %d tasks, %v; want none", len(l), err)
	}
	if l, _ := e.m.List(bg, a.Owner, Filter{}); len(l) != 1 {
		t.Errorf("List of the task's own owner = %d tasks", len(l))
	}
	if _, err := e.m.Get(bg, Anonymous, a.ID); err != nil {
		t.Errorf("anonymous Get by id: %v", err)
	}
	for _, other := range []string{"auth:abc", "user:alice", "sess:x"} {
		if _, err := e.m.Get(bg, other, a.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get by %s: err = %v, want ErrNotFound", other, err)
		}
	}
	if _, attached, err := e.m.CreateOrAttach(bg, CreateRequest{Owner: Anonymous, Tool: "t", Arguments: a.Arguments}); err == nil && attached {
		t.Error("an anonymous retry attached to another anonymous caller's task")
	}
}
