package upstream

import (
	"container/list"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/logcap"
	"github.com/tollgate-mcp/tollgate/internal/source"
)

// Pool holds legacy upstream sessions Tollgate opens on its callers' behalf (the bridge for
// 2026-07-28 callers in front of a legacy-only upstream), keyed by an owner string. A legacy
// server keeps state per session — a tool may remember what an earlier call stored — so the
// session is the unit of isolation: each owner gets its own, and the empty owner (an
// anonymous caller) gets one of its own per Acquire, ended with its last Release (docs/eras.md
// "legacy-only upstream"; CONVENTIONS 10: every piece of state has an owner and a bound). Who
// an owner is stays the caller's business: the pool only compares the strings.
type Pool struct {
	open         func(ctx context.Context, hdr http.Header) (*Session, error) // handshake
	end          func(*Session)                                               // DELETE
	listen       func(ctx context.Context, hdr http.Header) (*Stream, error)  // GET stream
	answer       func(hdr http.Header, msg []byte)                            // to a server→client request
	refusal      func(method string) *jsonrpc.Error
	log          *slog.Logger
	max          int
	idle         time.Duration
	listenWithin time.Duration
	endingAtOnce int
	full         *logcap.Sampler

	mu     sync.Mutex
	m      map[string]*PooledSession
	lru    list.List // front: most recently used
	closed bool
	wg     sync.WaitGroup // sessions being ended, GET streams being read
}

// PoolOptions configure a Pool; Open and Answer are required, zero limits take the defaults.
type PoolOptions struct {
	// Open opens a session (the handshake) with the first caller's end-to-end headers.
	Open func(ctx context.Context, hdr http.Header) (*Session, error)
	// Answer posts a JSON-RPC response to one of the upstream's server→client requests that
	// the pool answers itself (pings, refusals) with the headers given.
	Answer func(hdr http.Header, msg []byte)
	// Refusal is the error a server→client request gets when the call it came with cannot
	// ask anyone, or no call is in flight (default: a NotBridged error naming the method).
	Refusal func(method string) *jsonrpc.Error
	Log     *slog.Logger
	// MaxSessions bounds the owners' sessions held at once (default 1000); the least
	// recently used idle one makes room.
	MaxSessions int
	// IdleAfter is how long an owner's session is kept without a request on it before it is
	// ended with a DELETE (default 5m).
	IdleAfter time.Duration
	// ListenWithin bounds the wait for the upstream's answer to the GET that opens a
	// session's stream (default 5s).
	ListenWithin time.Duration
	// EndingAtOnce bounds the DELETEs Close sends in parallel (default 8).
	EndingAtOnce int
}

const (
	defaultPoolSessions = 1000
	defaultPoolIdle     = 5 * time.Minute
	defaultListenWithin = 5 * time.Second
	defaultEndingAtOnce = 8
	// A full pool's warning is let through 10 times at once, then once a second (the
	// Gateway's own warnings' rate).
	poolWarnEvery = time.Second
	poolWarnBurst = 10
)

// NewPool returns an empty Pool of sessions with c's upstream; it opens nothing until the
// first Acquire. Close ends its sessions.
func NewPool(c *Client, o PoolOptions) *Pool { return newPool(c.EndSession, c.Listen, o) }

