package tasks

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
)

// Notes: the upstream's notifications/progress and notifications/message during a task's call
// (an approved held call, a task call) belong to whoever waits for that call, as they would
// without Tollgate. The execution publishes each (NoteFrom); the streams of this process that
// follow the task (Follow with Relay.Note: a held call, tasks/result) take them from a bounded
// buffer of their own, on their own goroutine, so a slow client never holds up the execution:
// when its buffer is full, notes are dropped. A note no stream of this process follows goes
// to Options.Unfollowed (a 2025-11-25 task call's session stream), or nowhere.

// Note is one notification of the upstream's during a task's call.
type Note struct {
	Method string
	Params json.RawMessage
}

// Note methods relayed to a task's caller.
const (
	MethodProgress = "notifications/progress"
	MethodLog      = "notifications/message"
)

// Bounds of the notes a following stream has not written yet: notes beyond either are dropped.
const (
	noteQueue    = 64
	noteBytes    = 256 << 10 // queued params bytes per stream
	maxNoteBytes = 64 << 10  // a larger note is dropped
)

// ProgressToken is the progressToken Tollgate sends the upstream with task id's call: the
// notes are mapped back by task, so a following stream gets them under its own token.
func ProgressToken(id string) string { return execTokenPrefix + id }

const execTokenPrefix = "tollgate-exec-"

// ProgressTask returns the task whose call Tollgate sent with progressToken tok (a JSON
// value); ok is false for any other token.
func ProgressTask(tok json.RawMessage) (id string, ok bool) {
	var s string
	if len(tok) == 0 || tok[0] != '"' || json.Unmarshal(tok, &s) != nil {
		return "", false
	}
	return strings.CutPrefix(s, execTokenPrefix)
}

// noteKey is the context key under which the Manager hands an execution its publisher.
type noteKey struct{}

// NoteFunc publishes one notification of the upstream's during the execution.
type NoteFunc func(Note)

// NoteFrom returns the publisher for the task whose execution ctx belongs to, nil outside an
// execution the Manager started.
func NoteFrom(ctx context.Context) NoteFunc {
	f, _ := ctx.Value(noteKey{}).(NoteFunc)
	return f
}

// Relayable notes: progress and log messages; others are not the caller's.
func noteRelayable(method string) bool { return method == MethodProgress || method == MethodLog }

// withNotes hands task t's execution its publisher, and registers it for Note while the
// execution runs; the returned func ends that.
func (m *Manager) withNotes(ctx context.Context, t *Task) (context.Context, func()) {
	t = t.Clone()
	pub := NoteFunc(func(n Note) {
		if !noteRelayable(n.Method) || len(n.Params) > maxNoteBytes {
			return
		}
		if n.Method == MethodProgress {
			if id, ok := ProgressTask(jsonrpc.Member(n.Params, "progressToken")); ok && id != t.ID {
				return // another call's progress (a stream that names no call carries both)
			}
		}
		if !m.notes.publish(t.ID, n) && m.opts.Unfollowed != nil {
			m.opts.Unfollowed(t, n)
		}
	})
	m.mu.Lock()
	m.notifiers[t.ID] = noteTarget{session: t.SessionID, pub: pub}
	m.mu.Unlock()
	return context.WithValue(ctx, noteKey{}, pub), func() {
		m.mu.Lock()
		delete(m.notifiers, t.ID)
		m.mu.Unlock()
	}
}

// noteTarget is the publisher of an execution running in this process, and the upstream
// session it runs on.
type noteTarget struct {
	session string
	pub     NoteFunc
}

// Note publishes n for task id when its execution runs in this process on upstream session
// sessionID (a notification the upstream sent on that session's GET stream rather than on the
// call's own stream); otherwise it is dropped.
func (m *Manager) Note(id, sessionID string, n Note) {
	m.mu.Lock()
	tg, ok := m.notifiers[id]
	m.mu.Unlock()
	if ok && tg.session == sessionID {
		tg.pub(n)
	}
}

// noteHub holds, per task, the buffers of the streams of this process following it.
type noteHub struct {
	mu   sync.Mutex
	subs map[string]map[*noteSub]struct{}
}

type noteSub struct {
	ch     chan Note
	queued atomic.Int64 // params bytes in ch
}

// subscribe adds a buffer for task id; the returned func removes it.
func (h *noteHub) subscribe(id string) (*noteSub, func()) {
	s := &noteSub{ch: make(chan Note, noteQueue)}
	h.mu.Lock()
	if h.subs == nil {
		h.subs = map[string]map[*noteSub]struct{}{}
	}
	if h.subs[id] == nil {
		h.subs[id] = map[*noteSub]struct{}{}
	}
	h.subs[id][s] = struct{}{}
	h.mu.Unlock()
	return s, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.subs[id], s)
		if len(h.subs[id]) == 0 {
			delete(h.subs, id)
		}
	}
}

// publish offers n to every stream following task id, never blocking: a full buffer drops
// it. followed reports whether any stream follows the task.
func (h *noteHub) publish(id string, n Note) (followed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[id] {
		size := int64(len(n.Params))
		if s.queued.Add(size) > noteBytes {
			s.queued.Add(-size)
			continue
		}
		select {
		case s.ch <- n:
		default:
			s.queued.Add(-size)
		}
	}
	return len(h.subs[id]) > 0
}

// noteFeed is what a Follow loop takes notes from (nil: none).
type noteFeed struct {
	sub *noteSub
	fn  func(Note) bool
}

// take hands n to the stream; false stops the feed.
func (f *noteFeed) take(n Note) {
	f.sub.queued.Add(-int64(len(n.Params)))
	if f.fn != nil && !f.fn(n) {
		f.fn = nil // the stream cannot carry them any more: drop the rest
	}
}

// ch is the feed's channel, nil (never ready) without a feed.
func (f *noteFeed) ch() <-chan Note {
	if f == nil {
		return nil
	}
	return f.sub.ch
}

// drain hands the notes already buffered to the stream: an outcome is written after the
// notes the execution published before it.
func (f *noteFeed) drain() {
	if f == nil {
		return
	}
	for {
		select {
		case n := <-f.sub.ch:
			f.take(n)
		default:
			return
		}
	}
}
