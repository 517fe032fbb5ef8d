package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
)

// Following a task: a stream that waits for a task's outcome (tasks/result, a held plain call)
// also carries the upstream's questions during its call to the owner, and a held call's
// progress notifications. One loop on the caller's goroutine does all three (Follow): a held
// call is an open connection, thousands may wait at once, and a goroutine per relay cost each
// of them about 8 KB (docs/PERFORMANCE.md "Held plain calls").

// Asked is what Relay.Ask did with a question.
type Asked int

const (
	// Relayed: the question went on the stream (or is left for the tollgate_* tools and
	// tasks/get); Follow waits on.
	Relayed Asked = iota
	// RelayClosed: the stream cannot carry questions (a JSON reply, the client went away);
	// Follow asks no more and waits on for the outcome.
	RelayClosed
	// RelayReturn: Follow returns the question to its caller (a 2026-07-28 held call answers
	// with an InputRequiredResult).
	RelayReturn
)

// Relay is what a stream following a task does besides waiting for its outcome.
type Relay struct {
	// Ask is given each question of the task's that becomes pending, once (nil: questions
	// are not relayed).
	Ask func(*Question) Asked
	// Tick is called every Every while Follow waits; false stops the ticks (nil: none).
	Tick  func() bool
	Every time.Duration
	// Note is given each notification of the upstream's during the task's call that this
	// process runs (notes.go), in order; false: no more (nil: notes are not taken).
	Note func(Note) bool
}

// Step is where Follow stopped: the task finished (Done, with exactly what the call
// returned, as Result), or Relay.Ask returned RelayReturn for Question.
type Step struct {
	Done     bool
	Result   json.RawMessage
	Error    *jsonrpc.Error
	Question *Question
}

// Follow waits for owner's task id to finish, as Result does, while r relays its questions
// and ticks. Errors: ErrNotFound (a foreign owner too), ctx's error when ctx ends (the task
// goes on).
func (m *Manager) Follow(ctx context.Context, owner, id string, r Relay) (Step, error) {
	if r.Ask != nil {
		m.relays.add(id, 1)
		defer m.relays.add(id, -1)
	}
	var tick <-chan time.Time
	if r.Tick != nil && r.Every > 0 {
		t := time.NewTicker(r.Every)
		defer t.Stop()
		tick = t.C
	}
	var notes *noteFeed
	if r.Note != nil {
		sub, unsubscribe := m.notes.subscribe(id)
		defer unsubscribe()
		notes = &noteFeed{sub: sub, fn: r.Note}
	}
	seen := "" // the last question given to Ask
	for {
		ev, err := m.await(ctx, owner, id, seen, r.Ask != nil, tick, notes)
		switch {
		case err != nil:
			return Step{}, err
		case ev.Done:
			notes.drain() // the call's notes come before its outcome
			return ev.Step, nil
		case ev.Question != nil:
			seen = ev.Question.ID
			switch r.Ask(ev.Question) {
			case RelayReturn:
				return ev.Step, nil
			case RelayClosed:
				r.Ask = nil
			}
		case ev.tick:
			if !r.Tick() {
				tick = nil
			}
		}
	}
}

// Relaying reports whether a stream of this process relays task id's questions now (Follow
// with an Ask); otherwise they go to the owner's session stream.
func (m *Manager) Relaying(id string) bool { return m.relays.open(id) }

type awaited struct {
	Step
	tick bool
}

// await blocks until owner's task id is finished, or (questions) has a pending question other
// than seen, or tick fires. The first change after the call is never missed: the waiter is
// taken before the task is read.
func (m *Manager) await(ctx context.Context, owner, id, seen string, questions bool, tick <-chan time.Time, notes *noteFeed) (awaited, error) {
	backoff := storeRetryMin
	for {
		w := m.acquireWaiter(id)
		t, err := m.getOwned(ctx, owner, id, false)
		if err == nil && !m.now().Before(t.ExpiresAt()) && t.State != Expired {
			// past its TTL a finished task's result is gone (spec: MAY delete after ttl)
			err = ErrNotFound
		}
		if err != nil && storeFailure(err) && ctx.Err() == nil {
			// The store did not answer (Redis away): the task may well exist and finish
			// meanwhile. Read again with backoff until ctx ends; the caller then says the store
			// is unavailable rather than that the task is unknown.
			m.releaseWaiter(id, w)
			if fired, err := sleepOrTick(ctx, backoff, tick); err != nil || fired {
				return awaited{tick: fired}, err
			}
			backoff = min(2*backoff, storeRetryMax)
			continue
		}
		if err != nil {
			m.releaseWaiter(id, w)
			return awaited{}, err
		}
		backoff = storeRetryMin
		if t.State.Terminal() {
			m.releaseWaiter(id, w)
			return finished(t), nil
		}
		if q := t.PendingQuestion(); questions && q != nil && q.ID != seen {
			m.releaseWaiter(id, w)
			return awaited{Step: Step{Question: q}}, nil
		}
		woken, fired := m.waitChange(ctx, id, w, tick, notes) // close happens after last is set: reading it is safe
		if ctx.Err() != nil {
			return awaited{}, ctx.Err()
		}
		// The task as committed by the change that woke us: it may be deleted right after
		// (retention 0), and a waiter must still learn the outcome, e.g. TaskExpired.
		if last := w.last; woken && last != nil && last.State.Terminal() {
			return finished(last), nil
		}
		if fired {
			return awaited{tick: true}, nil
		}
	}
}

func finished(t *Task) awaited {
	res, rpcErr := outcome(t)
	return awaited{Step: Step{Done: true, Result: res, Error: rpcErr}}
}

// relays counts, per task, the streams of this process that relay its questions (Follow).
type relays struct {
	mu sync.Mutex
	n  map[string]int
}

func (a *relays) add(id string, d int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == nil {
		a.n = map[string]int{}
	}
	if a.n[id] += d; a.n[id] <= 0 {
		delete(a.n, id)
	}
}

func (a *relays) open(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n[id] > 0
}

// Store retries: a read or a commit that failed because the store did not answer is tried
// again after storeRetryMin, doubling up to storeRetryMax.
const (
	storeRetryMin = 50 * time.Millisecond
	storeRetryMax = 2 * time.Second
)

// storeFailure reports whether err is the store failing to answer (see ErrStore).
func storeFailure(err error) bool { return errors.Is(err, ErrStore) }

// sleepOrTick waits d; it returns early with fired when tick fires, or with ctx's error.
func sleepOrTick(ctx context.Context, d time.Duration, tick <-chan time.Time) (fired bool, err error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-tick:
		return true, nil
	case <-t.C:
		return false, nil
	}
}
