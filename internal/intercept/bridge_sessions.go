package intercept

import (
	"container/list"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/execution"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/logcap"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

// Upstream sessions for bridged 2026-07-28 requests (a legacy-only upstream). A legacy server
// keeps state per session — a tool may remember what an earlier call stored — so the session
// is the unit of isolation: each owner (identity, else the keyed hash of the Authorization
// credential) gets its own, and an anonymous request gets one of its own that is closed when
// the request ends (docs/eras.md "legacy-only upstream"; CONVENTIONS 10: every piece of state
// has an owner and a bound).

const (
	// bridgeSessionsMax bounds the owners' sessions held at once; the least recently used idle
	// one makes room.
	bridgeSessionsMax = 1000
	// bridgeSessionIdle is how long an owner's session is kept without a request on it; then
	// it is ended (DELETE).
	bridgeSessionIdle = 5 * time.Minute
	// listenHeadersWithin bounds the wait for the upstream's answer to the GET that opens a
	// session's stream.
	listenHeadersWithin = 5 * time.Second
	// endingAtOnce bounds the DELETEs Close sends in parallel.
	endingAtOnce = 8
)

// bridgeOwner is whose upstream session a bridged request uses: its identity or credential
// owner, or "" for an anonymous caller (no identity, no Authorization), who gets a session of
// its own for the request.
func bridgeOwner(x *Exchange) string {
	if x.Subject == "" && strings.TrimSpace(x.HTTP.Header.Get("Authorization")) == "" {
		return ""
	}
	return x.Owner
}

// taskBridgeOwner is bridgeOwner for an approved 2026-07-28 task's execution: the task's
// owner (identity or credential hash), or "" for an anonymous caller's task, which gets a
// session of its own.
func taskBridgeOwner(owner string) string {
	if owner == "" || tasks.IsAnonymous(owner) {
		return ""
	}
	return owner
}

// bridgeSession is one upstream session Tollgate holds for bridged requests.
type bridgeSession struct {
	owner string        // "" = one request's own session, never pooled
	ready chan struct{} // closed once sess or err is set
	sess  *upstream.Session
	err   error

	// The rest is guarded by bridgePool.mu.
	users     int                     // calls using the session now
	calls     map[*bridgeUse]struct{} // the calls among them, for the GET stream's requests
	elem      *list.Element           // place in the LRU list while pooled
	idle      *time.Timer             // ends an idle owner's session
	idleGen   int                     // which arming of idle is current
	gone      bool                    // out of the pool: ended when its last user leaves
	listening bool                    // the GET stream is open (or opening)
	stop      context.CancelFunc      // ends the GET stream
}

// askFunc takes one of the upstream's server→client requests for a call, with the headers to
// answer it with; answered is called once the upstream has its answer (or refusal).
type askFunc func(hdr http.Header, m *jsonrpc.Message, answered func())

// bridgeUse is one call on a bridgeSession; onRequest takes the upstream's server→client
// requests meant for it (nil: the call cannot ask anyone).
type bridgeUse struct {
	onRequest askFunc
	waiting   int // requests handed to it and not yet answered (guarded by bridgePool.mu)
}

// bridgePool holds the bridged sessions, one per owner, bounded and ended when idle.
type bridgePool struct {
	open   func(ctx context.Context, hdr http.Header) (*upstream.Session, error) // handshake
	end    func(*upstream.Session)                                               // DELETE
	listen func(ctx context.Context, hdr http.Header) (*upstream.Stream, error)  // GET stream
	answer func(hdr http.Header, msg []byte)                                     // to a server→client request
	log    *slog.Logger
	max    int
	idle   time.Duration
	full   *logcap.Sampler

	mu     sync.Mutex
	m      map[string]*bridgeSession
	lru    list.List // front: most recently used
	closed bool
	wg     sync.WaitGroup // sessions being ended, GET streams being read
}

func newBridgePool(up *upstream.Client, open func(context.Context, http.Header) (*upstream.Session, error), log *slog.Logger) *bridgePool {
	return &bridgePool{
		open: open, end: up.EndSession, listen: up.Listen,
		answer: func(hdr http.Header, msg []byte) { execution.Answer(up, hdr, msg) },
		log:    log, max: bridgeSessionsMax, idle: bridgeSessionIdle,
		full: logcap.NewSampler(warnEvery, warnBurst), m: map[string]*bridgeSession{},
	}
}

var errPoolClosed = errors.New("Tollgate is shutting down")

// acquire returns owner's session, opening it if needed (hdr: the caller's end-to-end
// headers, which an opened session keeps). Every acquire is paired with a release.
func (p *bridgePool) acquire(ctx context.Context, owner string, hdr http.Header) (*bridgeSession, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errPoolClosed
	}
	bs := p.m[owner]
	if owner == "" || bs == nil {
		bs = &bridgeSession{owner: owner, ready: make(chan struct{}), calls: map[*bridgeUse]struct{}{}, gone: owner == ""}
		if owner != "" && !p.makeRoom() {
			// Every held session has a call in flight: this request gets a session of its
			// own rather than an error (its owner's state is not there this once).
			bs.gone = true
			if ok, held := p.full.Allow(); ok {
				p.log.Warn("bridged upstream sessions all in use; a request gets a session of its own",
					"limit", p.max, "suppressed", held)
			}
		}
		if !bs.gone {
			p.m[owner] = bs
			bs.elem = p.lru.PushFront(bs)
		}
		bs.users++
		p.mu.Unlock()
		bs.sess, bs.err = p.open(ctx, hdr)
		if bs.err != nil {
			p.mu.Lock()
			p.unpool(bs)
			p.mu.Unlock()
		}
		close(bs.ready)
	} else {
		bs.users++
		if bs.idle != nil {
			bs.idle.Stop()
			bs.idle = nil
		}
		p.lru.MoveToFront(bs.elem)
		p.mu.Unlock()
		select {
		case <-bs.ready:
		case <-ctx.Done():
			p.release(bs)
			return nil, ctx.Err()
		}
	}
	if bs.err != nil {
		p.release(bs)
		return nil, bs.err
	}
	return bs, nil
}