func newPool(end func(*Session), listen func(context.Context, http.Header) (*Stream, error), o PoolOptions) *Pool {
	if o.Open == nil || o.Answer == nil {
		panic("upstream.NewPool: Open and Answer are required")
	}
	p := &Pool{
		open: o.Open, end: end, listen: listen, answer: o.Answer, refusal: o.Refusal,
		log: o.Log, max: o.MaxSessions, idle: o.IdleAfter, listenWithin: o.ListenWithin,
		endingAtOnce: o.EndingAtOnce, full: logcap.NewSampler(poolWarnEvery, poolWarnBurst),
		m: map[string]*PooledSession{},
	}
	if p.refusal == nil {
		p.refusal = func(method string) *jsonrpc.Error {
			return jsonrpc.NewError(jsonrpc.CodeMethodNotFound, "NotBridged", "Tollgate has no caller to relay "+method+" to")
		}
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.max <= 0 {
		p.max = defaultPoolSessions
	}
	if p.idle <= 0 {
		p.idle = defaultPoolIdle
	}
	if p.listenWithin <= 0 {
		p.listenWithin = defaultListenWithin
	}
	if p.endingAtOnce <= 0 {
		p.endingAtOnce = defaultEndingAtOnce
	}
	return p
}

// PooledSession is one upstream session of a Pool, shared by its owner's calls.
type PooledSession struct {
	owner string        // "" = one request's own session, never pooled
	src   string        // the source that opened it (package source), for fair eviction
	ready chan struct{} // closed once sess or err is set
	sess  *Session
	err   error

	// The rest is guarded by Pool.mu.
	users     int                    // calls using the session now
	calls     map[*poolCall]struct{} // the calls among them, for the GET stream's requests
	elem      *list.Element          // place in the LRU list while pooled
	idle      *time.Timer            // ends an idle owner's session
	idleGen   int                    // which arming of idle is current
	gone      bool                   // out of the pool: ended when its last user leaves
	listening bool                   // the GET stream is open (or opening)
	stop      context.CancelFunc     // ends the GET stream
}

// Session is the upstream session (set for every PooledSession Acquire returned).
func (ps *PooledSession) Session() *Session { return ps.sess }

// Asker takes one of the upstream's server→client requests for a call, with the headers to
// answer it with; answered is called once the upstream has its answer (or refusal).
type Asker func(hdr http.Header, m *jsonrpc.Message, answered func())

// poolCall is one call on a PooledSession; ask takes the upstream's server→client requests
// meant for it (nil: the call cannot ask anyone).
type poolCall struct {
	ask Asker
}

// ErrPoolClosed is Acquire's error once Close has begun.
var ErrPoolClosed = errors.New("Tollgate is shutting down")

// Acquire returns owner's session, opening it if needed (hdr: the caller's end-to-end
// headers, which an opened session keeps). Every Acquire that succeeds is paired with a
// Release.
func (p *Pool) Acquire(ctx context.Context, owner string, hdr http.Header) (*PooledSession, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrPoolClosed
	}
	ps := p.m[owner]
	if owner == "" || ps == nil {
		ps = &PooledSession{owner: owner, src: source.FromContext(ctx), ready: make(chan struct{}), calls: map[*poolCall]struct{}{}, gone: owner == ""}
		if owner != "" && !p.makeRoom(ps.src) {
			// No held session may give way (each has a call in flight, or belongs to a source
			// holding fewer): this request gets a session of its own rather than an error (its
			// owner's state is not there this once).
			ps.gone = true
			if ok, held := p.full.Allow(); ok {
				p.log.Warn("bridged upstream sessions full (all in use, or held by sources holding fewer); a request gets a session of its own",
					"limit", p.max, "suppressed", held)
			}
		}
		if !ps.gone {
			p.m[owner] = ps
			ps.elem = p.lru.PushFront(ps)
		}
		ps.users++
		p.mu.Unlock()
		ps.sess, ps.err = p.open(ctx, hdr)
		if ps.err != nil {
			p.mu.Lock()
			p.unpool(ps)
			p.mu.Unlock()
		}
		close(ps.ready)
	} else {
		ps.users++
		if ps.idle != nil {
			ps.idle.Stop()
			ps.idle = nil
		}
		p.lru.MoveToFront(ps.elem)
		p.mu.Unlock()
		select {
		case <-ps.ready:
		case <-ctx.Done():
			p.Release(ps)
			return nil, ctx.Err()
		}
	}
	if ps.err != nil {
		p.Release(ps)
		return nil, ps.err
	}
	return ps, nil
}

