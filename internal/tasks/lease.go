package tasks

import (
	"context"
	"errors"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

// Execution lease (shared store only). A replica killed while a task's call runs (SIGKILL,
// OOM, node loss) cannot fail the task itself, and no other replica may run it again (at
// most once). So the claim Approved → Executing records the executing replica (LeaseHolder,
// its random id) and a deadline (LeaseUntil = now + tasks.execution_lease); one ticker per
// replica renews the leases of all the calls it runs, every third of the lease; any replica
// that sees a lease lapse fails the task with -32603 ExecutionInterrupted through the normal
// committed-transition path. Renewal and expiry are both compare-and-swap updates of the
// task, so exactly one wins. A replica that finds its lease lost stops the call and drops its
// result. Tasks executing without a lease (stored by an older version) never lapse.

// leaseLostStatus is the statusMessage of a task failed because its lease lapsed.
const leaseLostStatus = "Failed: the replica executing it stopped answering"

// The same lease covers the step before: a 2025-11-25 task approved through any replica is run
// only by the replica that created it (the caller's upstream session lives there), which
// claims it within a second by polling. The approval therefore gives that replica a lease
// (LeaseHolder = the creator, LeaseUntil = now + tasks.execution_lease) to start the call; the
// claim Approved → Executing replaces it with its execution lease. A creator that is gone
// (killed, or restarted under a new replica id) never claims, and once the lease lapses any
// replica fails the task with ExecutionInterrupted, saying the call was never sent, instead of
// leaving it approved until its TTL.

// notStartedStatus is the statusMessage of an approved task whose creator never started it.
const notStartedStatus = "Failed: the replica holding the caller's session stopped answering before the call started"

// A 2026-07-28 task has no upstream session tying it to a replica: the replica that approves
// (or creates, accelerated) it starts it, under the same start lease. If that replica dies
// before the claim, any replica that sees the lease lapse starts it instead (the claim's
// compare-and-swap still lets exactly one run it), so no approved task waits for its TTL.

// awaitStart gives t, just approved (or created approved), its start lease (shared store
// only): held by its creator for a 2025-11-25 task, by this replica, which starts it now,
// for a 2026-07-28 one.
func (m *Manager) awaitStart(t *Task) {
	if !m.shared {
		return
	}
	switch {
	case t.Era == EraModern:
		t.LeaseHolder, t.LeaseUntil = m.opts.Replica, m.now().Add(m.opts.ExecutionLease)
	case t.Replica != "":
		t.LeaseHolder, t.LeaseUntil = t.Replica, m.now().Add(m.opts.ExecutionLease)
	}
}

// leaseLapsed reports whether t is in a state an execution lease covers and that lease has lapsed.
func leaseLapsed(t *Task, now time.Time) bool {
	return (t.State == Executing || t.State == Approved) && leaseExpired(t, now)
}

// leaseExpired reports whether t's execution lease has lapsed at now (never without a lease).
func leaseExpired(t *Task, now time.Time) bool {
	return !t.LeaseUntil.IsZero() && !now.Before(t.LeaseUntil)
}

// renewEvery is how often the executing replica renews its leases: a third of the lease, so
// two renewals may fail (a store hiccup) before the lease lapses.
func (m *Manager) renewEvery() time.Duration { return m.opts.ExecutionLease / 3 }

// runLeases renews this replica's leases until ctx ends: one ticker for all its executions.
func (m *Manager) runLeases(ctx context.Context) {
	tick := time.NewTicker(m.renewEvery())
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			m.RenewLeases(ctx)
		}
	}
}

