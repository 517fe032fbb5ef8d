package gwtools

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// fakeTasks is an in-memory stand-in for *tasks.Manager with the same owner isolation and
// blocking Result.
type fakeTasks struct {
	mu         sync.Mutex
	tasks      map[string]*tasks.Task
	order      []string
	changed    chan struct{} // closed and replaced on every change
	lastFilter tasks.Filter
	waiting    int   // Result calls blocked right now
	failWith   error // returned by every call when set
}

func newFake() *fakeTasks {
	return &fakeTasks{tasks: map[string]*tasks.Task{}, changed: make(chan struct{})}
}

var t0 = time.Date(2025, 11, 25, 12, 0, 0, 0, time.UTC)

func (f *fakeTasks) add(id, owner, tool string, st tasks.State) *tasks.Task {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &tasks.Task{
		ID: id, Owner: owner, SessionID: "sess-" + owner, Tool: tool, State: st,
		Arguments: json.RawMessage(`{"secret":"hunter2"}`),
		CreatedAt: t0, UpdatedAt: t0, TTL: time.Hour, PollInterval: time.Second,
		Workflow: "default",
	}
	if st == tasks.AwaitingApproval {
		t.StatusMessage = "Awaiting approval (default)"
		t.ApprovalDeadline = t0.Add(10 * time.Minute)
	}
	f.tasks[id] = t
	f.order = append(f.order, id)
	return t
}

// finish makes a task terminal with a result or an error and wakes Result waiters.
func (f *fakeTasks) finish(id string, st tasks.State, result json.RawMessage, rpcErr *jsonrpc.Error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.tasks[id]
	t.State, t.Result, t.Error = st, result, rpcErr
	if st == tasks.Rejected {
		t.Decision = &tasks.Decision{Approved: false, By: "alice", Reason: "no", At: t0}
	}
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeTasks) owned(owner, id string) (*tasks.Task, error) {
	if f.failWith != nil {
		return nil, f.failWith
	}
	t, ok := f.tasks[id]
	if !ok || t.Owner != owner {
		return nil, tasks.ErrNotFound
	}
	return t.Clone(), nil
}

func (f *fakeTasks) Get(_ context.Context, owner, id string) (*tasks.Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.owned(owner, id)
}

func (f *fakeTasks) List(_ context.Context, owner string, fl tasks.Filter) ([]*tasks.Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failWith != nil {
		return nil, f.failWith
	}
	f.lastFilter = fl
	var out []*tasks.Task
	for _, id := range f.order {
		t := f.tasks[id]
		if t.Owner != owner {
			continue
		}
		if len(fl.States) > 0 {
			if !slices.Contains(fl.States, t.State) {
				continue
			}
		} else if t.State.Terminal() && !fl.IncludeFinished {
			continue
		}
		out = append(out, t.Clone())
		if fl.Limit > 0 && len(out) == fl.Limit {
			break
		}
	}
	return out, nil
}

func (f *fakeTasks) Cancel(_ context.Context, owner, id string) (*tasks.Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, err := f.owned(owner, id)
	if err != nil {
		return nil, err
	}
	if t.State.Terminal() {
		return t, tasks.ErrTerminal
	}
	f.tasks[id].State = tasks.Cancelled
	return f.tasks[id].Clone(), nil
}

func (f *fakeTasks) Result(ctx context.Context, owner, id string) (json.RawMessage, *jsonrpc.Error, error) {
	for {
		f.mu.Lock()
		t, err := f.owned(owner, id)
		ch := f.changed
		f.mu.Unlock()
		if err != nil {
			return nil, nil, err
		}
		if t.State.Terminal() {
			if t.Error != nil {
				return nil, t.Error, nil
			}
			return t.Result, nil, nil
		}
		f.mu.Lock()
		f.waiting++
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		f.mu.Lock()
		f.waiting--
		f.mu.Unlock()
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
	}
}

var errBoom = errors.New("store down")

// fakePending returns fixed items.
type fakePending struct {
	server, client []json.RawMessage
	gotSession     string
	gotTask        string
}

func (p *fakePending) PendingFor(session, taskID string) ([]json.RawMessage, []json.RawMessage) {
	p.gotSession, p.gotTask = session, taskID
	return p.server, p.client
}

// Answer: the fake's tasks never ask questions; the owner check is the manager's.
func (f *fakeTasks) Answer(_ context.Context, owner, id, _ string, _ json.RawMessage, _ *jsonrpc.Error) (*tasks.Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, err := f.owned(owner, id)
	if err != nil {
		return nil, err
	}
	return t, tasks.ErrNoQuestion
}
