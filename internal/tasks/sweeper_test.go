package tasks

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

// sweepEntries is how many deadline entries the sweeper holds.
func (e *env) sweepEntries() int {
	e.m.sweep.mu.Lock()
	defer e.m.sweep.mu.Unlock()
	return len(e.m.sweep.h)
}

// A pending task costs the sweeper one entry, not one per deadline, and each deadline still
// happens in turn: approval timeout, then TTL end, then deletion after retention.
func TestSweeperOneEntryPerTask(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e := newEnv(t, nil, workflows(map[string]config.Workflow{
		"default": {Timeout: config.Duration(time.Minute), OnTimeout: "approve"},
	}), func(o *Options, _ *fakeExec) { o.Retention = time.Hour })
	e.exec.block, e.exec.started = make(chan struct{}), make(chan string, 8)
	defer close(e.exec.block)

	const n = 5
	var ids []string
	for range n {
		ids = append(ids, e.create(t, "alice", func(r *CreateRequest) { r.TTL = 2 * time.Minute }).ID)
	}
	if got := e.sweepEntries(); got != n {
		t.Fatalf("sweeper entries after %d creates = %d, want %d (one per task)", n, got, n)
	}

	// Approval timeout (on_timeout: approve): approved and executing, blocked upstream.
	e.clock.Advance(time.Minute)
	if got := e.m.Sweep(ctx); got != n {
		t.Fatalf("Sweep at the approval deadline looked at %d tasks, want %d", got, n)
	}
	for range n {
		select {
		case <-e.exec.started:
		case <-ctx.Done():
			t.Fatal("approved tasks did not start")
		}
	}
	if got := e.sweepEntries(); got != n {
		t.Errorf("sweeper entries after the approval timeout = %d, want %d (the TTL end)", got, n)
	}

	// TTL end: the executing tasks expire although their first entry has fired.
	e.clock.Advance(time.Minute)
	if got := e.m.Sweep(ctx); got != n {
		t.Fatalf("Sweep at the TTL end looked at %d tasks, want %d", got, n)
	}
	for _, id := range ids {
		if s := e.state(t, id); s != Expired {
			t.Errorf("task %s state %s after its TTL, want %s", id, s, Expired)
		}
	}
	if got := e.sweepEntries(); got != n {
		t.Errorf("sweeper entries after the TTL end = %d, want %d (the deletion)", got, n)
	}
	if at, ok := e.m.sweep.next(); !ok || !at.Equal(e.clock.Now().Add(time.Hour)) {
		t.Errorf("next deadline %v (%v), want TTL end + retention %v", at, ok, e.clock.Now().Add(time.Hour))
	}

	// Deletion after retention, and nothing left to schedule.
	e.clock.Advance(time.Hour)
	e.m.Sweep(ctx)
	for _, id := range ids {
		if _, err := e.m.Lookup(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("task %s after retention: err %v, want not found", id, err)
		}
	}
	if got := e.sweepEntries(); got != 0 {
		t.Errorf("sweeper entries after deletion = %d, want 0", got)
	}
}

// A deadline that fires for a task decided early (approved and finished before its approval
// timeout) only moves the entry on to the task's deletion.
func TestSweeperEntryMovesOnAfterEarlyDecision(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e := newEnv(t, nil, workflows(map[string]config.Workflow{
		"default": {Timeout: config.Duration(time.Minute)},
	}), func(o *Options, _ *fakeExec) { o.Retention = time.Hour })
	tk := e.create(t, "alice", func(r *CreateRequest) { r.TTL = 10 * time.Minute })
	if _, err := e.m.Reject(ctx, tk.ID, "bob", ""); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	e.m.Sweep(ctx)
	if s := e.state(t, tk.ID); s != Rejected {
		t.Fatalf("state %s, want %s", s, Rejected)
	}
	want := tk.CreatedAt.Add(10*time.Minute + time.Hour)
	if at, ok := e.m.sweep.next(); !ok || !at.Equal(want) || e.sweepEntries() != 1 {
		t.Errorf("next deadline %v (%v, %d entries), want only the deletion at %v", at, ok, e.sweepEntries(), want)
	}
	e.clock.Advance(10*time.Minute + time.Hour)
	e.m.Sweep(ctx)
	if _, err := e.m.Lookup(ctx, tk.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("after retention: err %v, want not found", err)
	}
}

// A task scheduled after its approval deadline passed (loaded late, or adopted from a replica
// that is gone) is due at once, not at its TTL end. Only deadlines after now used to count, so
// an orphaned approval never timed out.
func TestScheduleLatePastDeadlineIsDue(t *testing.T) {
	var s sweeper
	s.init()
	now := time.Now()
	tk := &Task{ID: "tg_late", State: AwaitingApproval, CreatedAt: now.Add(-time.Minute),
		ApprovalDeadline: now.Add(-50 * time.Second), TTL: time.Hour}
	s.schedule(tk, time.Hour, now)
	if ids := s.due(now); len(ids) != 1 || ids[0] != "tg_late" {
		t.Fatalf("due at scheduling time: %v, want [tg_late]", ids)
	}
	fresh := &Task{ID: "tg_fresh", State: AwaitingApproval, CreatedAt: now, ApprovalDeadline: now.Add(time.Minute), TTL: time.Hour}
	s.schedule(fresh, time.Hour, now)
	if ids := s.due(now); len(ids) != 0 {
		t.Fatalf("a task whose deadlines are ahead is due now: %v", ids)
	}
	if at, ok := s.next(); !ok || at.UnixNano() != now.Add(time.Minute).UnixNano() {
		t.Fatalf("next deadline %v, want the approval deadline", at)
	}
}
