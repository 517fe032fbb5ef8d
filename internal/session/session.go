// Package session tracks the MCP sessions that pass through Tollgate: who owns them, which
// upstream task ids they created, and the open GET stream Tollgate may push notifications on.
package session

import (
	"container/list"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"golang.org/x/time/rate"
)

// LocalPrefix marks session ids Tollgate minted because the upstream runs without sessions;
// they are stripped before forwarding (docs/contract.md §3: tasks are owned by the MCP session).
const LocalPrefix = "tgs_"

// NewLocalID returns an unguessable session id for a session-less upstream.
func NewLocalID() string { return LocalPrefix + uuid.NewString() }

// Session is one MCP session seen by Tollgate.
type Session struct {
	ID    string
	Local bool // minted by Tollgate, unknown to the upstream
	// source opened it (package source): when the table is full, idle sessions give way by
	// source (source.Victim), so one source opening session after session ends only its own.
	source string
	// identity opened it (the proxy's Identity: server.identity_header, or a verified caller);
	// "" binds it to no one. Set once at Adopt.
	identity string

	mu            sync.Mutex
	lastSeen      time.Time
	upstreamTasks map[string]struct{}
	streams       map[*Stream]struct{}
	protocol      string
	held          map[string]int64 // pending Tollgate tasks → end of their TTL (Unix nanoseconds)
	remembered    time.Time        // last written to the registry's Book (book.go)

	owner atomic.Pointer[string] // Owner, built once
}

// Owner is the task owner for callers without an authenticated subject. It is built once per
// session, so every request and every task of the session shares one string (a pending task
// keeps its owner: docs/PERFORMANCE.md "Memory per pending approval").
func (s *Session) Owner() string {
	if o := s.owner.Load(); o != nil {
		return *o
	}
	o := "session:" + s.ID
	s.owner.Store(&o) // a racing caller may store an equal string: harmless
	return o
}

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
	st, detach, _ := s.TryAttach(0)
	return st, detach
}

// TryAttach registers an open stream unless max (> 0) streams are open already
// (server.limits.max_streams_per_session); call the returned func when it closes.
func (s *Session) TryAttach(max int) (*Stream, func(), bool) {
	st := &Stream{C: make(chan []byte, 64)}
	s.mu.Lock()
	if max > 0 && len(s.streams) >= max {
		s.mu.Unlock()
		return nil, func() {}, false
	}
	if s.streams == nil {
		s.streams = map[*Stream]struct{}{}
	}
	s.streams[st] = struct{}{}
	s.mu.Unlock()
	return st, func() {
		s.mu.Lock()
		delete(s.streams, st)
		s.mu.Unlock()
	}, true
}

// maxHeld bounds the pending tasks remembered per session (the task quotas bound them first).
const maxHeld = 10000

// HoldTask records a pending Tollgate task of this session until its TTL ends: a session with
// pending tasks is never evicted to make room for a new one (their status notifications and
// results would be lost).
func (s *Session) HoldTask(id string, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		s.held = map[string]int64{}
	}
	if _, ok := s.held[id]; !ok && len(s.held) >= maxHeld {
		return
	}
	s.held[id] = until.UnixNano()
}

// ReleaseTask forgets a task that reached a terminal state.
func (s *Session) ReleaseTask(id string) {
	s.mu.Lock()
	delete(s.held, id)
	s.mu.Unlock()
}

// busy reports whether evicting the session would lose something: an open stream, or a
// pending task whose TTL has not ended (tasks finished elsewhere age out with their TTL).
func (s *Session) busy(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.streams) > 0 {
		return true
	}
	for id, until := range s.held {
		if now.UnixNano() < until {
			return true
		}
		delete(s.held, id)
	}
	return false
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

// Busy reports whether session id has an open stream or a pending task (what keeps it from
// eviction here); false for an unknown id.
func (r *Registry) Busy(id string) bool {
	s := r.Peek(id)
	return s != nil && s.busy(time.Now())
}

// Registry holds the known sessions, bounded: when full, the least recently seen idle session
// makes room; a busy one (open stream, pending task) never does, and a new session is refused
// instead. New sessions are admitted per source at a bounded rate.
type Registry struct {
	mu       sync.Mutex
	max      int
	m        map[string]*list.Element
	lru      *list.List // front = most recent
	onDel    func(*Session)
	reserved int // admitted, not yet adopted

	ended      map[string]struct{} // sessions the client ended (DELETE), bounded FIFO
	endedOrder []string

	rate    rate.Limit
	burst   int
	sources map[string]*rate.Limiter
	held    map[string]int // sessions tracked per source

	book       Book // nil = this process only (book.go)
	bookTTL    time.Duration
	sharedEnds bool // other processes write the book: EndedElsewhere reads it
	bookErr    func(op string, err error)
}