// makeRoom ends an idle session when the pool is full: the least recently used one that may give
// way to a new session of source src — src's own, or one of a source holding more sessions
// (source.Victim) — so a source minting owners cannot push out the sessions of sources that
// hold fewer. false: none may. p.mu is held.
func (p *Pool) makeRoom(src string) bool {
	if len(p.m) < p.max {
		return true
	}
	held := make(map[string]int, 4)
	var idle []*PooledSession // least recently used first
	var srcs []string
	for e := p.lru.Back(); e != nil; e = e.Prev() {
		ps := e.Value.(*PooledSession)
		held[ps.src]++
		if ps.users == 0 {
			idle = append(idle, ps)
			srcs = append(srcs, ps.src)
		}
	}
	i := source.Victim(src, srcs, held)
	if i < 0 {
		return false
	}
	p.unpool(idle[i])
	p.endLocked(idle[i])
	return true
}

// unpool takes ps out of the pool; it is ended when its last user leaves. p.mu is held.
func (p *Pool) unpool(ps *PooledSession) {
	if ps.elem != nil {
		p.lru.Remove(ps.elem)
		ps.elem = nil
	}
	if p.m[ps.owner] == ps {
		delete(p.m, ps.owner)
	}
	ps.gone = true
	if ps.idle != nil {
		ps.idle.Stop()
		ps.idle = nil
	}
}

// Release ends one use of ps: an unpooled session is ended with its last user, an owner's
// one is ended after IdleAfter without a new one.
func (p *Pool) Release(ps *PooledSession) {
	p.mu.Lock()
	ps.users--
	var late *Session
	switch {
	case ps.users > 0:
	case p.closed:
		// Close has waited for its own work already: end this one here.
		late = ps.sess
		ps.sess = nil
		if ps.stop != nil {
			ps.stop()
		}
	case ps.gone:
		p.endLocked(ps)
	default:
		ps.idleGen++
		gen := ps.idleGen
		ps.idle = time.AfterFunc(p.idle, func() { p.expire(ps, gen) })
	}
	p.mu.Unlock()
	if late != nil {
		p.end(late)
	}
}

// expire ends ps if it is still idle since the timer gen was armed (a timer that fired while
// the session was taken again is stale).
func (p *Pool) expire(ps *PooledSession, gen int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ps.users == 0 && !ps.gone && ps.idle != nil && ps.idleGen == gen {
		ps.idle = nil
		p.unpool(ps)
		p.endLocked(ps)
	}
}

// Drop takes ps out of the pool after the upstream forgot it (404): the next Acquire of its
// owner opens a new one. ps is still released as usual.
func (p *Pool) Drop(ps *PooledSession) {
	p.mu.Lock()
	p.unpool(ps)
	p.mu.Unlock()
}

// endLocked stops ps's GET stream and ends the session upstream (DELETE) in the background.
// p.mu is held; ps has no users and is out of the pool.
func (p *Pool) endLocked(ps *PooledSession) {
	if ps.stop != nil {
		ps.stop()
		ps.stop = nil
	}
	select {
	case <-ps.ready:
	default:
		return // still opening: the opener's Release ends it
	}
	if ps.err != nil || ps.sess == nil {
		return
	}
	sess := ps.sess
	ps.sess = nil
	p.wg.Go(func() { p.end(sess) })
}

// Begin registers a call on ps that the upstream may ask something (ask: where its
// server→client requests go, nil refuses them) and opens ps's GET stream with hdr unless it
// is open; finish (deferred by the caller) removes the call.
//
// A legacy server may send its server→client requests on the GET stream instead of on the
// call's own stream (mcp-go v0.44.0 does, and without a GET stream they wait forever). Begin
// returns once the upstream answered the GET (or ListenWithin passed), so a request the call
// triggers finds the stream open.
func (p *Pool) Begin(ps *PooledSession, hdr http.Header, ask Asker) (finish func()) {
	c := &poolCall{ask: ask}
	p.mu.Lock()
	ps.calls[c] = struct{}{}
	p.mu.Unlock()
	p.ensureListening(ps, hdr)
	return func() {
		p.mu.Lock()
		delete(ps.calls, c)
		p.mu.Unlock()
	}
}

