package tasks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

// sharedMemory is a memory store that says it is shared, as Redis does: two Managers over it
// behave as two replicas.
type sharedMemory struct{ *store.Memory }

func (sharedMemory) Shared() bool { return true }

const testLease = 3 * time.Second

// replicas builds two Managers (replica "a" and "b") over one shared memory store with one
// fake clock; neither's Run is started: tests call RenewLeases, Sweep and watchLeases.
type replicas struct {
	st    store.Store
	clock *clock
	a, b  *Manager
	exec  *fakeExec // a's executor, blocking until released
	logA  *bytes.Buffer
}

func newReplicas(t *testing.T) *replicas {
	t.Helper()
	r := &replicas{st: sharedMemory{store.NewMemory()}, clock: newClock(), logA: &bytes.Buffer{},
		exec: &fakeExec{result: json.RawMessage(okResult), block: make(chan struct{}), started: make(chan string, 1)}}
	opts := func(name string) Options {
		return Options{DefaultTTL: 10 * time.Minute, MaxTTL: time.Hour, Now: r.clock.Now, Replica: name, ExecutionLease: testLease,
			ArgumentHashKey: []byte("one key for every replica, as TOLLGATE_ARGUMENT_HASH_KEY")}
	}
	oa := opts("a")
	oa.Logger = slog.New(slog.NewTextHandler(r.logA, nil))
	r.a = NewManager(r.st, r.exec, nil, oa)
	r.b = NewManager(r.st, &fakeExec{result: json.RawMessage(okResult)}, nil, opts("b"))
	t.Cleanup(func() {
		_ = r.b.Close()
		_ = r.a.Close()
	})
	return r
}

// executing creates an accelerated task on a and waits until its call runs there.
func (r *replicas) executing(t *testing.T) *Task {
	t.Helper()
	tk, err := r.a.Create(bg, CreateRequest{Owner: "alice", SessionID: "s1", Tool: "slow", Arguments: json.RawMessage(`{}`), Accelerated: true})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.exec.started:
	case <-time.After(5 * time.Second):
		t.Fatal("the call never started on replica a")
	}
	got, err := r.b.Lookup(bg, tk.ID)
	if err != nil || got.State != Executing || got.LeaseHolder != "a" || !got.LeaseUntil.Equal(r.clock.Now().Add(testLease)) {
		t.Fatalf("executing task as replica b sees it: %+v, %v", got, err)
	}
	return got
}

// TestLeaseLapsedFailsTask: replica a stops renewing (killed); once the lease lapses b's
// sweeper fails the task with ExecutionInterrupted through a committed transition (b's
// subscribers see it, a waiting Result wakes), and a's late result is dropped: the task stays
// failed and the call ran once.
func TestLeaseLapsedFailsTask(t *testing.T) {
	r := newReplicas(t)
	var seen []Transition
	var mu sync.Mutex
	r.b.Subscribe(func(tr Transition) { mu.Lock(); seen = append(seen, tr); mu.Unlock() })
	tk := r.executing(t)

	r.clock.Advance(testLease - time.Millisecond)
	r.b.watchLeases(bg) // not yet lapsed: scheduled at the lease's end
	if n := r.b.Sweep(bg); n != 0 || r.stateOn(t, r.b, tk.ID) != Executing {
		t.Fatalf("before the lease ends: swept %d, state %s", n, r.stateOn(t, r.b, tk.ID))
	}
	done := make(chan *Task, 1)
	go func() {
		ctx, cancel := context.WithTimeout(bg, 5*time.Second)
		defer cancel()
		_, _, _ = r.b.Result(ctx, "alice", tk.ID)
		got, _ := r.b.Lookup(bg, tk.ID)
		done <- got
	}()
	r.clock.Advance(time.Millisecond)
	if n := r.b.Sweep(bg); n != 1 {
		t.Fatalf("swept %d tasks at the lease's end, want 1", n)
	}
	var got *Task
	select {
	case got = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Result on replica b did not wake")
	}
	if got.State != Failed || got.Error == nil || got.Error.Name() != "ExecutionInterrupted" || got.Error.Code != -32603 ||
		!strings.Contains(got.Error.Message, "stopped answering") || got.StatusMessage != leaseLostStatus {
		t.Fatalf("after the lease lapsed: %+v (error %+v)", got, got.Error)
	}
	mu.Lock()
	if len(seen) != 1 || seen[0].From != Executing || seen[0].To != Failed {
		t.Errorf("b's transitions: %+v", seen)
	}
	mu.Unlock()

	close(r.exec.block) // a answers late
	_ = r.a.Close()     // waits for a's execution to commit (or not)
	if s := r.stateOn(t, r.b, tk.ID); s != Failed || r.exec.callsFor(tk.ID) != 1 {
		t.Errorf("after a's late answer: state %s, calls %d", s, r.exec.callsFor(tk.ID))
	}
	if res, rpcErr := r.resultOn(t, r.b, tk.ID); res != nil || rpcErr == nil || rpcErr.Name() != "ExecutionInterrupted" {
		t.Errorf("tasks/result after a's late answer: %s, %v", res, rpcErr)
	}
	if !strings.Contains(r.logA.String(), "late result dropped") {
		t.Errorf("a did not log the dropped result:\n%s", r.logA)
	}
}

