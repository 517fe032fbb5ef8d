// Package events is Tollgate's per-session event system: task transitions and upstream
// notifications are queued per MCP session and handed out exactly once, either to a blocking
// tollgate_await_activity call (Await) or appended to any other tollgate_* tool result (Take).
//
// Design (seed 002 "Unified Event System"): one bounded queue per session, ULID event ids that
// sort in publish order, eviction of the oldest undelivered events with a count reported to the
// next reader. Unlike the seed there is no goroutine or emitter per session: waiters block on a
// per-session broadcast channel that Publish closes, so every waiter wakes and the first to take
// the lock gets the events.
package events

import (
	"container/list"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/tollgate-mcp/tollgate/internal/disclose"
)

// Event types published by Tollgate. Other strings are allowed.
const (
	TypeTaskCreated   = "task_created"
	TypeTaskDecided   = "task_decided"
	TypeTaskCompleted = "task_completed"
	TypeTaskFailed    = "task_failed"
	TypeTaskCancelled = "task_cancelled"
	TypeTaskExpired   = "task_expired"
	// TypeTaskInputRequired: the upstream asks the task's owner something during its call.
	TypeTaskInputRequired = "task_input_required"
	TypeNotification      = "notification"
)

// Defaults for Options.
const (
	DefaultMaxEventsPerSession = 1000 // seed 002 EventSystemConfig.maxEvents
	DefaultMaxSessions         = 10000
)

// ErrSessionClosed is returned by Await when the session is closed (or evicted) while waiting.
var ErrSessionClosed = errors.New("events: session closed")

// Event is one thing that happened in a session.
type Event struct {
	ID     string          `json:"id"` // ULID, monotonic per hub: sorting by ID is publish order
	Type   string          `json:"type"`
	TaskID string          `json:"taskId,omitempty"`
	Time   time.Time       `json:"time"`
	Data   json.RawMessage `json:"data,omitempty"`
}

// Batch is what one reader receives.
type Batch struct {
	Events []Event `json:"events"`
	// Evicted counts events dropped (oldest first) since the previous read because the session
	// queue was full.
	Evicted int `json:"evicted,omitempty"`
	// TimedOut is set by Await when the timeout passed with nothing to deliver.
	TimedOut bool `json:"timedOut,omitempty"`
	// Immediate is set by Await when events were already waiting on entry (no wait happened);
	// tollgate_await_activity reports it as the "immediate" trigger (seed 002 §6).
	Immediate bool `json:"immediate,omitempty"`
}

// Options configures a Hub. Zero values take the defaults.
type Options struct {
	MaxEventsPerSession int // default 1000
	MaxSessions         int // default 10000; least recently used idle session is dropped beyond it
	Logger              *slog.Logger
	Now                 func() time.Time
}

// Hub holds the undelivered events of every session. All methods are safe for concurrent use.
type Hub struct {
	maxEvents   int
	maxSessions int
	log         *slog.Logger
	now         func() time.Time

	mu       sync.Mutex
	sessions map[string]*session
	lru      *list.List // of *session; front = most recently used
	entropy  *ulid.MonotonicEntropy
	idBuf    [10]byte // entropy of the next id
	lastMS   uint64
}

type session struct {
	key     string
	queue   []queued // undelivered, oldest first
	evicted int      // dropped since the last read
	wake    chan struct{}
	waiters int
	elem    *list.Element
}

// queued is an Event as a session's queue keeps it until it is read: the ULID as its 16 bytes
// rather than its 26-character text (a separate allocation), the time as Unix nanoseconds, the
// data as published — encoded JSON, or a Deferred encoded only when a reader takes it. 72 bytes
// besides the data, instead of 96 bytes and a 32-byte string.
type queued struct {
	id     ulid.ULID
	typ    string
	taskID string
	at     int64
	data   any // json.RawMessage or Deferred
}

// Deferred is event data kept compact in the queue and encoded when it is read: a session's
// queue holds an event per pending approval, so its data is most of what a pending approval
// costs in memory (docs/PERFORMANCE.md). EventData must return the same JSON every time.
type Deferred interface {
	EventData() json.RawMessage
}

