// Package session tracks the MCP sessions that pass through Tollgate: who owns them, which
// upstream task ids they created, and the open GET stream Tollgate may push notifications on.
package session

import (
	"container/list"
	"sync"
	"time"

	"github.com/google/uuid"
)

// LocalPrefix marks session ids Tollgate minted because the upstream runs without sessions;
// they are stripped before forwarding (DESIGN.md §3: tasks are owned by the MCP session).
const LocalPrefix = "tgs_"

// NewLocalID returns an unguessable session id for a session-less upstream.
func NewLocalID() string { return LocalPrefix + uuid.NewString() }

// Session is one MCP session seen by Tollgate.
type Session struct {
	ID    string
	Local bool // minted by Tollgate, unknown to the upstream

	mu            sync.Mutex
	lastSeen      time.Time
	upstreamTasks map[string]struct{}
	streams       map[*Stream]struct{}
	protocol      string
}

// Owner is the task owner for callers without an authenticated subject.
func (s *Session) Owner() string { return "session:" + s.ID }

// SetProtocol records the negotiated protocol version.
func (s *Session) SetProtocol(v string) {
	s.mu.Lock()
	s.protocol = v
	s.mu.Unlock()
}

// Protocol is the negotiated protocol version ("" if unknown).
func (s *Session) Protocol() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.protocol
}

// maxUpstreamTasks bounds the ids bound to one session.
const maxUpstreamTasks = 10000

// BindUpstreamTask records that this session created upstream task id (REQ-CORE-007 F-005:
// only the creator may route tasks/* for it).
func (s *Session) BindUpstreamTask(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.upstreamTasks == nil {
		s.upstreamTasks = map[string]struct{}{}
	}
	if _, ok := s.upstreamTasks[id]; ok {
		return
	}
	if len(s.upstreamTasks) >= maxUpstreamTasks {
		for k := range s.upstreamTasks { // drop an arbitrary old binding
			delete(s.upstreamTasks, k)
			break
		}
	}
	s.upstreamTasks[id] = struct{}{}
}

// OwnsUpstreamTask reports whether this session created upstream task id.
func (s *Session) OwnsUpstreamTask(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.upstreamTasks[id]
	return ok
}

// Stream is an open server→client SSE stream of a session on which Tollgate may inject its own
// messages (notifications/tasks/status, notifications/tools/list_changed).
type Stream struct {
	C chan []byte // buffered; a full buffer drops the message (clients can poll tasks/get)
}

// Attach registers an open stream; call the returned func when it closes.
func (s *Session) Attach() (*Stream, func()) {
	st := &Stream{C: make(chan []byte, 64)}
	s.mu.Lock()
	if s.streams == nil {
		s.streams = map[*Stream]struct{}{}
	}
	s.streams[st] = struct{}{}
	s.mu.Unlock()
	return st, func() {
		s.mu.Lock()
		delete(s.streams, st)
		s.mu.Unlock()
	}
}

// Push delivers msg to one open stream of the session; false if none is open or it is full.
func (s *Session) Push(msg []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for st := range s.streams {
		select {
		case st.C <- msg:
			return true
		default:
		}
	}
	return false
}

// HasStream reports whether a server→client stream is open.
func (s *Session) HasStream() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.streams) > 0
}

// Registry holds the known sessions, bounded with least-recently-seen eviction.
type Registry struct {
	mu    sync.Mutex
	max   int
	m     map[string]*list.Element
	lru   *list.List // front = most recent
	onDel func(*Session)

	ended      map[string]struct{} // sessions the client ended (DELETE), bounded FIFO
	endedOrder []string
}

// NewRegistry returns a registry holding at most max sessions (default 10000). onDelete, if not
// nil, runs (outside the lock) for every session removed or evicted.
func NewRegistry(max int, onDelete func(*Session)) *Registry {
	if max <= 0 {
		max = 10000
	}
	return &Registry{max: max, m: map[string]*list.Element{}, lru: list.New(), onDel: onDelete}
}

// Get returns the session with id, or nil.
func (r *Registry) Get(id string) *Session {
	if id == "" {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.m[id]; ok {
		r.lru.MoveToFront(e)
		s := e.Value.(*Session)
		s.touch()
		return s
	}
	return nil
}

// Touch returns the session with id, creating it if unknown (sessions created before a
// Tollgate restart are adopted on first use).
func (r *Registry) Touch(id string) *Session {
	if id == "" {
		return nil
	}
	r.mu.Lock()
	if e, ok := r.m[id]; ok {
		r.lru.MoveToFront(e)
		s := e.Value.(*Session)
		r.mu.Unlock()
		s.touch()
		return s
	}
	s := &Session{ID: id, Local: len(id) > len(LocalPrefix) && id[:len(LocalPrefix)] == LocalPrefix, lastSeen: time.Now()}
	r.m[id] = r.lru.PushFront(s)
	var evicted *Session
	if r.lru.Len() > r.max {
		last := r.lru.Back()
		evicted = last.Value.(*Session)
		r.lru.Remove(last)
		delete(r.m, evicted.ID)
	}
	r.mu.Unlock()
	if evicted != nil && r.onDel != nil {
		r.onDel(evicted)
	}
	return s
}

// Delete removes a session (DELETE /mcp succeeded) and remembers that it ended, so a task
// approved later is not executed in it (upstreams do not all refuse ended sessions).
func (r *Registry) Delete(id string) {
	r.mu.Lock()
	e, ok := r.m[id]
	if ok {
		r.lru.Remove(e)
		delete(r.m, id)
	}
	if r.ended == nil {
		r.ended = map[string]struct{}{}
	}
	if _, seen := r.ended[id]; !seen && id != "" {
		if len(r.endedOrder) >= r.max {
			delete(r.ended, r.endedOrder[0])
			r.endedOrder = r.endedOrder[1:]
		}
		r.ended[id] = struct{}{}
		r.endedOrder = append(r.endedOrder, id)
	}
	r.mu.Unlock()
	if ok && r.onDel != nil {
		r.onDel(e.Value.(*Session))
	}
}

// Ended reports whether the client ended session id with DELETE (as far as this process
// remembers: the last max ended sessions).
func (r *Registry) Ended(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.ended[id]
	return ok
}

// Len is the number of known sessions.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lru.Len()
}

// Each calls fn for every session (snapshot; fn runs without the registry lock).
func (r *Registry) Each(fn func(*Session)) {
	r.mu.Lock()
	all := make([]*Session, 0, r.lru.Len())
	for e := r.lru.Front(); e != nil; e = e.Next() {
		all = append(all, e.Value.(*Session))
	}
	r.mu.Unlock()
	for _, s := range all {
		fn(s)
	}
}

func (s *Session) touch() {
	s.mu.Lock()
	s.lastSeen = time.Now()
	s.mu.Unlock()
}
