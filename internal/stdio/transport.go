// Package stdio runs an MCP server that speaks JSON-RPC over stdin/stdout (spec 2025-11-25
// basic/transports, "stdio") and presents it as a streamable HTTP endpoint through an
// http.RoundTripper, so upstream.Client — and everything above it — governs it exactly like
// an HTTP server: an initialize POST without a session starts a process and mints an
// Mcp-Session-Id; later POSTs of that session are written to its stdin; the answer comes back
// as application/json, or as text/event-stream when the process sends related messages first;
// a GET is the session's stream of the rest; DELETE stops the process; an unknown session is
// 404. With Share one process serves every session, request ids remapped so they cannot
// collide.
package stdio

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/source"
)

// Defaults (docs/configuration.md, sources[].max_processes and idle_timeout).
const (
	DefaultMaxProcesses    = 16
	DefaultIdleTimeout     = 10 * time.Minute
	DefaultMaxMessageBytes = 64 << 20
	DefaultStopGrace       = 2 * time.Second
	maxSharedSessions      = 4096
	sessionQueue           = 256 // messages waiting for a session's GET stream
	backoffMin             = 100 * time.Millisecond
	backoffMax             = 10 * time.Second
	healthyAfter           = 10 * time.Second // a process that lived this long resets the backoff
	maxBackoffSources      = 1024             // sources whose backoff is remembered
)

// backoff delays a source's next process after its processes died young.
type backoff struct {
	failures int       // consecutive processes that died young
	notUntil time.Time // no start before this
}

const headerSessionID = "Mcp-Session-Id"

// Options configure the transport.
type Options struct {
	Command string
	Args    []string
	Env     []string // the whole environment of the process ("NAME=value")
	Dir     string   // working directory ("" = Tollgate's)
	// Share runs one process for every session (a stateless server); else each session has
	// its own.
	Share bool
	// MaxProcesses bounds live processes; at the bound an initialize ends the least recently
	// used idle session, or is refused (HTTP 503 with -32000 UpstreamBusy) when all are busy.
	MaxProcesses int
	// IdleTimeout ends a session (and its process) with no request for this long.
	IdleTimeout time.Duration
	// Keep, if set, reports a session its client still needs although no request is in
	// flight — an open stream, a pending task whose approved call will run on the session's
	// process: neither IdleTimeout nor the MaxProcesses eviction ends it.
	Keep func(sessionID string) bool
	// OnEnd, if set, is told each session that ended (its process exited, idle_timeout,
	// eviction, DELETE), once, from the transport's goroutines: it must not block.
	OnEnd           func(sessionID string)
	MaxMessageBytes int           // longest stdout line; longer ones are skipped
	StopGrace       time.Duration // wait after closing stdin, and after SIGTERM
	Logger          *slog.Logger
	// RunAs, if set, is the user and group the processes run as (Tollgate must be root).
	RunAs *Credential
}

// Credential is a numeric user and group.
type Credential struct{ UID, GID uint32 }

// Transport is the http.RoundTripper in front of the processes.
type Transport struct {
	o   Options
	log *slog.Logger
	seq atomic.Uint64
	wg  sync.WaitGroup

	mu       sync.Mutex
	sessions map[string]*session
	live     int // processes started and not yet reaped
	closed   bool
	backoff  map[string]*backoff // by source ("": the shared process); bounded by maxBackoffSources

	shMu     sync.Mutex // serialises starting the shared process
	shared   *child
	sharedIn []byte          // the initialize that started it (replayed on restart)
	sharedOK json.RawMessage // its initialize result, answered to every later session

	stop      chan struct{}
	maxShared int    // sessions on the shared process at most (maxSharedSessions; tests lower it)
	onExit    func() // tests: called after a process ended and was accounted for
}

var _ http.RoundTripper = (*Transport)(nil)

// session is one Mcp-Session-Id the transport minted.
type session struct {
	id    string
	label string // short hash of id, for logs (ids themselves are never logged)
	src   string // the source that opened it (package source), for fair eviction
	c     *child
	get   chan []byte   // messages for the GET stream
	ended chan struct{} // closed when the session ends
	once  sync.Once

	mu        sync.Mutex
	lastUsed  time.Time
	inflight  int
	streaming bool // a GET stream is open
}

