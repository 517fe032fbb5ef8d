package approval

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	aliceToken = "alice-token-0123456789"
	bobToken   = "bob-token-abcdefghij"
	carolToken = "carol-token-zyxwvut"
	secretPW   = "hunter2-PLAINTEXT"
	sessionID  = "session:7f3c9a1e5b2d4c6a8e0f"
)

// fakeTasks implements Tasks with the decision rules of tasks.Manager: first decision wins,
// the requester cannot decide, unknown ids are not found.
type fakeTasks struct {
	mu      sync.Mutex
	tasks   map[string]*tasks.Task
	listErr error
	lastQ   tasks.Filter
}

func newFake(ts ...*tasks.Task) *fakeTasks {
	f := &fakeTasks{tasks: map[string]*tasks.Task{}}
	for _, t := range ts {
		f.tasks[t.ID] = t
	}
	return f
}

func clone(t *tasks.Task) *tasks.Task {
	c := *t
	if t.Decision != nil {
		d := *t.Decision
		c.Decision = &d
	}
	return &c
}

func (f *fakeTasks) Lookup(_ context.Context, id string) (*tasks.Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.tasks[id]
	if !ok {
		return nil, tasks.ErrNotFound
	}
	return clone(t), nil
}

func (f *fakeTasks) ListAll(_ context.Context, q tasks.Filter) ([]*tasks.Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastQ = q
	if f.listErr != nil {
		return nil, f.listErr
	}
	var out []*tasks.Task
	for _, t := range f.tasks {
		if len(q.States) > 0 && !slices.Contains(q.States, t.State) {
			continue
		}
		if !q.IncludeFinished && t.State.Terminal() {
			continue
		}
		out = append(out, clone(t))
	}
	slices.SortFunc(out, func(a, b *tasks.Task) int { return a.CreatedAt.Compare(b.CreatedAt) })
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

func (f *fakeTasks) decide(id, approver, reason string, approve bool) (*tasks.Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.tasks[id]
	if !ok {
		return nil, tasks.ErrNotFound
	}
	if t.State != tasks.AwaitingApproval {
		return nil, &tasks.ConflictError{Task: clone(t)}
	}
	if t.RequestedBy != "" && t.RequestedBy == approver {
		return nil, tasks.ErrSelfApproval
	}
	t.Decision = &tasks.Decision{Approved: approve, By: approver, Reason: reason, At: t0.Add(time.Minute)}
	t.State = tasks.Rejected
	if approve {
		t.State = tasks.Approved
	}
	t.UpdatedAt = t0.Add(time.Minute)
	t.Version++
	return clone(t), nil
}

func (f *fakeTasks) Approve(_ context.Context, id, approver, reason string) (*tasks.Task, error) {
	return f.decide(id, approver, reason, true)
}

func (f *fakeTasks) Reject(_ context.Context, id, approver, reason string) (*tasks.Task, error) {
	return f.decide(id, approver, reason, false)
}

var errBoom = errors.New("store exploded")

func pendingTask(id string, age time.Duration) *tasks.Task {
	return &tasks.Task{
		ID:               id,
		Owner:            sessionID,
		SessionID:        "7f3c9a1e5b2d4c6a8e0f",
		RequestedBy:      "carol",
		Tool:             "delete_user",
		Arguments:        json.RawMessage(`{"user":"bob","password":"` + secretPW + `","credentials":{"api_key":"` + secretPW + `","region":"eu"}}`),
		ArgsHash:         "abc123",
		Workflow:         "default",
		State:            tasks.AwaitingApproval,
		StatusMessage:    "Awaiting approval (default)",
		CreatedAt:        t0.Add(-age),
		UpdatedAt:        t0.Add(-age),
		TTL:              time.Hour,
		PollInterval:     2 * time.Second,
		ApprovalDeadline: t0.Add(10*time.Minute - age),
		Version:          1,
	}
}

func testWorkflows(name string) (config.Workflow, bool) {
	if name == "default" {
		return config.Workflow{RedactFields: []string{"password", "credentials.api_key"}}, true
	}
	return config.Workflow{}, false
}

func testAuth() Authenticator {
	return StaticTokens(map[string]string{aliceToken: "alice", bobToken: "bob", carolToken: "carol"})
}

// PageAwaiting reads the fake's awaiting tasks in the order of the store's index (created,
// then id), after the position.
func (f *fakeTasks) PageAwaiting(ctx context.Context, after *tasks.Position, newest bool, n int) ([]*tasks.Task, *tasks.Position, error) {
	all, err := f.ListAll(ctx, tasks.Filter{States: []tasks.State{tasks.AwaitingApproval}})
	if err != nil {
		return nil, nil, err
	}
	cmpPos := func(t *tasks.Task, p *tasks.Position) int {
		return cmp.Or(t.CreatedAt.Compare(p.CreatedAt), strings.Compare(t.ID, p.ID))
	}
	slices.SortFunc(all, func(a, b *tasks.Task) int { return cmpPos(a, &tasks.Position{CreatedAt: b.CreatedAt, ID: b.ID}) })
	if newest {
		slices.Reverse(all)
	}
	var out []*tasks.Task
	for _, t := range all {
		if after != nil && (cmpPos(t, after) <= 0) != newest || after != nil && cmpPos(t, after) == 0 {
			continue
		}
		if out = append(out, t); len(out) == n {
			break
		}
	}
	if len(out) == 0 {
		return nil, nil, nil
	}
	last := out[len(out)-1]
	return out, &tasks.Position{CreatedAt: last.CreatedAt, ID: last.ID}, nil
}
