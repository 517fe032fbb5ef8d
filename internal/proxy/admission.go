package proxy

import (
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/session"
	"github.com/tollgate-mcp/tollgate/internal/source"
)

// Limit names passed to Observer.Limited (the label of tollgate_limit_refusals_total).
const (
	LimitBodyBytes      = "body_bytes"
	LimitSourceBytes    = "source_body_bytes"
	LimitStreams        = "streams"
	LimitSessionStreams = "session_streams"
	LimitSourceStreams  = "source_streams"
	LimitSessions       = "sessions"
	LimitSessionRate    = "session_rate"
	LimitUnknownSession = "unknown_session"
	LimitForeignSession = "foreign_session"
)

// resolveSession maps the client's Mcp-Session-Id to a session Tollgate knows: one this process
// holds, else one some Tollgate saw created (the upstream's initialize reply passed through it,
// or it minted the id itself) as the task store's known-session set says — after a restart, or
// on another replica. Nothing else: not an id the upstream merely answers a ping on (mcp-go
// answers on any well-formed id). Every other id is answered with HTTP 404, which tells the
// client to initialize again (spec 2025-11-25 transports, session management); a made-up id
// never becomes a task owner. False means the answer was written.
//
// A session is bound to the identity that opened it (Options.Identity; none when that was
// empty): another identity holding its id gets the same 404, on GET, POST and DELETE alike.
//
// A session held here that another replica sharing the store ended since (DELETE, or the
// upstream's 404 there) gets the same 404 (Registry.EndedElsewhere: one store read per
// request on a held session; while the store cannot answer, the held session keeps working).
func (h *Handler) resolveSession(w http.ResponseWriter, r *http.Request, sid, corr string) (*session.Session, bool) {
	if s := h.o.Sessions.Peek(sid); s != nil {
		if s.Foreign(h.identity(r)) {
			h.foreignSession(w, corr)
			return nil, false
		}
		if ended, _ := h.o.Sessions.EndedElsewhere(r.Context(), s); ended {
			h.unknownSession(w, corr)
			return nil, false
		}
		if s = h.o.Sessions.Get(sid); s != nil { // else evicted meanwhile: asked below as any other
			return s, true
		}
	}
	if h.o.Sessions.Ended(sid) { // ended sessions stay ended
		h.unknownSession(w, corr)
		return nil, false
	}
	// The lookup comes before admission: a made-up id takes no rate token and evicts nothing.
	known, err := h.o.Sessions.Known(r.Context(), sid, h.identity(r))
	if err != nil {
		if r.Context().Err() == nil {
			h.log.Warn("the task store could not say whether a session is known", "correlation_id", corr, "error", err.Error())
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusServiceUnavailable, jsonrpc.ErrorResponse(nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "SessionCheckFailed",
				"Tollgate could not check the MCP session in its task store; retry shortly", "correlation_id", corr)))
		}
		return nil, false
	}
	if !known {
		h.unknownSession(w, corr)
		return nil, false
	}
	ticket, ok := h.admit(w, r, corr)
	if !ok {
		return nil, false
	}
	defer ticket.Release()
	// Known from the task store, not held here (a restart, another replica, evicted), for this
	// identity: the store keeps each session under its id and the identity that opened it, so
	// it is bound to that identity here too (an entry written bound to no one — a session
	// opened without an identity, or before bindings were stored — binds the first identity to
	// use it here).
	return ticket.Adopt(sid), true
}

// foreignSession answers a request on a session another identity opened: the 404 of an
// unknown session (nothing tells the id exists), counted apart.
func (h *Handler) foreignSession(w http.ResponseWriter, corr string) {
	h.limited(LimitForeignSession)
	writeJSON(w, http.StatusNotFound, jsonrpc.ErrorResponse(nil, jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "SessionNotFound",
		"Unknown or ended MCP session; send initialize without Mcp-Session-Id to start a new one",
		"correlation_id", corr)))
}

func (h *Handler) unknownSession(w http.ResponseWriter, corr string) {
	h.limited(LimitUnknownSession)
	writeJSON(w, http.StatusNotFound, jsonrpc.ErrorResponse(nil, jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "SessionNotFound",
		"Unknown or ended MCP session; send initialize without Mcp-Session-Id to start a new one",
		"correlation_id", corr)))
}

// admit reserves room for one new session for the request's source; false means the refusal
// was written (HTTP 429 for the rate, 503 when every session is busy).
func (h *Handler) admit(w http.ResponseWriter, r *http.Request, corr string) (*session.Ticket, bool) {
	t, err := h.o.Sessions.Admit(h.source(r))
	if err == nil {
		t.Identity = h.identity(r) // the session it adopts is bound to its opener
		return t, true
	}
	var re *session.RateError
	if errors.As(err, &re) {
		h.limited(LimitSessionRate)
		w.Header().Set("Retry-After", strconv.Itoa(re.RetrySeconds()))
		writeJSON(w, http.StatusTooManyRequests, jsonrpc.ErrorResponse(nil, jsonrpc.NewError(jsonrpc.CodeRateLimited, "SessionRateLimited",
			"Too many new sessions from this client; retry later (server.limits.sessions_per_second)",
			"retry_after", re.RetrySeconds(), "correlation_id", corr)))
		return nil, false
	}
	h.limited(LimitSessions)
	w.Header().Set("Retry-After", "5")
	writeJSON(w, http.StatusServiceUnavailable, jsonrpc.ErrorResponse(nil, jsonrpc.NewError(jsonrpc.CodeCapacityExceeded, "SessionLimit",
		"Tollgate tracks as many sessions as it may and each has an open stream or a pending task (server.limits.max_sessions); retry later",
		"correlation_id", corr)))
	return nil, false
}