var protectOnce sync.Once

// New returns a transport; it starts nothing until the first initialize. Tollgate's own
// process is made undumpable first (protectSelf).
func New(o Options) *Transport {
	if o.MaxProcesses <= 0 {
		o.MaxProcesses = DefaultMaxProcesses
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if o.StopGrace <= 0 {
		o.StopGrace = DefaultStopGrace
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	protectOnce.Do(func() {
		if err := protectSelf(); err != nil {
			o.Logger.Warn("stdio: could not make Tollgate undumpable: a server running as its user may read its environment", "error", err.Error())
		}
	})
	t := &Transport{o: o, log: o.Logger, sessions: map[string]*session{}, backoff: map[string]*backoff{}, stop: make(chan struct{}), maxShared: maxSharedSessions}
	t.wg.Add(1)
	go t.reap()
	return t
}

// Close stops every process (stdin closed, then SIGTERM, then SIGKILL) and waits for them.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	close(t.stop)
	var ss []*session
	for _, s := range t.sessions {
		ss = append(ss, s)
	}
	t.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Add(1)
		go func() { defer wg.Done(); t.end(s, true) }()
	}
	t.shMu.Lock()
	if sh := t.shared; sh != nil {
		wg.Add(1)
		go func() { defer wg.Done(); sh.stop() }()
	}
	t.shMu.Unlock()
	wg.Wait()
	t.wg.Wait()
	return nil
}

// Processes is the number of live processes.
func (t *Transport) Processes() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.live
}

// RoundTrip serves one HTTP exchange of the streamable HTTP transport from the processes.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(io.LimitReader(req.Body, int64(t.o.MaxMessageBytes)+1))
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
	}
	sid := req.Header.Get(headerSessionID)
	switch req.Method {
	case http.MethodPost:
	case http.MethodGet:
		if sid == "" {
			return plain(req, http.StatusBadRequest, "Bad Request: a GET stream needs an Mcp-Session-Id"), nil
		}
		s := t.lookup(sid)
		if s == nil {
			return plain(req, http.StatusNotFound, "Session not found"), nil
		}
		return t.listen(req, s), nil
	case http.MethodDelete:
		s := t.lookup(sid)
		if s == nil {
			return plain(req, http.StatusNotFound, "Session not found"), nil
		}
		t.end(s, true) // the process is gone when DELETE answers
		return plain(req, http.StatusOK, ""), nil
	default:
		return plain(req, http.StatusMethodNotAllowed, "Method not allowed"), nil
	}
	if len(body) > t.o.MaxMessageBytes {
		return plain(req, http.StatusRequestEntityTooLarge, "Request body too large"), nil
	}
	m, err := jsonrpc.Parse(body)
	if err != nil {
		return jsonReply(req, http.StatusBadRequest, jsonrpc.ErrorResponse(json.RawMessage("null"),
			jsonrpc.NewError(jsonrpc.CodeParseError, "ParseError", "Not one JSON-RPC message"))), nil
	}
	if sid == "" {
		if m.Kind != jsonrpc.KindRequest || m.Method != "initialize" {
			return jsonReply(req, http.StatusBadRequest, jsonrpc.ErrorResponse(idOrNull(m.ID),
				jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "NoSession", "Bad Request: no session; send initialize first"))), nil
		}
		return t.initialize(req, m), nil
	}
	s := t.lookup(sid)
	if s == nil {
		return plain(req, http.StatusNotFound, "Session not found"), nil
	}
	s.touch()
	var c *child
	if t.o.Share {
		if c, err = t.sharedChild(req.Context(), nil); err != nil {
			return t.startFailed(req, m, err), nil
		}
	} else {
		c = s.c // set before the session was added, never changed
	}
	switch m.Kind {
	case jsonrpc.KindRequest:
		return t.request(req, s, c, m), nil
	case jsonrpc.KindResponse:
		if c.takeAsk(s, m.ID) {
			_ = c.write(req.Context(), m.Raw)
		}
	case jsonrpc.KindNotification:
		msg := m.Raw
		switch m.Method {
		case "notifications/initialized":
			if t.o.Share {
				msg = nil // the shared process was initialized once, by Tollgate
			}
		case "notifications/cancelled":
			// The request it names was written under another id.
			if wire := c.wireIDOf(s, jsonrpc.Member(m.Params, "requestId")); wire != nil {
				p, _ := jsonrpc.Replace(m.Params, "requestId", wire)
				msg, _ = jsonrpc.Replace(m.Raw, "params", p)
			} else {
				msg = nil
			}
		}
		if msg != nil {
			_ = c.write(req.Context(), msg)
		}
	}
	return plain(req, http.StatusAccepted, ""), nil
}