// TestLeaseRenewed: while a renews every third of the lease the task never lapses, however
// long the call runs; its result is then stored as usual.
func TestLeaseRenewed(t *testing.T) {
	r := newReplicas(t)
	tk := r.executing(t)
	for range 5 {
		r.clock.Advance(testLease / 3)
		if n := r.a.RenewLeases(bg); n != 1 {
			t.Fatalf("renewed %d leases, want 1", n)
		}
		r.b.watchLeases(bg)
		r.b.Sweep(bg)
	}
	got, err := r.b.Lookup(bg, tk.ID)
	if err != nil || got.State != Executing || !got.LeaseUntil.Equal(r.clock.Now().Add(testLease)) {
		t.Fatalf("after 5 renewals: %+v, %v", got, err)
	}
	if !got.UpdatedAt.Equal(tk.UpdatedAt) {
		t.Errorf("a renewal changed lastUpdatedAt: %s → %s", tk.UpdatedAt, got.UpdatedAt)
	}
	close(r.exec.block)
	if res, rpcErr := r.resultOn(t, r.b, tk.ID); string(res) != okResult || rpcErr != nil {
		t.Errorf("result: %s, %v", res, rpcErr)
	}
}

// TestLeaseLostStopsCall: a replica whose renewal finds its task failed (it was paused past
// its lease) stops the call and does not report a result for it.
func TestLeaseLostStopsCall(t *testing.T) {
	r := newReplicas(t)
	tk := r.executing(t)
	r.clock.Advance(testLease)
	r.b.watchLeases(bg) // lapsed: failed at once
	if s := r.stateOn(t, r.b, tk.ID); s != Failed {
		t.Fatalf("state after the lease lapsed: %s", s)
	}
	if n := r.a.RenewLeases(bg); n != 0 {
		t.Fatalf("renewed %d leases of a failed task", n)
	}
	_ = r.a.Close()
	if err, _ := r.exec.ctxErr.Load().(error); !errors.Is(err, context.Canceled) {
		t.Errorf("a's call ctx err = %v, want canceled by the lost lease", err)
	}
	got, _ := r.b.Lookup(bg, tk.ID)
	if got.State != Failed || got.StatusMessage != leaseLostStatus || len(got.Result) != 0 {
		t.Errorf("after a gave up: %+v", got)
	}
}

