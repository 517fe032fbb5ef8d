package tasks

import (
	"container/heap"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

// sweeper keeps the next deadline of every task (approval timeout, TTL end or deletion,
// whichever comes first) in one min-heap, so Run needs a single timer reset to the earliest
// deadline instead of a goroutine or timer per idle task. A task has one entry at a time: when
// it fires the task is re-read, only what is due happens, and the task's next deadline is
// scheduled (sweepOne). Entries are hints, so stale or duplicate ones are harmless. An entry is
// 24 bytes (Unix nanoseconds and the id, which shares the task's string).
type sweeper struct {
	mu   sync.Mutex
	h    deadlineHeap
	wake chan struct{} // an earlier deadline arrived
	run  sync.Mutex    // one sweep at a time (Run and Sweep)
}

type deadline struct {
	at int64 // Unix nanoseconds
	id string
}

type deadlineHeap []deadline

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h deadlineHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *deadlineHeap) Push(x any)        { *h = append(*h, x.(deadline)) }
func (h *deadlineHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	*h = old[:len(old)-1]
	if cap(old) > 64 && len(old) < cap(old)/4 {
		// Give the backing array back after a burst of tasks has been swept.
		*h = slices.Clone(*h)
	}
	return d
}

func (s *sweeper) init() { s.wake = make(chan struct{}, 1) }

// deadlines calls fn with each of t's deadlines: the approval timeout while awaiting, the TTL
// end while not terminal, the deletion after TTL + retention.
func deadlines(t *Task, retention time.Duration, fn func(time.Time)) {
	if t.State == AwaitingApproval && !t.ApprovalDeadline.IsZero() {
		fn(t.ApprovalDeadline)
	}
	if !t.State.Terminal() {
		fn(t.ExpiresAt())
	}
	fn(t.ExpiresAt().Add(retention))
}

// nextDeadline is t's earliest deadline after now; ok=false when none is left (sweepOne: the
// deadline that fired has been applied).
func nextDeadline(t *Task, retention time.Duration, now time.Time) (time.Time, bool) {
	var next time.Time
	deadlines(t, retention, func(at time.Time) {
		if at.After(now) && (next.IsZero() || at.Before(next)) {
			next = at
		}
	})
	return next, !next.IsZero()
}

// schedule records t's earliest deadline; one already past — a task loaded, or adopted from
// another replica, after its approval timeout — is due at once.
func (s *sweeper) schedule(t *Task, retention time.Duration, now time.Time) {
	var at time.Time
	deadlines(t, retention, func(d time.Time) {
		if at.IsZero() || d.Before(at) {
			at = d
		}
	})
	if at.Before(now) {
		at = now
	}
	s.push(at, t.ID)
}

// push adds one entry and wakes Run when it is the new earliest.
func (s *sweeper) push(at time.Time, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := at.UnixNano()
	earliest := len(s.h) == 0 || n < s.h[0].at
	heap.Push(&s.h, deadline{n, id})
	if earliest {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// scheduleAt adds one deadline for id at at (an execution lease's end, lease.go): an extra
// entry beside the task's own (entries are hints; sweepOne re-reads the task).
func (s *sweeper) scheduleAt(at time.Time, id string) { s.push(at, id) }

// due pops the ids whose deadline is at or before now.
func (s *sweeper) due(now time.Time) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	seen := map[string]bool{}
	n := now.UnixNano()
	for len(s.h) > 0 && s.h[0].at <= n {
		d := heap.Pop(&s.h).(deadline)
		if !seen[d.id] {
			seen[d.id] = true
			ids = append(ids, d.id)
		}
	}
	return ids
}

// next is the earliest deadline, ok=false when there is none.
func (s *sweeper) next() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.h) == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, s.h[0].at), true
}

// idleWait is how long Run sleeps with no deadline at all; any new one wakes it earlier.
const idleWait = time.Hour

// Loaded is closed once Run has loaded the stored tasks (recovery done, approved ones
// launched); a server starts serving after it.
func (m *Manager) Loaded() <-chan struct{} { return m.loaded }