// initialize starts a session: its own process, or the shared one.
func (t *Transport) initialize(req *http.Request, m *jsonrpc.Message) *http.Response {
	sid := newSessionID()
	s := &session{id: sid, label: label(sid), src: source.FromContext(req.Context()), get: make(chan []byte, sessionQueue),
		ended: make(chan struct{}), lastUsed: time.Now()}
	if t.o.Share {
		c, err := t.sharedChild(req.Context(), m)
		if err != nil {
			return t.startFailed(req, m, err)
		}
		t.shMu.Lock()
		result := t.sharedOK
		t.shMu.Unlock()
		s.c = c // before add: sharedChild rewrites it under t.mu later
		if !t.add(s, true) {
			// Sessions on the shared process cost no process: the least recently used idle
			// one gives way, as a process does at max_processes.
			t.mu.Lock()
			victim := t.leastRecentIdle(s.src)
			t.mu.Unlock()
			if victim != nil {
				t.end(victim, false)
			}
			if victim == nil || !t.add(s, true) {
				return t.busy(req, m, "too many sessions on the shared process")
			}
		}
		c.mu.Lock()
		c.owners = append(c.owners, s)
		c.mu.Unlock()
		resp := jsonReply(req, http.StatusOK, okResponse(m.ID, result))
		resp.Header.Set(headerSessionID, sid)
		return resp
	}
	if err := t.reserve(req.Context(), s.src); err != nil {
		return t.startFailed(req, m, err)
	}
	c, err := t.spawn(s.label, s.src)
	if err != nil {
		t.release(true, 0, s.src)
		return t.startFailed(req, m, err)
	}
	s.c = c
	c.mu.Lock()
	c.owners = []*session{s}
	c.mu.Unlock()
	if !t.add(s, false) {
		go c.stop()
		return t.busy(req, m, "Tollgate is shutting down")
	}
	resp := t.request(req, s, c, m)
	if resp.StatusCode == http.StatusOK && resp.Header.Get("Content-Type") == "application/json" {
		if b, _ := resp.Body.(*bodyBytes); b != nil {
			if r, err := jsonrpc.Parse(b.b); err == nil && r.Error != nil {
				t.end(s, false) // no session for a refused initialize
				return resp
			}
		}
	}
	resp.Header.Set(headerSessionID, sid)
	return resp
}

// request writes m to c for session s and answers with what the process sends back.
func (t *Transport) request(req *http.Request, s *session, c *child, m *jsonrpc.Message) *http.Response {
	ctx := req.Context()
	cl, line, err := c.register(s, m)
	if err != nil {
		if !t.o.Share && m.Method != "initialize" { // the session ended with its process
			return plain(req, http.StatusNotFound, "Session not found")
		}
		return jsonReply(req, http.StatusOK, jsonrpc.ErrorResponse(m.ID, err.(*jsonrpc.Error)))
	}
	if err := c.write(ctx, line); err != nil {
		c.unregister(cl)
		select {
		case <-c.done:
			return jsonReply(req, http.StatusOK, jsonrpc.ErrorResponse(m.ID, c.exitError()))
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
		return jsonReply(req, http.StatusOK, jsonrpc.ErrorResponse(m.ID, jsonrpc.NewError(jsonrpc.CodeUpstreamUnreachable,
			"UpstreamUnreachable", "Upstream stdio server does not read its input: "+err.Error())))
	}
	s.begin()
	select {
	case r := <-cl.reply:
		if len(cl.msgs) == 0 {
			s.finish()
			return jsonReply(req, http.StatusOK, r)
		}
		cl.reply <- r // related messages came first: stream them, then the reply
		return t.stream(req, s, c, cl, nil)
	case first := <-cl.msgs:
		return t.stream(req, s, c, cl, first)
	case <-ctx.Done():
		c.unregister(cl)
		s.finish()
		return jsonReply(req, http.StatusOK, jsonrpc.ErrorResponse(m.ID, jsonrpc.NewError(jsonrpc.CodeUpstreamTimeout,
			"UpstreamTimeout", "Upstream stdio server did not answer in time")))
	}
}

// stream answers a request as an event stream: its related messages, then its reply.
func (t *Transport) stream(req *http.Request, s *session, c *child, cl *call, first []byte) *http.Response {
	pr, pw, release := t.pipe(req.Context())
	ctx := req.Context()
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer release()
		defer s.finish()
		defer c.unregister(cl)
		if first != nil && !writeEvent(pw, first) {
			return
		}
		for {
			select {
			case msg := <-cl.msgs:
				if !writeEvent(pw, msg) {
					return
				}
			case r := <-cl.reply:
				for len(cl.msgs) > 0 {
					if !writeEvent(pw, <-cl.msgs) {
						return
					}
				}
				writeEvent(pw, r)
				pw.Close()
				return
			case <-ctx.Done():
				pw.CloseWithError(ctx.Err())
				return
			}
		}
	}()
	return eventStream(req, pr)
}