// makeRoom evicts the least recently used idle session when the pool is full; false when
// every session is in use. p.mu is held.
func (p *bridgePool) makeRoom() bool {
	if len(p.m) < p.max {
		return true
	}
	for e := p.lru.Back(); e != nil; e = e.Prev() {
		if old := e.Value.(*bridgeSession); old.users == 0 {
			p.unpool(old)
			p.endLocked(old)
			return true
		}
	}
	return false
}

// unpool takes bs out of the pool; it is ended when its last user leaves. p.mu is held.
func (p *bridgePool) unpool(bs *bridgeSession) {
	if bs.elem != nil {
		p.lru.Remove(bs.elem)
		bs.elem = nil
	}
	if p.m[bs.owner] == bs {
		delete(p.m, bs.owner)
	}
	bs.gone = true
	if bs.idle != nil {
		bs.idle.Stop()
		bs.idle = nil
	}
}

// release ends one use of bs: an unpooled session is ended with its last user, an owner's
// one is ended after p.idle without a new one.
func (p *bridgePool) release(bs *bridgeSession) {
	p.mu.Lock()
	bs.users--
	var late *upstream.Session
	switch {
	case bs.users > 0:
	case p.closed:
		// close has waited for its own work already: end this one here.
		late = bs.sess
		bs.sess = nil
		if bs.stop != nil {
			bs.stop()
		}
	case bs.gone:
		p.endLocked(bs)
	default:
		bs.idleGen++
		gen := bs.idleGen
		bs.idle = time.AfterFunc(p.idle, func() { p.expire(bs, gen) })
	}
	p.mu.Unlock()
	if late != nil {
		p.end(late)
	}
}

// expire ends bs if it is still idle since the timer gen was armed (a timer that fired while
// the session was taken again is stale).
func (p *bridgePool) expire(bs *bridgeSession, gen int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if bs.users == 0 && !bs.gone && bs.idle != nil && bs.idleGen == gen {
		bs.idle = nil
		p.unpool(bs)
		p.endLocked(bs)
	}
}

// drop takes bs out of the pool after the upstream forgot it (404): the next acquire of its
// owner opens a new one.
func (p *bridgePool) drop(bs *bridgeSession) {
	p.mu.Lock()
	p.unpool(bs)
	p.mu.Unlock()
}

// endLocked stops bs's GET stream and ends the session upstream (DELETE) in the background.
// p.mu is held; bs has no users and is out of the pool.
func (p *bridgePool) endLocked(bs *bridgeSession) {
	if bs.stop != nil {
		bs.stop()
		bs.stop = nil
	}
	select {
	case <-bs.ready:
	default:
		return // still opening: the opener's release ends it
	}
	if bs.err != nil || bs.sess == nil {
		return
	}
	sess := bs.sess
	bs.sess = nil
	p.wg.Go(func() { p.end(sess) })
}