func (q queued) event() Event {
	e := Event{ID: q.id.String(), Type: q.typ, TaskID: q.taskID, Time: time.Unix(0, q.at)}
	switch d := q.data.(type) {
	case json.RawMessage:
		e.Data = d
	case Deferred:
		e.Data = d.EventData()
	}
	return e
}

// NewHub returns an empty hub.
func NewHub(opts Options) *Hub {
	h := &Hub{
		maxEvents:   opts.MaxEventsPerSession,
		maxSessions: opts.MaxSessions,
		log:         opts.Logger,
		now:         opts.Now,
		sessions:    make(map[string]*session),
		lru:         list.New(),
		entropy:     ulid.Monotonic(rand.Reader, 0),
	}
	if h.maxEvents <= 0 {
		h.maxEvents = DefaultMaxEventsPerSession
	}
	if h.maxSessions <= 0 {
		h.maxSessions = DefaultMaxSessions
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.now == nil {
		h.now = time.Now
	}
	return h
}

// Publish queues an event for session. It never blocks on readers. data is marshalled to JSON
// (a json.RawMessage or []byte is used as is; a Deferred is kept and encoded when read; nil
// means no data). Callers must not put tool arguments or secrets in data: events are shown to
// the client and may be logged by it.
func (h *Hub) Publish(session, typ, taskID string, data any) {
	var raw any
	switch d := data.(type) {
	case Deferred:
		raw = d
	case json.RawMessage:
		if d != nil {
			raw = data // already boxed: kept without another allocation
		}
	default:
		if b := h.encode(typ, data); b != nil {
			raw = b
		}
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.touch(session)
	now := h.now()
	s.queue = append(s.queue, queued{id: h.newID(now), typ: typ, taskID: taskID, at: now.UnixNano(), data: raw})
	if over := len(s.queue) - h.maxEvents; over > 0 {
		// Drop the oldest undelivered events; the next reader learns how many (Batch.Evicted).
		// Warn once per unread run so a flooding session cannot flood the log too.
		if s.evicted == 0 {
			h.log.Warn("event queue full, evicting oldest undelivered events",
				"session_hash", disclose.OwnerHash(session), "max_events", h.maxEvents)
		}
		clear(s.queue[:over])
		s.queue = s.queue[over:]
		s.evicted += over
	}
	h.broadcast(s)
}

// Await returns the session's undelivered events. If there are some it returns at once
// (Batch.Immediate); otherwise it waits until an event is published, the timeout passes
// (Batch.TimedOut, no error), ctx ends (ctx.Err(), nothing taken) or the session is closed
// (ErrSessionClosed). Each event goes to exactly one of the session's concurrent readers.
// A timeout <= 0 does not wait.
func (h *Hub) Await(ctx context.Context, session string, timeout time.Duration) (Batch, error) {
	h.mu.Lock()
	s := h.touch(session)
	if b, ok := take(s); ok {
		h.mu.Unlock()
		b.Immediate = true
		return b, nil
	}
	if timeout <= 0 {
		h.mu.Unlock()
		return Batch{TimedOut: true}, nil
	}
	s.waiters++
	h.mu.Unlock()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	defer func() {
		h.mu.Lock()
		s.waiters--
		h.mu.Unlock()
	}()

	for {
		h.mu.Lock()
		if h.sessions[session] != s {
			h.mu.Unlock()
			return Batch{}, ErrSessionClosed
		}
		if b, ok := take(s); ok {
			h.mu.Unlock()
			return b, nil
		}
		wake := s.wake
		h.mu.Unlock()

		select {
		case <-wake:
			// Someone published or closed the session; re-check (another waiter may have won).
		case <-timer.C:
			// Last look: an event may have raced the timer.
			h.mu.Lock()
			closed := h.sessions[session] != s
			b, ok := take(s)
			h.mu.Unlock()
			switch {
			case closed:
				return Batch{}, ErrSessionClosed
			case ok:
				return b, nil
			}
			return Batch{TimedOut: true}, nil
		case <-ctx.Done():
			return Batch{}, ctx.Err()
		}
	}
}

// Take returns the session's undelivered events without waiting (used to append events to
// other tollgate_* results, seed 002 "any tool response delivers events").
func (h *Hub) Take(session string) Batch {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.sessions[session]
	if !ok {
		return Batch{}
	}
	h.lru.MoveToFront(s.elem)
	b, _ := take(s)
	return b
}

// Pending reports how many events wait undelivered for session.
func (h *Hub) Pending(session string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s, ok := h.sessions[session]; ok {
		return len(s.queue)
	}
	return 0
}

// Waiters reports how many Await calls block on session right now.
func (h *Hub) Waiters(session string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s, ok := h.sessions[session]; ok {
		return s.waiters
	}
	return 0
}

// Sessions reports how many sessions the hub holds.
func (h *Hub) Sessions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.sessions)
}