// NewRegistry returns a registry holding at most max sessions (default 10000). onDelete, if not
// nil, runs (outside the lock) for every session removed or evicted.
func NewRegistry(max int, onDelete func(*Session)) *Registry {
	if max <= 0 {
		max = 10000
	}
	return &Registry{max: max, m: map[string]*list.Element{}, lru: list.New(), onDel: onDelete, held: map[string]int{}}
}

// LimitSources bounds how fast one source may open sessions (server.limits.sessions_per_second
// and session_burst); perSecond <= 0 means no limit. Call it before use.
func (r *Registry) LimitSources(perSecond float64, burst int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if perSecond <= 0 {
		r.rate, r.sources = 0, nil
		return
	}
	r.rate, r.burst, r.sources = rate.Limit(perSecond), max(burst, 1), map[string]*rate.Limiter{}
}

// maxSources bounds the per-source limiters kept.
const maxSources = 10000

// ErrFull means no session can be added: every tracked session is busy.
var ErrFull = errors.New("session table full: every session has an open stream or a pending task")

// RateError means a source opened sessions faster than its limit.
type RateError struct{ RetryAfter time.Duration }

func (e *RateError) Error() string { return "too many new sessions from this source" }

// RetrySeconds is RetryAfter in whole seconds, at least 1 (for Retry-After and retry_after).
func (e *RateError) RetrySeconds() int { return max(1, int(math.Ceil(e.RetryAfter.Seconds()))) }

// Ticket is room for one new session, reserved by Admit.
type Ticket struct {
	r      *Registry
	source string
	done   bool
	// Identity is who opens the session: the session it adopts is bound to it (see
	// Session.Foreign). "" binds it to no one.
	Identity string
}

// Foreign reports whether a request made as identity may not use s: s was opened by a
// non-empty identity and identity is another one (compared exactly: a look-alike is another
// identity). A foreign request is answered as if the session did not exist.
func (s *Session) Foreign(identity string) bool {
	return s.identity != "" && s.identity != identity
}

// Admit takes one token from source's rate (an empty source is not limited) and reserves room
// for one new session. When the table is full an idle session gives way: the least recently
// seen one of the source holding the most, among source itself and the sources holding more
// than it (source.Victim), so a source never ends the sessions of one holding fewer. Adopt the
// session once the upstream (or Tollgate, for a session-less upstream) issued or confirmed it;
// Release the ticket otherwise.
func (r *Registry) Admit(source string) (*Ticket, error) {
	now := time.Now()
	r.mu.Lock()
	if r.sources != nil && source != "" {
		lim, ok := r.sources[source]
		if !ok {
			if len(r.sources) >= maxSources {
				for k := range r.sources { // drop an arbitrary source; it starts with a full bucket
					delete(r.sources, k)
					break
				}
			}
			lim = rate.NewLimiter(r.rate, r.burst)
			r.sources[source] = lim
		}
		res := lim.ReserveN(now, 1)
		if d := res.DelayFrom(now); d > 0 {
			res.CancelAt(now)
			r.mu.Unlock()
			return nil, &RateError{RetryAfter: d}
		}
	}
	var evicted *Session
	if r.lru.Len()+r.reserved >= r.max {
		evicted = r.evictIdle(now, source)
		if evicted == nil {
			r.mu.Unlock()
			return nil, ErrFull
		}
	}
	r.reserved++
	r.mu.Unlock()
	if evicted != nil && r.onDel != nil {
		r.onDel(evicted)
	}
	return &Ticket{r: r, source: source}, nil
}

// evictIdle removes the idle session source.Victim would choose for a new session of req —
// the least recently seen idle one of the source holding the most, among req and the sources
// holding more than req — walking from the least recently seen without collecting the
// candidates, and stopping at the first idle session of a source that holds as many as any
// source does (none can beat it). Busy sessions passed on the way move to the front so the
// next search does not walk them again. nil: no idle session may give way to req. Called with
// r.mu held.
func (r *Registry) evictIdle(now time.Time, req string) *Session {
	most := 0
	for _, n := range r.held {
		most = max(most, n)
	}
	var best *list.Element
	bestHeld := -1
	for e, n := r.lru.Back(), r.lru.Len(); e != nil && n > 0; n-- {
		prev := e.Prev()
		s := e.Value.(*Session)
		if s.busy(now) {
			r.lru.MoveToFront(e)
		} else if h := r.held[s.source]; (s.source == req || h > r.held[req]) && h > bestHeld {
			best, bestHeld = e, h
			if h == most {
				break
			}
		}
		e = prev
	}
	if best == nil {
		return nil
	}
	s := best.Value.(*Session)
	r.lru.Remove(best)
	r.dropLocked(s)
	return s
}