// source names who opens a session, for its rate (package source: the identity when
// server.identity_header is set and present, else the remote IP or IPv6 /64).
func (h *Handler) source(r *http.Request) string {
	return source.Of(r, h.identity(r))
}

// identity is the caller identity Options.Identity returns ("" without one).
func (h *Handler) identity(r *http.Request) string {
	if h.o.Identity == nil {
		return ""
	}
	return h.o.Identity(r)
}

// sessionEnded forgets a session the upstream answered 404 for: spec 2025-11-25 transports,
// a server that ended a session answers 404 to requests on it. Tollgate then answers 404 too,
// and creates no task in it.
func (h *Handler) sessionEnded(sess *session.Session, status int) {
	if sess != nil && !sess.Local && status == http.StatusNotFound {
		h.o.Sessions.Delete(sess.ID)
	}
}

func (h *Handler) limited(limit string) {
	if h.o.Observer != nil {
		h.o.Observer.Limited(limit)
	}
}

var (
	errTooLarge = errors.New("request body too large")
	errBusy     = errors.New("request body budget exhausted")
)

// bodyChunk is how much of a body without Content-Length is taken from the budget at a time.
const bodyChunk = 32 << 10

// readBody reads the request body within limit, taking its bytes from the budget before
// reading them (server.limits.max_inflight_body_bytes and the source's share of it): a body of known length takes all of
// it at once and is read into one buffer; a chunked body takes budget as it grows. It returns
// the bytes taken, to Release when the request ends, also on error.
func readBody(r io.Reader, length, limit int64, b interface{ TryAcquire(int64) bool }) ([]byte, int64, error) {
	if length > limit {
		return nil, 0, errTooLarge
	}
	if length >= 0 {
		if !b.TryAcquire(length) {
			return nil, 0, errBusy
		}
		buf := make([]byte, length)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, length, err
		}
		return buf, length, nil
	}
	var buf []byte
	var taken int64
	for {
		if len(buf) == cap(buf) {
			grow := min(max(int64(cap(buf)), bodyChunk), limit+1-int64(len(buf)))
			if grow <= 0 {
				return nil, taken, errTooLarge
			}
			if !b.TryAcquire(grow) {
				return nil, taken, errBusy
			}
			taken += grow
			buf = slices.Grow(buf, int(grow))
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, taken, errTooLarge
		}
		if err == io.EOF {
			return buf, taken, nil
		}
		if err != nil {
			return nil, taken, err
		}
	}
}

// streamSlots counts open GET streams against server.limits.max_streams, and each source's
// against max_streams_per_source: a source opening session after session (each with its
// per-session share) cannot take every stream.
type streamSlots struct {
	max       int64
	open      atomic.Int64
	perSource int
	mu        sync.Mutex
	bySource  map[string]int
}

// acquire takes a slot for src; "" when one is refused: LimitStreams (the total) or
// LimitSourceStreams (src's share).
func (s *streamSlots) acquire(src string) (refused string) {
	if s.perSource > 0 {
		s.mu.Lock()
		if s.bySource[src] >= s.perSource {
			s.mu.Unlock()
			return LimitSourceStreams
		}
		if s.bySource == nil {
			s.bySource = map[string]int{}
		}
		s.bySource[src]++
		s.mu.Unlock()
	}
	if s.max > 0 && s.open.Add(1) > s.max {
		s.open.Add(-1)
		s.releaseSource(src)
		return LimitStreams
	}
	return ""
}

func (s *streamSlots) release(src string) {
	if s.max > 0 {
		s.open.Add(-1)
	}
	s.releaseSource(src)
}

func (s *streamSlots) releaseSource(src string) {
	if s.perSource <= 0 {
		return
	}
	s.mu.Lock()
	if s.bySource[src]--; s.bySource[src] <= 0 {
		delete(s.bySource, src)
	}
	s.mu.Unlock()
}

// heldBy returns how many streams src holds (tests).
func (s *streamSlots) heldBy(src string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bySource[src]
}

// tooManyStreams refuses a GET stream (HTTP 429).
func (h *Handler) tooManyStreams(w http.ResponseWriter, limit, setting string) {
	h.limited(limit)
	w.Header().Set("Retry-After", "5")
	http.Error(w, "too many open streams ("+setting+")", http.StatusTooManyRequests)
}