// begin registers a call on bs; finish (deferred by the caller) removes it.
func (p *bridgePool) begin(bs *bridgeSession, onRequest askFunc) (finish func()) {
	use := &bridgeUse{onRequest: onRequest}
	p.mu.Lock()
	bs.calls[use] = struct{}{}
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		delete(bs.calls, use)
		p.mu.Unlock()
	}
}

// ensureListening opens bs's GET stream unless it is open: a legacy server may send its
// server→client requests there instead of on the call's own stream (mcp-go v0.44.0 does, and
// without a GET stream they wait forever). It returns once the upstream answered the GET
// (or listenHeadersWithin passed), so a request the call triggers finds the stream open.
func (p *bridgePool) ensureListening(bs *bridgeSession, hdr http.Header) {
	p.mu.Lock()
	if bs.listening || p.closed {
		p.mu.Unlock()
		return
	}
	bs.listening = true
	ctx, cancel := context.WithCancel(context.Background())
	bs.stop = cancel
	p.mu.Unlock()

	t := time.AfterFunc(listenHeadersWithin, cancel)
	st, err := p.listen(ctx, hdr)
	t.Stop()
	if err != nil {
		cancel()
		p.mu.Lock()
		bs.listening = false
		p.mu.Unlock()
		p.log.Debug("bridged session: no GET stream", "error", err.Error())
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed { // close is waiting for (or past) its streams: this one never starts
		st.Close()
		cancel()
		bs.listening = false
		return
	}
	p.wg.Go(func() {
		defer func() {
			st.Close()
			cancel()
			p.mu.Lock()
			bs.listening = false
			p.mu.Unlock()
		}()
		for { // cancel (endLocked, close) ends a blocked read: ctx is the GET's
			m, err := st.Next()
			if err != nil {
				return
			}
			p.dispatch(bs, hdr, m)
		}
	})
}

// dispatch hands a server→client request from bs's GET stream to the call it belongs to. The
// stream names no call, so it goes to the only call in flight on the session, or else to the
// only one not already waiting for an answer (a call blocked on its own question is not
// asking another); otherwise it is refused at once rather than put to the wrong call.
func (p *bridgePool) dispatch(bs *bridgeSession, hdr http.Header, m *jsonrpc.Message) {
	if m.Kind != jsonrpc.KindRequest {
		return // the upstream's notifications have no bridged listener
	}
	answerHdr := hdr.Clone()
	answerHdr.Set("Content-Type", "application/json")
	if m.Method == "ping" {
		p.answer(answerHdr, jsonrpc.ResultResponse(m.ID, []byte(`{}`)))
		return
	}
	var to, free *bridgeUse
	p.mu.Lock()
	nFree := 0
	for u := range bs.calls {
		to = u
		if u.waiting == 0 {
			free = u
			nFree++
		}
	}
	if len(bs.calls) > 1 {
		to = nil
		if nFree == 1 {
			to = free
		}
	}
	if to != nil && to.onRequest != nil {
		to.waiting++
	}
	n := len(bs.calls)
	p.mu.Unlock()
	switch {
	case to != nil && to.onRequest != nil:
		var once sync.Once
		to.onRequest(answerHdr, m, func() {
			once.Do(func() {
				p.mu.Lock()
				to.waiting--
				p.mu.Unlock()
			})
		})
	case to == nil && n > 1:
		p.answer(answerHdr, jsonrpc.ErrorResponse(m.ID, jsonrpc.NewError(jsonrpc.CodeMethodNotFound, "NotBridged",
			"Tollgate cannot tell which of several bridged calls on this session sent "+m.Method+" on the session's stream")))
	default:
		p.answer(answerHdr, jsonrpc.ErrorResponse(m.ID, notBridged(m.Method)))
	}
}

// close ends every session (shutdown) and waits for the DELETEs and streams, a few at once.
func (p *bridgePool) close() {
	p.mu.Lock()
	p.closed = true
	var ending []*upstream.Session
	for _, bs := range p.m {
		if bs.stop != nil {
			bs.stop()
		}
		if bs.idle != nil {
			bs.idle.Stop()
		}
		select {
		case <-bs.ready:
			if bs.users == 0 && bs.sess != nil {
				ending = append(ending, bs.sess)
				bs.sess = nil
			}
		default:
		}
		bs.gone = true
	}
	p.m = map[string]*bridgeSession{}
	p.lru.Init()
	p.mu.Unlock()
	sem := make(chan struct{}, endingAtOnce)
	for _, s := range ending {
		sem <- struct{}{}
		p.wg.Go(func() {
			defer func() { <-sem }()
			p.end(s)
		})
	}
	p.wg.Wait()
}