// listen is a session's GET stream: the process's messages that belong to no request.
func (t *Transport) listen(req *http.Request, s *session) *http.Response {
	s.mu.Lock()
	if s.streaming {
		s.mu.Unlock()
		return plain(req, http.StatusConflict, "Conflict: the session already has a GET stream")
	}
	s.streaming = true
	s.mu.Unlock()
	pr, pw, release := t.pipe(req.Context())
	ctx := req.Context()
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer release()
		defer func() {
			s.mu.Lock()
			s.streaming = false
			s.mu.Unlock()
		}()
		for {
			select {
			case msg := <-s.get:
				if !writeEvent(pw, msg) {
					return
				}
			case <-s.ended:
				pw.Close()
				return
			case <-ctx.Done():
				pw.CloseWithError(ctx.Err())
				return
			}
		}
	}()
	return eventStream(req, pr)
}

// pipe is a response body's pipe whose writer is closed when ctx ends or the transport
// closes: a write blocked on a reader that stopped reading is released then. release ends
// the watch once the writer is done.
func (t *Transport) pipe(ctx context.Context) (*io.PipeReader, *io.PipeWriter, func()) {
	pr, pw := io.Pipe()
	stopCtx := context.AfterFunc(ctx, func() { pw.CloseWithError(ctx.Err()) })
	done := make(chan struct{})
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		select {
		case <-t.stop:
			pw.CloseWithError(errClosed)
		case <-done:
		}
	}()
	return pr, pw, func() { stopCtx(); close(done) }
}

var errClosed = errors.New("stdio transport closed")

func writeEvent(w io.Writer, msg []byte) bool {
	buf := make([]byte, 0, len(msg)+24)
	buf = append(buf, "event: message\ndata: "...)
	buf = append(buf, msg...)
	buf = append(buf, "\n\n"...)
	_, err := w.Write(buf)
	return err == nil
}