// Run first loads the tasks the store holds (load), then is the sweeper: it applies approval
// timeouts, TTL ends and (shared store) lapsed execution leases when due and deletes finished
// tasks after TTL + retention, until ctx ends or Close is called. When it returns, running executions are stopped too (they are
// owned by the Manager).
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.runDone != nil {
		m.mu.Unlock()
		return errors.New("task manager: Run called twice")
	}
	done := make(chan struct{})
	m.runDone = done
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.closed = true
		m.mu.Unlock()
		m.cancel()
		m.wg.Wait()
		close(done)
	}()
	m.load(m.ctx)
	close(m.loaded)
	if w, ok := m.st.(store.Watcher); ok && m.shared {
		// Another replica's change (an answer to a question this replica's call waits for, a
		// decision) wakes this replica's waiters at once; their poll is the fallback.
		m.wg.Go(func() {
			if err := w.Watch(m.ctx, func(id string) { m.notify(id, nil) }); err != nil {
				m.log.Warn("task store: watching other replicas' changes failed; polling only", "error", err.Error())
			}
		})
	}

	timer := time.NewTimer(idleWait)
	defer timer.Stop()
	var poll <-chan time.Time
	polls := 0
	leaseEvery := 1
	if m.shared {
		// This replica renews the execution leases of the calls it runs; every third of the
		// lease it looks for other replicas' lapsed ones (lease.go).
		m.wg.Go(func() { m.runLeases(m.ctx) })
		leaseEvery = max(int(m.renewEvery()/sharedPollInterval), 1)
		// Decisions made on other instances reach this one through the store only.
		t := time.NewTicker(sharedPollInterval)
		defer t.Stop()
		poll = t.C
	}
	for {
		m.Sweep(ctx)
		wait := idleWait
		if at, ok := m.sweep.next(); ok {
			wait = min(max(at.Sub(m.now()), 0), idleWait)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case <-m.ctx.Done():
			return nil
		case <-m.sweep.wake:
		case <-timer.C:
		case <-poll:
			m.launchApproved(ctx)
			if polls++; polls%adoptEvery == 0 {
				m.adoptDeadlines(ctx)
			}
			if polls%leaseEvery == 0 {
				m.watchLeases(ctx)
			}
		}
	}
}

// sharedPollInterval is how often an instance sharing its store looks for tasks it created
// that another instance approved.
const sharedPollInterval = time.Second

// adoptEvery (in polls) is how often an instance sharing its store schedules the deadlines of
// pending tasks other instances created, so approval timeouts and TTL ends still happen when
// their creator is gone.
const adoptEvery = 10

// maxAdopted bounds the ids remembered as already scheduled.
const maxAdopted = 100000

// adoptDeadlines schedules the deadlines of pending tasks this instance has not seen yet.
func (m *Manager) adoptDeadlines(ctx context.Context) {
	recs, err := m.st.List(ctx, store.Filter{PendingOnly: true})
	if err != nil {
		m.log.Warn("task store: listing pending tasks failed", "error", err)
		return
	}
	m.mu.Lock()
	if m.adopted == nil || len(m.adopted) > maxAdopted {
		m.adopted = make(map[string]struct{})
	}
	m.mu.Unlock()
	for _, r := range recs {
		m.mu.Lock()
		_, seen := m.adopted[r.ID]
		m.adopted[r.ID] = struct{}{}
		m.mu.Unlock()
		if seen {
			continue
		}
		if t, err := decodeTask(r); err == nil && t.Replica != m.opts.Replica {
			m.sweep.schedule(t, m.opts.Retention, m.now())
		}
	}
}

// Sweep applies every deadline that is due now and returns how many tasks it looked at. Run
// calls it; tests with an injected clock call it directly.
func (m *Manager) Sweep(ctx context.Context) int {
	m.sweep.run.Lock()
	defer m.sweep.run.Unlock()
	ids := m.sweep.due(m.now())
	for _, id := range ids {
		if ctx.Err() != nil {
			break
		}
		m.sweepOne(ctx, id)
	}
	return len(ids)
}

func (m *Manager) sweepOne(ctx context.Context, id string) {
	t, err := m.load1(ctx, id)
	if err != nil {
		return // already deleted
	}
	t = m.settle(ctx, t)
	if !t.State.Terminal() || m.now().Before(t.ExpiresAt().Add(m.opts.Retention)) {
		// Not deleted: its next deadline takes the entry that fired.
		if at, ok := nextDeadline(t, m.opts.Retention, m.now()); ok {
			m.sweep.push(at, id)
		}
		return
	}
	// Only the sweeper deletes (under sweep.run), so the gauge is decremented once.
	if err := m.st.Delete(ctx, id); err != nil && !errors.Is(err, store.ErrNotFound) {
		m.log.Error("task: delete failed", "task_id", id, "error", err)
		return
	}
	m.met.moved(t.State, "")
	m.log.Debug("task deleted after TTL", "task_id", id)
	m.notify(id, nil)
}