// CloseSession drops the session's events and wakes its waiters with ErrSessionClosed.
func (h *Hub) CloseSession(session string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s, ok := h.sessions[session]; ok {
		h.drop(s)
	}
}

// touch returns the session, creating it (and making room) if needed. h.mu must be held.
func (h *Hub) touch(key string) *session {
	if s, ok := h.sessions[key]; ok {
		h.lru.MoveToFront(s.elem)
		return s
	}
	if len(h.sessions) >= h.maxSessions {
		h.evictSession()
	}
	s := &session{key: key, wake: make(chan struct{})}
	s.elem = h.lru.PushFront(s)
	h.sessions[key] = s
	return s
}

// evictSession drops the least recently used session, preferring one nobody waits on so a
// blocked tollgate_await_activity is not cut short. h.mu must be held.
func (h *Hub) evictSession() {
	victim := h.lru.Back()
	for e := victim; e != nil; e = e.Prev() {
		if e.Value.(*session).waiters == 0 {
			victim = e
			break
		}
	}
	if victim == nil {
		return
	}
	s := victim.Value.(*session)
	h.log.Warn("event hub full, dropping least recently used session",
		"session_hash", disclose.OwnerHash(s.key), "max_sessions", h.maxSessions, "undelivered", len(s.queue))
	h.drop(s)
}

func (h *Hub) drop(s *session) {
	delete(h.sessions, s.key)
	h.lru.Remove(s.elem)
	s.queue = nil
	h.broadcast(s)
}

// broadcast wakes every current waiter of s. h.mu must be held. With no waiter nobody holds
// s.wake (Await counts itself in s.waiters before it reads the channel and until it stops
// using it), so the channel is kept rather than replaced on every event.
func (h *Hub) broadcast(s *session) {
	if s.waiters == 0 {
		return
	}
	close(s.wake)
	s.wake = make(chan struct{})
}

// take empties s's queue into a batch; ok is false when there is nothing to report.
func take(s *session) (Batch, bool) {
	if len(s.queue) == 0 && s.evicted == 0 {
		return Batch{}, false
	}
	b := Batch{Evicted: s.evicted}
	if len(s.queue) > 0 {
		b.Events = make([]Event, len(s.queue))
		for i, q := range s.queue {
			b.Events[i] = q.event()
		}
	}
	s.queue = nil
	s.evicted = 0
	return b, true
}

// newID returns a ULID strictly greater than every earlier one of this hub, even if the clock
// steps back. h.mu must be held.
func (h *Hub) newID(now time.Time) ulid.ULID {
	ms := ulid.Timestamp(now)
	if ms < h.lastMS {
		ms = h.lastMS
	}
	for {
		// ulid.New would take the entropy as an io.Reader and so allocate the id; the hub's
		// buffer is read into instead.
		var id ulid.ULID
		err := id.SetTime(ms)
		if err == nil {
			err = h.entropy.MonotonicRead(ms, h.idBuf[:])
		}
		if err == nil {
			copy(id[6:], h.idBuf[:])
			h.lastMS = ms
			return id
		}
		// Monotonic entropy overflowed within this millisecond: move to the next one.
		ms++
	}
}

func (h *Hub) encode(typ string, data any) json.RawMessage {
	switch d := data.(type) {
	case nil:
		return nil
	case json.RawMessage:
		return d
	case []byte:
		return json.RawMessage(d)
	}
	raw, err := json.Marshal(data)
	if err != nil {
		h.log.Warn("event data not encodable, publishing without data", "type", typ, "err", err)
		return nil
	}
	return raw
}