// RenewLeases extends the execution lease of every task this replica is executing and returns
// how many it renewed. A task found no longer executing under this replica's lease (another
// replica failed it when the lease lapsed, or it was cancelled) has its call stopped; the call's
// result is then dropped. Run's ticker calls it; tests with an injected clock call it directly.
func (m *Manager) RenewLeases(ctx context.Context) int {
	if !m.shared {
		return 0
	}
	m.mu.Lock()
	ids := make([]string, 0, len(m.running))
	for id := range m.running {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	renewed := 0
	for _, id := range ids {
		if ctx.Err() != nil {
			break
		}
		lost := false
		_, err := m.write(ctx, id, func(t *Task) error {
			if t.State != Executing || (t.LeaseHolder != "" && t.LeaseHolder != m.opts.Replica) {
				lost = true
				return errNoop
			}
			// No holder: an older replica rewrote the task (e.g. recorded an answer) without
			// the lease fields. The call is still this replica's (it is in running): retake it.
			t.LeaseHolder, t.LeaseUntil = m.opts.Replica, m.now().Add(m.opts.ExecutionLease)
			return nil
		}, true)
		switch {
		case err == nil:
			renewed++
		case lost || errors.Is(err, ErrNotFound):
			m.mu.Lock()
			stop := m.running[id]
			m.mu.Unlock()
			if stop != nil {
				m.log.Warn("task: no longer executing under this replica's lease (failed elsewhere or cancelled); stopping the call, its result will be dropped", "task_id", id)
				stop()
			}
		default:
			m.log.Warn("task: renewing execution lease failed", "task_id", id, "error", err.Error())
		}
	}
	return renewed
}

// failLeaseLost fails t, executing (or approved and not started) under a lapsed lease, with
// ExecutionInterrupted; it returns the task as it stands (a renewal or claim that committed
// first keeps it going).
func (m *Manager) failLeaseLost(ctx context.Context, t *Task) *Task {
	if t.State == Approved && t.Era == EraModern {
		// Not started by the replica that was to: any replica may run it, so this one does
		// (execute's claim lets one replica only, and takes a fresh lease).
		m.log.Info("task: approved, but the replica that was to start it stopped answering; starting it here",
			"task_id", t.ID, "tool", t.Tool, "replica", t.LeaseHolder)
		m.launch(t.ID)
		return t
	}
	started := true
	nt, err := m.update(ctx, t.ID, func(t *Task) error {
		if !leaseLapsed(t, m.now()) {
			return errNoop
		}
		if started = t.State == Executing; started {
			t.State, t.Error, t.StatusMessage = Failed, leaseLostError(t), leaseLostStatus
		} else {
			t.State, t.Error, t.StatusMessage = Failed, notStartedError(t), notStartedStatus
		}
		return nil
	})
	switch {
	case err == nil:
		m.met.leaseLapsed()
		if started {
			m.log.Warn("task: the replica executing it stopped renewing its lease; failed as interrupted",
				"task_id", t.ID, "tool", t.Tool, "replica", t.LeaseHolder)
		} else {
			m.log.Warn("task: approved, but the replica that created it never started the call; failed as interrupted, the call was not sent",
				"task_id", t.ID, "tool", t.Tool, "replica", t.LeaseHolder)
		}
	case !errors.Is(err, errNoop):
		m.log.Error("task: failing a task whose execution lease lapsed failed", "task_id", t.ID, "error", err)
	}
	if nt == nil {
		return t
	}
	return nt
}

// watchLeases looks at the tasks executing on other replicas: a lapsed lease fails the task at
// once, a live one is put on the sweeper's heap at its deadline, where it is read again (and
// failed unless renewed meanwhile). Run calls it every third of the lease.
func (m *Manager) watchLeases(ctx context.Context) {
	recs, err := m.st.List(ctx, store.Filter{States: []string{string(Executing), string(Approved)}})
	if err != nil {
		m.log.Warn("task store: listing executing and approved tasks failed", "error", err)
		return
	}
	now := m.now()
	for _, r := range recs {
		t, err := decodeTask(r)
		if err != nil || t.LeaseUntil.IsZero() {
			continue // no lease: stored by an older version, never lapses
		}
		if leaseExpired(t, now) {
			m.failLeaseLost(ctx, t)
			continue
		}
		if t.LeaseHolder != m.opts.Replica {
			m.sweep.scheduleAt(t.LeaseUntil, t.ID)
		}
	}
}
