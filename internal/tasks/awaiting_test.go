package tasks

import (
	"context"
	"maps"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

// listedAwaiting counts awaiting tasks by workflow the way tollgate_pending_tasks did before
// the manager kept its own count: a listing of every awaiting task.
func listedAwaiting(t *testing.T, m *Manager) map[string]int {
	t.Helper()
	ts, err := m.ListAll(context.Background(), Filter{States: []State{AwaitingApproval}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, tk := range ts {
		out[tk.Workflow]++
	}
	return out
}

func awaitingNow(t *testing.T, m *Manager) map[string]int {
	t.Helper()
	got, err := m.AwaitingByWorkflow(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestAwaitingByWorkflow: the manager's count of tasks awaiting approval follows creation,
// approval, rejection, cancel, an approval timeout and a restart exactly as a listing would,
// without listing.
func TestAwaitingByWorkflow(t *testing.T) {
	wfs := map[string]config.Workflow{
		"default": {},
		"ops":     {Timeout: config.Duration(time.Minute)},
	}
	e := newEnv(t, nil, workflows(wfs))
	in := func(wf string) func(*CreateRequest) { return func(r *CreateRequest) { r.Workflow = wf } }
	check := func(step string, want map[string]int) {
		t.Helper()
		got := awaitingNow(t, e.m)
		if !maps.Equal(got, want) || !maps.Equal(got, listedAwaiting(t, e.m)) {
			t.Errorf("%s: AwaitingByWorkflow %v, listing %v, want %v", step, got, listedAwaiting(t, e.m), want)
		}
	}
	d1, d2, d3 := e.create(t, "alice", in("default")), e.create(t, "alice", in("default")), e.create(t, "bob", in("default"))
	o1, o2 := e.create(t, "alice", in("ops")), e.create(t, "bob", in("ops"))
	check("created", map[string]int{"default": 3, "ops": 2})

	ctx := context.Background()
	if _, err := e.m.Approve(ctx, d1.ID, "carol", "ok"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Reject(ctx, o1.ID, "carol", "no"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Cancel(ctx, "alice", d2.ID); err != nil {
		t.Fatal(err)
	}
	e.result(t, "alice", d1.ID) // executed and completed: not awaiting
	check("decided", map[string]int{"default": 1, "ops": 1})

	e.clock.Advance(2 * time.Minute) // ops' approval timeout
	e.m.Sweep(ctx)
	check("timed out", map[string]int{"default": 1})
	if tk, _ := e.m.Lookup(ctx, o2.ID); tk.State != TimedOut {
		t.Errorf("ops task after its timeout: %s", tk.State)
	}
	if tk, _ := e.m.Lookup(ctx, d3.ID); tk.State != AwaitingApproval {
		t.Errorf("default task: %s", tk.State)
	}
}

// TestAwaitingByWorkflowAfterRestart: a manager over a file store that already holds awaiting
// tasks counts them once Run has loaded them.
func TestAwaitingByWorkflowAfterRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	st, err := store.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := NewManager(st, &fakeExec{}, nil, Options{})
	for _, wf := range []string{"default", "default", "ops"} {
		if _, err := m.Create(context.Background(), CreateRequest{Owner: "alice", SessionID: "s1", Tool: "t", Workflow: wf}); err != nil {
			t.Fatal(err)
		}
	}
	_ = m.Close()
	_ = st.Close()

	st, err = store.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m = NewManager(st, &fakeExec{}, nil, Options{})
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	runErr := make(chan error, 1)
	go func() { runErr <- m.Run(ctx) }()
	defer func() { cancel(); <-runErr }()
	select {
	case <-m.Loaded():
	case <-ctx.Done():
		t.Fatal("Run did not load the stored tasks")
	}
	want := map[string]int{"default": 2, "ops": 1}
	if got := awaitingNow(t, m); !maps.Equal(got, want) || !maps.Equal(got, listedAwaiting(t, m)) {
		t.Errorf("after restart: %v (listing %v), want %v", got, listedAwaiting(t, m), want)
	}
}
