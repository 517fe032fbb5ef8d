package tasks

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is an injectable Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2025, 11, 25, 10, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fakeExec counts executions and returns a fixed answer; with block set it waits for block to
// close (or its ctx to end) first.
type fakeExec struct {
	calls   atomic.Int32
	result  json.RawMessage
	err     *jsonrpc.Error
	block   chan struct{}
	started chan string
	ctxErr  atomic.Value // error seen by a blocked call
	perTask sync.Map     // task id → *atomic.Int32
}

func (f *fakeExec) callsFor(id string) int32 {
	if n, ok := f.perTask.Load(id); ok {
		return n.(*atomic.Int32).Load()
	}
	return 0
}

func (f *fakeExec) Execute(ctx context.Context, t *Task) (json.RawMessage, *jsonrpc.Error) {
	f.calls.Add(1)
	n, _ := f.perTask.LoadOrStore(t.ID, new(atomic.Int32))
	n.(*atomic.Int32).Add(1)
	if f.started != nil {
		f.started <- t.ID
	}
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			f.ctxErr.Store(ctx.Err())
			return nil, jsonrpc.NewError(jsonrpc.CodeUpstreamUnreachable, "UpstreamUnreachable", "cancelled")
		}
	}
	if f.err != nil {
		return nil, f.err
	}
	return f.result, nil
}

const okResult = `{"content":[{"type":"text","text":"done <&> ok"}],  "isError":false}`

type env struct {
	m     *Manager
	st    store.Store
	clock *clock
	exec  *fakeExec
}

type envOpt func(*Options, *fakeExec)

func workflows(wfs map[string]config.Workflow) envOpt {
	return func(o *Options, _ *fakeExec) {
		o.Workflow = func(name string) (config.Workflow, bool) { w, ok := wfs[name]; return w, ok }
	}
}

// newEnv builds a Manager on a memory store with a fake clock; Close runs at cleanup. The
// sweeper is not started: tests call Sweep after moving the clock.
func newEnv(t *testing.T, recheck Recheck, opts ...envOpt) *env {
	t.Helper()
	return newEnvOn(t, store.NewMemory(), recheck, opts...)
}

// newEnvOn is newEnv on the store given.
func newEnvOn(t *testing.T, st store.Store, recheck Recheck, opts ...envOpt) *env {
	t.Helper()
	e := &env{st: st, clock: newClock(), exec: &fakeExec{result: json.RawMessage(okResult)}}
	o := Options{DefaultTTL: 10 * time.Minute, MaxTTL: time.Hour, PollInterval: 2 * time.Second, Now: e.clock.Now}
	for _, opt := range opts {
		opt(&o, e.exec)
	}
	e.m = NewManager(e.st, e.exec, recheck, o)
	t.Cleanup(func() { _ = e.m.Close() })
	return e
}

func (e *env) create(t *testing.T, owner string, mod ...func(*CreateRequest)) *Task {
	t.Helper()
	req := CreateRequest{Owner: owner, SessionID: "s1", Tool: "delete_file", Arguments: json.RawMessage(`{"path": "/tmp/x"}`), Workflow: "default"}
	for _, f := range mod {
		f(&req)
	}
	tk, err := e.m.Create(context.Background(), req)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return tk
}

// result waits (bounded) for the task's terminal outcome.
func (e *env) result(t *testing.T, owner, id string) (json.RawMessage, *jsonrpc.Error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, rpcErr, err := e.m.Result(ctx, owner, id)
	if err != nil {
		t.Fatalf("Result(%s): %v", id, err)
	}
	return res, rpcErr
}

func (e *env) state(t *testing.T, id string) State {
	t.Helper()
	tk, err := e.m.Lookup(context.Background(), id)
	if err != nil {
		t.Fatalf("Lookup(%s): %v", id, err)
	}
	return tk.State
}