// dropLocked forgets s (removed from the LRU already) and its count. Called with r.mu held.
func (r *Registry) dropLocked(s *Session) {
	delete(r.m, s.ID)
	if r.held[s.source]--; r.held[s.source] <= 0 {
		delete(r.held, s.source)
	}
}

// Adopt records session id (or returns it when known already) and uses up the ticket. A new
// session is written to the registry's Book before Adopt returns, so another replica knows it
// once the client does.
func (t *Ticket) Adopt(id string) *Session {
	r := t.r
	r.mu.Lock()
	if !t.done {
		t.done = true
		r.reserved--
	}
	if e, ok := r.m[id]; ok {
		r.lru.MoveToFront(e)
		s := e.Value.(*Session)
		r.mu.Unlock()
		s.touch()
		return s
	}
	now := time.Now()
	s := &Session{ID: id, Local: len(id) > len(LocalPrefix) && id[:len(LocalPrefix)] == LocalPrefix, lastSeen: now, source: t.source, identity: t.Identity}
	r.m[id] = r.lru.PushFront(s)
	r.held[s.source]++
	delete(r.ended, id) // issued (again) just now; the FIFO order entry ages out by itself
	r.mu.Unlock()
	r.remember(s, now)
	return s
}

// Release gives the reserved room back unless Adopt used it; safe to call more than once.
func (t *Ticket) Release() {
	if t == nil {
		return
	}
	t.r.mu.Lock()
	if !t.done {
		t.done = true
		t.r.reserved--
	}
	t.r.mu.Unlock()
}

// Get returns the session with id, or nil. Only sessions adopted after Admit are known: an id
// a client made up names no session (REQ: forged Mcp-Session-Id values are not owners).
func (r *Registry) Get(id string) *Session {
	if id == "" {
		return nil
	}
	r.mu.Lock()
	e, ok := r.m[id]
	if !ok {
		r.mu.Unlock()
		return nil
	}
	r.lru.MoveToFront(e)
	s := e.Value.(*Session)
	r.mu.Unlock()
	now := time.Now()
	s.mu.Lock()
	s.lastSeen = now
	s.mu.Unlock()
	r.remember(s, now) // moves its book expiry on, at most once every half TTL
	return s
}

// GetAs is Get for a request made as identity. A session bound to another identity
// (Session.Foreign) is returned with foreign set and is not counted as seen: its owner's use
// alone keeps it alive.
func (r *Registry) GetAs(id, identity string) (s *Session, foreign bool) {
	if s = r.Peek(id); s == nil {
		return nil, false
	}
	if s.Foreign(identity) {
		return s, true
	}
	return r.Get(id), false
}

// Peek returns the session with id without counting it as seen, or nil.
func (r *Registry) Peek(id string) *Session {
	if id == "" {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.m[id]; ok {
		return e.Value.(*Session)
	}
	return nil
}

// Delete removes a session (DELETE /mcp succeeded, or the upstream answered 404 on it) and
// remembers that it ended, so a task approved later is not executed in it (upstreams do not
// all refuse ended sessions); the Book forgets it and records the end for the other replicas
// (EndedElsewhere), as by the identity the session is bound to.
func (r *Registry) Delete(id string) {
	var identity, source string
	held := r.Peek(id)
	if held != nil {
		identity, source = held.identity, held.source
	}
	r.End(id, identity, source, held != nil)
}

// End is Delete for a client's DELETE made as identity from source: the end is recorded for
// the other replicas when record is set (the session is held here, or the book knows it), so
// a replica still holding it answers 404 from then on — when it is bound to no one or to
// identity.
func (r *Registry) End(id, identity, source string, record bool) {
	s := r.drop(id)
	r.forget(id, identity) // ended: no replica may adopt it again
	if record {
		r.end(id, identity, source)
	}
	if s != nil && r.onDel != nil {
		r.onDel(s)
	}
}

// drop removes id from the table (returned if it was held) and marks it ended here.
func (r *Registry) drop(id string) *Session {
	r.mu.Lock()
	var s *Session
	if e, ok := r.m[id]; ok {
		s = e.Value.(*Session)
		r.lru.Remove(e)
		r.dropLocked(s)
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
	return s
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