// TestLeaseRenewRacesExpiry: a renewal and the expiry of the same lapsed lease race; the
// store's compare-and-swap lets exactly one win, and a knows which: its call goes on exactly
// when the task is still executing.
func TestLeaseRenewRacesExpiry(t *testing.T) {
	wins := map[string]int{}
	defer func() { t.Logf("renewal won %d, expiry won %d", wins["renewal"], wins["expiry"]) }()
	for i := range 50 {
		r := newReplicas(t)
		tk := r.executing(t)
		r.clock.Advance(testLease)
		var renewed int
		var wg sync.WaitGroup
		start := make(chan struct{})
		renew := func() { <-start; renewed = r.a.RenewLeases(bg) }
		expire := func() { <-start; _, _ = r.b.Lookup(bg, tk.ID) } // settle fails a lapsed lease
		if i%2 == 0 {
			wg.Go(renew)
			wg.Go(expire)
		} else {
			wg.Go(expire)
			wg.Go(renew)
		}
		close(start)
		wg.Wait()
		got, _ := r.b.Lookup(bg, tk.ID)
		r.a.mu.Lock()
		_, running := r.a.running[tk.ID]
		r.a.mu.Unlock()
		switch {
		case renewed == 1 && got.State == Executing && got.LeaseUntil.After(r.clock.Now()):
			wins["renewal"]++
		case renewed == 0 && got.State == Failed && got.StatusMessage == leaseLostStatus:
			// a learns at its next renewal at the latest, and stops its call
			wins["expiry"]++
			r.a.RenewLeases(bg)
			_ = r.a.Close()
			if err, _ := r.exec.ctxErr.Load().(error); !errors.Is(err, context.Canceled) {
				t.Errorf("run %d: lost the race but the call was not stopped (running %v, err %v)", i, running, err)
			}
		default:
			t.Fatalf("run %d: renewed %d, task %+v", i, renewed, got)
		}
		_ = r.a.Close()
		if r.exec.callsFor(tk.ID) != 1 {
			t.Fatalf("run %d: the call ran %d times", i, r.exec.callsFor(tk.ID))
		}
	}
}