// sharedChild is the shared process, started (after the backoff) and initialized when
// needed: with init — the first session's initialize — or the one that started it before.
func (t *Transport) sharedChild(ctx context.Context, init *jsonrpc.Message) (*child, error) {
	t.shMu.Lock()
	defer t.shMu.Unlock()
	if c := t.shared; c != nil && c.exitedWith() == "" {
		return c, nil
	}
	body := t.sharedIn
	if body == nil {
		if init == nil {
			return nil, errors.New("the shared process was never initialized")
		}
		body = bytes.Clone(init.Raw)
	}
	// The shared process belongs to no source (under share, reserve never evicts for it).
	if err := t.reserve(ctx, ""); err != nil {
		return nil, err
	}
	c, err := t.spawn("shared", "")
	if err != nil {
		t.release(true, 0, "")
		return nil, err
	}
	m, _ := jsonrpc.Parse(body)
	cl, line, err := c.register(nil, m)
	if err == nil {
		err = c.write(ctx, line)
	}
	var reply []byte
	if err == nil {
		select {
		case reply = <-cl.reply:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	var r *jsonrpc.Message
	if err == nil {
		if r, err = jsonrpc.Parse(reply); err == nil && r.Error != nil {
			err = fmt.Errorf("the server refused initialize: %s", r.Error)
		}
	}
	if err != nil {
		go c.stop()
		return nil, err
	}
	_ = c.write(ctx, jsonrpc.Notification("notifications/initialized", nil))
	// Sessions that outlived the old process now live on the new one.
	t.mu.Lock()
	var owners []*session
	for _, s := range t.sessions {
		s.c = c
		owners = append(owners, s)
	}
	t.mu.Unlock()
	c.mu.Lock()
	c.owners = owners
	c.mu.Unlock()
	t.shared, t.sharedIn, t.sharedOK = c, body, bytes.Clone(r.Result)
	return c, nil
}

// reserve counts a process about to start for source src, delayed by src's backoff after its
// processes died young (another source's crashing processes delay only that source). At MaxProcesses the least recently used session with no request in flight is ended
// to make room (its client gets 404 and starts over, as after idle_timeout; clients that never
// send DELETE would otherwise hold every process); when every process is busy the start is
// refused.
func (t *Transport) reserve(ctx context.Context, src string) error {
	var wait time.Duration
	for attempt := 0; ; attempt++ {
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			return &refusal{"Tollgate is shutting down"}
		}
		if t.live < t.o.MaxProcesses {
			t.live++
			wait = t.startDelay(src)
			t.mu.Unlock()
			break
		}
		var victim *session
		if !t.o.Share {
			victim = t.leastRecentIdle(src)
		}
		t.mu.Unlock()
		if victim == nil || attempt >= 3 {
			return &refusal{"every stdio server process is busy (sources[0].max_processes = " + strconv.Itoa(t.o.MaxProcesses) + ")"}
		}
		t.log.Info("stdio: max_processes reached; ending the least recently used session its source may take", "session", victim.label,
			"busy", victim.idleFor() == 0, "max_processes", t.o.MaxProcesses)
		t.end(victim, true)
	}
	if wait > 0 {
		tm := time.NewTimer(wait)
		defer tm.Stop()
		select {
		case <-tm.C:
		case <-ctx.Done():
			t.release(false, 0, src)
			return ctx.Err()
		}
	}
	return nil
}

// leastRecentIdle is the session with no request in flight used longest ago that may give way
// to a new session of source src (nil: none): src's own, or one of a source holding more
// sessions than src (source.Victim), so a source that opens many sessions ends its own idle
// ones rather than other sources'. A session Keep holds (a pending task, an open stream) gives
// way only when no other may, and only to a source holding at least two fewer sessions than
// its own: keeping cannot let one source hold every process. When every process is busy,
// a process is in-flight capacity, shared by source the same way (unless sharing one
// process): the busy session of such a source used longest ago gives way, its requests failing
// with UpstreamExited, so one source's calls that never answer cannot lock every other source
// out. t.mu held.
func (t *Transport) leastRecentIdle(src string) *session {
	type cand struct {
		s    *session
		last time.Time
	}
	held := make(map[string]int, 4)
	var idle, kept, busy []cand
	for _, s := range t.sessions {
		held[s.src]++
		s.mu.Lock()
		c := cand{s, s.lastUsed}
		free := s.inflight == 0
		s.mu.Unlock()
		switch {
		case !free:
			busy = append(busy, c)
		case t.kept(s):
			kept = append(kept, c)
		default:
			idle = append(idle, c)
		}
	}
	pick := func(cs []cand, may func(string) bool) *session {
		slices.SortFunc(cs, func(a, b cand) int { return a.last.Compare(b.last) })
		var srcs []string
		var ok []cand
		for _, c := range cs {
			if may(c.s.src) {
				srcs, ok = append(srcs, c.s.src), append(ok, c)
			}
		}
		if i := source.Victim(src, srcs, held); i >= 0 {
			return ok[i].s
		}
		return nil
	}
	if v := pick(idle, func(string) bool { return true }); v != nil {
		return v
	}
	fewer := func(s string) bool { return s != src && held[s] >= held[src]+2 }
	if v := pick(kept, fewer); v != nil || t.o.Share {
		return v
	}
	return pick(busy, fewer)
}

// release uncounts a process of source src; one that died young (not asked to stop) lengthens
// src's backoff, one that lived past healthyAfter ends it. t.mu is taken.
func (t *Transport) release(died bool, lived time.Duration, src string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.live--
	switch {
	case died && lived < healthyAfter:
		b := t.backoff[src]
		if b == nil {
			if len(t.backoff) >= maxBackoffSources {
				now := time.Now()
				for k, o := range t.backoff { // forget those whose delay has passed
					if o.notUntil.Before(now) {
						delete(t.backoff, k)
					}
				}
			}
			if len(t.backoff) >= maxBackoffSources {
				src = "" // still full: such sources share one backoff
				b = t.backoff[src]
			}
			if b == nil {
				b = &backoff{}
				t.backoff[src] = b
			}
		}
		b.failures++
		d := backoffMin << min(b.failures-1, 10)
		b.notUntil = time.Now().Add(min(d, backoffMax))
	case died || lived >= healthyAfter:
		delete(t.backoff, src)
	}
}

// startDelay is how long src's next process waits (its backoff). t.mu held.
func (t *Transport) startDelay(src string) time.Duration {
	if b := t.backoff[src]; b != nil {
		return time.Until(b.notUntil)
	}
	return 0
}

// exited is the end of a process: its sessions end with it (a new process would not have
// their state: later requests get 404 and the client starts over), except on the shared
// process, which the next request restarts.
func (t *Transport) exited(c *child, asked bool, lived time.Duration) {
	t.release(!asked, lived, c.src)
	if !t.o.Share {
		c.mu.Lock()
		owners := c.owners
		c.mu.Unlock()
		for _, s := range owners {
			t.drop(s)
		}
	}
}

// add records a new session; false when closed or (shared) at the bound.
func (t *Transport) add(s *session, shared bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || (shared && len(t.sessions) >= t.maxShared) {
		return false
	}
	t.sessions[s.id] = s
	return true
}

// Has reports whether session sid is live: minted by this transport and not ended. Without
// Share a session ends with its process (exit, crash, kill, idle_timeout, eviction), and a
// restarted process never has it again: a pending call made on it can no longer run
// (tasks.UnrunnableStdioExited). Cheap: one map lookup.
func (t *Transport) Has(sid string) bool { return t.lookup(sid) != nil }

// Shared reports whether one process serves every session (Options.Share): its sessions
// outlive a restart of that process.
func (t *Transport) Shared() bool { return t.o.Share }

func (t *Transport) lookup(sid string) *session {
	if sid == "" {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sessions[sid]
}

// drop forgets a session and ends its GET stream.
func (t *Transport) drop(s *session) {
	t.mu.Lock()
	if t.sessions[s.id] == s {
		delete(t.sessions, s.id)
	}
	t.mu.Unlock()
	s.once.Do(func() {
		close(s.ended)
		if t.o.OnEnd != nil {
			t.o.OnEnd(s.id)
		}
	})
}

// end ends a session: its own process is stopped (wait = until reaped); on the shared
// process the session is only forgotten.
func (t *Transport) end(s *session, wait bool) {
	t.drop(s)
	if t.o.Share {
		t.mu.Lock()
		c := s.c
		t.mu.Unlock()
		if c != nil {
			c.mu.Lock()
			for i, o := range c.owners {
				if o == s {
					c.owners = append(c.owners[:i:i], c.owners[i+1:]...)
					break
				}
			}
			c.mu.Unlock()
		}
		return
	}
	if wait {
		s.c.stop()
		return
	}
	t.wg.Add(1)
	go func() { defer t.wg.Done(); s.c.stop() }()
}

// reap ends sessions idle for IdleTimeout (no request in flight, none for that long).
func (t *Transport) reap() {
	defer t.wg.Done()
	every := min(t.o.IdleTimeout/4, 30*time.Second)
	tk := time.NewTicker(max(every, 10*time.Millisecond))
	defer tk.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tk.C:
		}
		t.mu.Lock()
		var idle []*session
		for _, s := range t.sessions {
			if s.idleFor() >= t.o.IdleTimeout && !t.kept(s) {
				idle = append(idle, s)
			}
		}
		t.mu.Unlock()
		for _, s := range idle {
			t.log.Info("stdio session idle; ending it", "session", s.label, "idle_timeout", t.o.IdleTimeout.String())
			t.end(s, false)
		}
	}
}

