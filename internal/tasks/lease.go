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

// failLeaseLost fails t, executing under a lapsed lease, with ExecutionInterrupted; it returns
// the task as it stands (a renewal that committed first keeps it executing).
func (m *Manager) failLeaseLost(ctx context.Context, t *Task) *Task {
	nt, err := m.update(ctx, t.ID, func(t *Task) error {
		if t.State != Executing || !leaseExpired(t, m.now()) {
			return errNoop
		}
		t.State, t.Error = Failed, leaseLostError(t)
		t.StatusMessage = leaseLostStatus
		return nil
	})
	switch {
	case err == nil:
		m.met.leaseLapsed()
		m.log.Warn("task: the replica executing it stopped renewing its lease; failed as interrupted",
			"task_id", t.ID, "tool", t.Tool, "replica", t.LeaseHolder)
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
	recs, err := m.st.List(ctx, store.Filter{States: []string{string(Executing)}})
	if err != nil {
		m.log.Warn("task store: listing executing tasks failed", "error", err)
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