// TestLeaseAbsentNeverLapses: a task executing without lease fields (stored by an older
// version) keeps the old behaviour: only its TTL ends it.
func TestLeaseAbsentNeverLapses(t *testing.T) {
	r := newReplicas(t)
	tk, err := r.b.Create(bg, CreateRequest{Owner: "alice", SessionID: "s1", Tool: "slow", Accelerated: true, DeferStart: true})
	if err != nil {
		t.Fatal(err)
	}
	// as an older version stored it: executing, no lease fields (created approved, a task now
	// gets a start lease)
	if _, err := r.b.update(bg, tk.ID, func(t *Task) error {
		t.State, t.LeaseHolder, t.LeaseUntil = Executing, "", time.Time{}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(5 * time.Minute)
	r.a.watchLeases(bg)
	r.a.Sweep(bg)
	if s := r.stateOn(t, r.a, tk.ID); s != Executing {
		t.Fatalf("a lease-less executing task became %s", s)
	}
	r.clock.Advance(5 * time.Minute)
	if s := r.stateOn(t, r.a, tk.ID); s != Expired {
		t.Fatalf("at its TTL end: %s, want expired", s)
	}
}

// TestNoLeaseWithPrivateStore: with a store only one process uses, no lease is taken (a
// restart fails such tasks on load) and none is renewed.
func TestNoLeaseWithPrivateStore(t *testing.T) {
	e := newEnv(t, nil)
	e.exec.block, e.exec.started = make(chan struct{}), make(chan string, 1)
	tk := e.create(t, "alice", func(r *CreateRequest) { r.Accelerated, r.Workflow = true, "" })
	<-e.exec.started
	got, _ := e.m.Lookup(bg, tk.ID)
	if got.State != Executing || got.LeaseHolder != "" || !got.LeaseUntil.IsZero() || e.m.RenewLeases(bg) != 0 {
		t.Errorf("private store: %+v", got)
	}
	close(e.exec.block)
}

func (r *replicas) stateOn(t *testing.T, m *Manager, id string) State {
	t.Helper()
	tk, err := m.Lookup(bg, id)
	if err != nil {
		t.Fatalf("Lookup(%s): %v", id, err)
	}
	return tk.State
}

func (r *replicas) resultOn(t *testing.T, m *Manager, id string) (json.RawMessage, interface{ Name() string }) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	res, rpcErr, err := m.Result(ctx, "alice", id)
	if err != nil {
		t.Fatalf("Result(%s): %v", id, err)
	}
	if rpcErr == nil {
		return res, nil
	}
	return res, rpcErr
}

// TestLeaseRetakenAfterOlderWriter: an older replica rewriting the executing task (an answer, a
// status) drops the lease fields; the executing replica takes its lease back at the next
// renewal instead of stopping its call.
func TestLeaseRetakenAfterOlderWriter(t *testing.T) {
	r := newReplicas(t)
	tk := r.executing(t)
	if _, err := r.b.write(bg, tk.ID, func(t *Task) error { t.LeaseHolder, t.LeaseUntil = "", time.Time{}; return nil }, true); err != nil {
		t.Fatal(err)
	}
	if n := r.a.RenewLeases(bg); n != 1 {
		t.Fatalf("renewed %d, want the lease retaken", n)
	}
	got, _ := r.b.Lookup(bg, tk.ID)
	if got.State != Executing || got.LeaseHolder != "a" || got.LeaseUntil.IsZero() {
		t.Fatalf("after the renewal: %+v", got)
	}
	close(r.exec.block)
	if res, rpcErr := r.resultOn(t, r.b, tk.ID); string(res) != okResult || rpcErr != nil {
		t.Errorf("result: %s, %v", res, rpcErr)
	}
}

// BenchmarkRenewLeases measures one renewal round over 100 executing tasks on a shared memory
// store (a compare-and-swap rewrite of each task): the store work a replica adds per
// renewal period (tasks.execution_lease / 3) for its running calls.
func BenchmarkRenewLeases(b *testing.B) {
	st := sharedMemory{store.NewMemory()}
	exec := &fakeExec{result: json.RawMessage(okResult), block: make(chan struct{}), started: make(chan string, 100)}
	m := NewManager(st, exec, nil, Options{MaxTTL: time.Hour, Replica: "a", ExecutionLease: testLease})
	defer func() { close(exec.block); _ = m.Close() }()
	for range 100 {
		if _, err := m.Create(bg, CreateRequest{Owner: "alice", Tool: "slow", Arguments: json.RawMessage(`{"path":"/tmp/x"}`), Accelerated: true}); err != nil {
			b.Fatal(err)
		}
		<-exec.started // sent by the call, after execute registered it as running
	}
	b.ReportAllocs()
	for b.Loop() {
		if n := m.RenewLeases(bg); n != 100 {
			b.Fatalf("renewed %d, want 100", n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/renewal")
}

// TestApprovedCreatorGone: a 2025-11-25 task created on replica a and approved through b is
// started by a alone. When a never claims it (killed, or restarted under a new id) b fails it
// once the start lease lapses — ExecutionInterrupted, saying the call was not sent — instead
// of leaving it approved until its TTL; the call never ran. A creator that claims in time is
// not failed.
func TestApprovedCreatorGone(t *testing.T) {
	r := newReplicas(t)
	pending := func() *Task {
		tk, err := r.a.Create(bg, CreateRequest{Owner: "alice", SessionID: "s1", Tool: "slow", Arguments: json.RawMessage(`{}`), Workflow: "default"})
		if err != nil || tk.State != AwaitingApproval {
			t.Fatalf("create on a: %+v, %v", tk, err)
		}
		return tk
	}
	gone := pending()
	got, err := r.b.Approve(bg, gone.ID, "bob", "")
	if err != nil || got.State != Approved || got.LeaseHolder != "a" || !got.LeaseUntil.Equal(r.clock.Now().Add(testLease)) {
		t.Fatalf("approved on b: %+v, %v", got, err)
	}
	r.clock.Advance(testLease - time.Millisecond)
	r.b.watchLeases(bg)
	if r.b.Sweep(bg); r.stateOn(t, r.b, gone.ID) != Approved {
		t.Fatalf("failed before the start lease ended: %s", r.stateOn(t, r.b, gone.ID))
	}
	r.clock.Advance(time.Millisecond)
	if n := r.b.Sweep(bg); n != 1 {
		t.Fatalf("swept %d at the start lease's end, want 1", n)
	}
	res, rpcErr := r.resultOn(t, r.b, gone.ID)
	if res != nil || rpcErr == nil || rpcErr.Name() != "ExecutionInterrupted" {
		t.Fatalf("outcome: %s, %v", res, rpcErr)
	}
	if final, _ := r.b.Lookup(bg, gone.ID); final.StatusMessage != notStartedStatus || !strings.Contains(final.Error.Message, "not sent") {
		t.Errorf("failed task: %q, %v", final.StatusMessage, final.Error)
	}
	if n := r.exec.callsFor(gone.ID); n != 0 {
		t.Errorf("the call ran %d times", n)
	}

	// a is alive: its poll claims the task it created and runs it under its own lease.
	alive := pending()
	if _, err := r.b.Approve(bg, alive.ID, "bob", ""); err != nil {
		t.Fatal(err)
	}
	r.a.launchApproved(bg)
	select {
	case <-r.exec.started:
	case <-time.After(5 * time.Second):
		t.Fatal("a did not start the call it created")
	}
	r.clock.Advance(testLease - time.Millisecond)
	r.b.watchLeases(bg)
	r.b.Sweep(bg)
	if s := r.stateOn(t, r.b, alive.ID); s != Executing {
		t.Fatalf("claimed in time, then %s", s)
	}
	close(r.exec.block)
	if res, rpcErr := r.resultOn(t, r.b, alive.ID); string(res) != okResult || rpcErr != nil {
		t.Errorf("result of the claimed task: %s, %v", res, rpcErr)
	}
}

// TestModernApprovedStarterGone (issue 30): a 2026-07-28 task approved on replica a (or
// created approved there, accelerated) whose replica dies before claiming it is started by
// replica b once the start lease lapses — within the lease, not at its TTL — and runs once.
// Old code: no start lease for 2026-07-28 tasks, so no replica ever looked at it again and it
// stayed approved until its TTL.
func TestModernApprovedStarterGone(t *testing.T) {
	for _, accelerated := range []bool{false, true} {
		name := "approved"
		if accelerated {
			name = "accelerated"
		}
		t.Run(name, func(t *testing.T) {
			r := newReplicas(t)
			req := CreateRequest{Owner: "alice", Tool: "slow", Arguments: json.RawMessage(`{}`), Era: EraModern, Workflow: "default",
				Accelerated: accelerated, DeferStart: accelerated}
			tk, err := r.a.Create(bg, req)
			if err != nil {
				t.Fatal(err)
			}
			_ = r.a.Close() // a dies: nothing it launches from now on runs
			if !accelerated {
				if got, err := r.a.Approve(bg, tk.ID, "bob", ""); err != nil || got.State != Approved {
					t.Fatalf("approve on a: %+v, %v", got, err)
				}
			}
			r.clock.Advance(testLease - time.Millisecond)
			r.b.watchLeases(bg)
			if r.b.Sweep(bg); r.stateOn(t, r.b, tk.ID) != Approved {
				t.Fatalf("before the start lease ended: %s", r.stateOn(t, r.b, tk.ID))
			}
			r.clock.Advance(time.Millisecond)
			r.b.watchLeases(bg) // b sees the lease lapse and starts the call itself
			res, rpcErr := r.resultOn(t, r.b, tk.ID)
			if rpcErr != nil || string(res) != okResult {
				t.Fatalf("outcome on b: %s, %v", res, rpcErr)
			}
			if n := r.exec.callsFor(tk.ID); n != 0 {
				t.Errorf("dead replica a ran the call %d times", n)
			}
		})
	}
}