// kept reports whether Options.Keep holds s.
func (t *Transport) kept(s *session) bool { return t.o.Keep != nil && t.o.Keep(s.id) }

func (s *session) touch() {
	s.mu.Lock()
	s.lastUsed = time.Now()
	s.mu.Unlock()
}

func (s *session) begin() {
	s.mu.Lock()
	s.inflight++
	s.mu.Unlock()
}

func (s *session) finish() {
	s.mu.Lock()
	s.inflight--
	s.lastUsed = time.Now()
	s.mu.Unlock()
}

// listening reports whether the session's GET stream is open.
func (s *session) listening() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.streaming
}

func (s *session) idleFor() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight > 0 {
		return 0
	}
	return time.Since(s.lastUsed)
}

// push queues msg for the GET stream; false when the queue is full or the session ended.
func (s *session) push(msg []byte) bool {
	select {
	case <-s.ended:
		return false
	default:
	}
	select {
	case s.get <- msg:
		return true
	default:
		return false
	}
}

// refusal is a start the transport declined (bound reached, shutting down).
type refusal struct{ why string }

func (r *refusal) Error() string { return r.why }

func (r *refusal) resp(req *http.Request) *http.Response {
	return jsonReply(req, http.StatusServiceUnavailable, jsonrpc.ErrorResponse(json.RawMessage("null"),
		jsonrpc.NewError(jsonrpc.CodeUpstreamUnreachable, "UpstreamBusy", "Upstream stdio server: "+r.why)))
}