// ensureListening opens ps's GET stream unless it is open (or opening).
func (p *Pool) ensureListening(ps *PooledSession, hdr http.Header) {
	p.mu.Lock()
	if ps.listening || p.closed {
		p.mu.Unlock()
		return
	}
	ps.listening = true
	ctx, cancel := context.WithCancel(context.Background())
	ps.stop = cancel
	p.mu.Unlock()

	t := time.AfterFunc(p.listenWithin, cancel)
	st, err := p.listen(ctx, hdr)
	t.Stop()
	if err != nil {
		cancel()
		p.mu.Lock()
		ps.listening = false
		p.mu.Unlock()
		p.log.Debug("bridged session: no GET stream", "error", err.Error())
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed { // Close is waiting for (or past) its streams: this one never starts
		st.Close()
		cancel()
		ps.listening = false
		return
	}
	p.wg.Go(func() {
		defer func() {
			st.Close()
			cancel()
			p.mu.Lock()
			ps.listening = false
			p.mu.Unlock()
		}()
		for { // cancel (endLocked, Close) ends a blocked read: ctx is the GET's
			m, err := st.Next()
			if err != nil {
				return
			}
			p.dispatch(ps, hdr, m)
		}
	})
}

// dispatch hands a server→client request from ps's GET stream to the call it belongs to. The
// stream names no call, so it goes only to the one call in flight on the session; with
// several in flight (or none, or one that cannot ask) it is refused at once (NotBridged):
// Tollgate cannot tell which call asked, and a question is never put to a guess — a call
// waiting for its own answer may well ask again (docs/eras.md).
func (p *Pool) dispatch(ps *PooledSession, hdr http.Header, m *jsonrpc.Message) {
	answerHdr := PostHeader(hdr)
	if m.Kind == jsonrpc.KindNotification {
		p.dispatchNote(ps, answerHdr, m)
		return
	}
	if m.Kind != jsonrpc.KindRequest {
		return
	}
	if m.Method == "ping" {
		p.answer(answerHdr, jsonrpc.ResultResponse(m.ID, []byte(`{}`)))
		return
	}
	var to *poolCall
	p.mu.Lock()
	n := len(ps.calls)
	if n == 1 {
		for c := range ps.calls {
			to = c
		}
	}
	p.mu.Unlock()
	switch {
	case to != nil && to.ask != nil:
		to.ask(answerHdr, m, func() {})
	case n > 1:
		p.answer(answerHdr, jsonrpc.ErrorResponse(m.ID, jsonrpc.NewError(jsonrpc.CodeMethodNotFound, "NotBridged",
			"Tollgate cannot tell which of several bridged calls on this session sent "+m.Method+" on the session's stream")))
	default:
		p.answer(answerHdr, jsonrpc.ErrorResponse(m.ID, p.refusal(m.Method)))
	}
}

// dispatchNote hands a notification on ps's GET stream to the calls in flight that take
// them: progress to each (its progressToken names its call; a call takes only its own), any
// other only when one call is in flight, for the same reason as dispatch; else it is dropped.
func (p *Pool) dispatchNote(ps *PooledSession, hdr http.Header, m *jsonrpc.Message) {
	p.mu.Lock()
	n := len(ps.calls)
	var to []Asker
	for c := range ps.calls {
		if c.ask != nil {
			to = append(to, c.ask)
		}
	}
	p.mu.Unlock()
	if m.Method != "notifications/progress" && n != 1 {
		return
	}
	for _, ask := range to {
		ask(hdr, m, func() {})
	}
}

// Close ends every session (shutdown) and waits for the DELETEs and streams, a few at once;
// a session in use is ended by its last Release.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	var ending []*Session
	for _, ps := range p.m {
		if ps.stop != nil {
			ps.stop()
		}
		if ps.idle != nil {
			ps.idle.Stop()
		}
		select {
		case <-ps.ready:
			if ps.users == 0 && ps.sess != nil {
				ending = append(ending, ps.sess)
				ps.sess = nil
			}
		default:
		}
		ps.gone = true
	}
	p.m = map[string]*PooledSession{}
	p.lru.Init()
	p.mu.Unlock()
	sem := make(chan struct{}, p.endingAtOnce)
	for _, s := range ending {
		sem <- struct{}{}
		p.wg.Go(func() {
			defer func() { <-sem }()
			p.end(s)
		})
	}
	p.wg.Wait()
}