func (t *Transport) busy(req *http.Request, m *jsonrpc.Message, why string) *http.Response {
	return jsonReply(req, http.StatusServiceUnavailable, jsonrpc.ErrorResponse(m.ID,
		jsonrpc.NewError(jsonrpc.CodeUpstreamUnreachable, "UpstreamBusy", "Upstream stdio server: "+why)))
}

// startFailed answers a request whose process could not be started.
func (t *Transport) startFailed(req *http.Request, m *jsonrpc.Message, err error) *http.Response {
	var r *refusal
	if errors.As(err, &r) {
		return t.busy(req, m, r.why)
	}
	t.log.Warn("stdio server could not be started", "command", t.o.Command, "error", err.Error())
	return jsonReply(req, http.StatusOK, jsonrpc.ErrorResponse(idOrNull(m.ID), jsonrpc.NewError(jsonrpc.CodeUpstreamUnreachable,
		"UpstreamUnreachable", "Upstream stdio server could not be started: "+err.Error())))
}

func okResponse(id, result json.RawMessage) []byte {
	b := []byte(`{"jsonrpc":"2.0","id":`)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	return append(b, '}')
}

func idOrNull(id json.RawMessage) json.RawMessage {
	if id == nil {
		return json.RawMessage("null")
	}
	return id
}

func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// label names a session in logs without its id (a bearer of the session).
func label(sid string) string {
	sum := sha256.Sum256([]byte(sid))
	return hex.EncodeToString(sum[:4])
}

// bodyBytes is a response body read from memory (initialize inspects it).
type bodyBytes struct {
	*bytes.Reader
	b []byte
}

func (bodyBytes) Close() error { return nil }

func response(req *http.Request, status int, ctype string, body io.ReadCloser, n int64) *http.Response {
	h := http.Header{}
	if ctype != "" {
		h.Set("Content-Type", ctype)
	}
	return &http.Response{
		Status: strconv.Itoa(status) + " " + http.StatusText(status), StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: body, ContentLength: n, Request: req,
	}
}

func jsonReply(req *http.Request, status int, b []byte) *http.Response {
	return response(req, status, "application/json", &bodyBytes{bytes.NewReader(b), b}, int64(len(b)))
}

func plain(req *http.Request, status int, text string) *http.Response {
	ct := ""
	if text != "" {
		ct = "text/plain; charset=utf-8"
	}
	return response(req, status, ct, &bodyBytes{bytes.NewReader([]byte(text)), []byte(text)}, int64(len(text)))
}

func eventStream(req *http.Request, body io.ReadCloser) *http.Response {
	r := response(req, http.StatusOK, "text/event-stream", body, -1)
	r.Header.Set("Cache-Control", "no-cache")
	return r
}
