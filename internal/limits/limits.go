// Package limits bounds what clients can make Tollgate hold at the HTTP level: open
// connections per listener, the time to receive a request body or to accept a write, and the
// request-body bytes held at once (docs/SECURITY.md "Connections, bodies and streams").
package limits

import (
	"bytes"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Budget is a non-blocking semaphore of bytes: request bodies take their size before they are
// read and give it back when the request ends, so stalled or slow bodies cannot add up to more
// memory than the budget (server.limits.max_inflight_body_bytes).
//
// Each source (package source: the identity, else the address) may hold at most perSource of
// it (server.limits.max_inflight_body_bytes_per_source): without that share, 16 stalled 4 MiB
// bodies from one client held the whole default budget and every other caller got 503 until
// body_timeout ended them. Sources are counted only while they hold bytes, so the table is
// bounded by the requests in flight.
type Budget struct {
	max, perSource int64

	mu       sync.Mutex
	used     int64
	bySource map[string]int64
}

// NewBudget returns a budget of max bytes (max <= 0: unlimited) without a per-source share.
func NewBudget(max int64) *Budget { return NewSharedBudget(max, 0) }

// NewSharedBudget returns a budget of max bytes of which one source may hold perSource
// (perSource <= 0 or above max: max).
func NewSharedBudget(max, perSource int64) *Budget {
	if perSource <= 0 || perSource > max {
		perSource = max
	}
	return &Budget{max: max, perSource: perSource, bySource: make(map[string]int64)}
}

// TryAcquire takes n bytes for the anonymous source "" if they are free; false leaves the
// budget unchanged.
func (b *Budget) TryAcquire(n int64) bool { return b.For("").TryAcquire(n) }

// Release gives back n bytes taken with TryAcquire.
func (b *Budget) Release(n int64) { b.For("").Release(n) }

// Used is the number of bytes currently taken.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// UsedBy is the number of bytes src currently holds.
func (b *Budget) UsedBy(src string) int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bySource[src]
}

// sources is the number of sources holding bytes (tests).
func (b *Budget) sources() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.bySource)
}

// For returns src's account of the budget: one request's bytes are taken and given back
// through it. A nil budget gives an account that takes everything.
func (b *Budget) For(src string) *Share { return &Share{b: b, src: src} }

// Share is one source's account of a Budget for one request.
type Share struct {
	b   *Budget
	src string
	// BySource is set when the last refusal came from the per-source share rather than the
	// whole budget (for the error and metric naming the limit).
	BySource bool
}

// TryAcquire takes n bytes if both the budget and the source's share have room; false leaves
// both unchanged.
func (s *Share) TryAcquire(n int64) bool {
	b := s.b
	if b == nil || b.max <= 0 || n <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	mine := b.bySource[s.src]
	if b.perSource < b.max && mine+n > b.perSource {
		s.BySource = true
		return false
	}
	if b.used+n > b.max {
		s.BySource = false
		return false
	}
	b.used += n
	b.bySource[s.src] = mine + n
	return true
}

// Release gives back n bytes taken with TryAcquire.
func (s *Share) Release(n int64) {
	b := s.b
	if b == nil || b.max <= 0 || n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if left := b.bySource[s.src] - n; left > 0 {
		b.bySource[s.src] = left
	} else {
		delete(b.bySource, s.src)
	}
}

// Listener caps the open connections of a listener. A connection beyond the cap is accepted,
// answered with a short HTTP 503 and closed, so Accept never blocks: a flood on one listener
// cannot leave connections hanging in the kernel's backlog, and each listener has its own
// budget (the admin listener stays reachable while the MCP listener is saturated).
type Listener struct {
	net.Listener
	max      int64
	open     atomic.Int64
	refused  atomic.Uint64
	rejects  chan struct{} // bounds the goroutines answering refused connections
	response []byte
	onRefuse func()
}

// rejectWorkers bounds refused connections being answered at once; beyond it they are closed
// without an answer.
const rejectWorkers = 64

// NewListener wraps ln so at most max connections are open at once. name appears in the 503
// body ("mcp", "admin"). onRefuse, if not nil, runs for each refused connection (metrics).
func NewListener(ln net.Listener, max int, name string, onRefuse func()) *Listener {
	body := "too many connections to the " + name + " listener; retry shortly\n"
	resp := "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n" +
		"Retry-After: 1\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	return &Listener{
		Listener: ln, max: int64(max), rejects: make(chan struct{}, rejectWorkers),
		response: []byte(resp), onRefuse: onRefuse,
	}
}

// Accept returns the next connection within the cap; connections beyond it are refused in the
// background and Accept goes on waiting.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.max <= 0 || l.open.Add(1) <= l.max {
			return &conn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		l.refuse(c)
	}
}

// refuse answers 503 and closes c. In one of a bounded number of goroutines it first waits
// briefly for the request head (an HTTP client takes an answer that precedes its request for
// a broken connection), answers, shuts the write side and drains a little so the client
// reads the 503 rather than a reset. Beyond that bound the answer is written at once (it fits
// the empty send buffer of a new connection) and the connection closed.
func (l *Listener) refuse(c net.Conn) {
	l.refused.Add(1)
	if l.onRefuse != nil {
		l.onRefuse()
	}
	select {
	case l.rejects <- struct{}{}:
	default:
		_ = c.SetDeadline(time.Now().Add(50 * time.Millisecond))
		_, _ = c.Write(l.response)
		c.Close()
		return
	}
	go func() {
		defer func() { <-l.rejects }()
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
		var buf [2048]byte
		var tail []byte
		for n := 0; n < 16<<10; {
			k, err := c.Read(buf[:])
			n += k
			tail = append(tail, buf[:k]...)
			if bytes.Contains(tail, []byte("\r\n\r\n")) || err != nil {
				break
			}
			tail = tail[max(0, len(tail)-3):]
		}
		_ = c.SetDeadline(time.Now().Add(250 * time.Millisecond))
		if _, err := c.Write(l.response); err != nil {
			return
		}
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		for n := 0; n < 64<<10; {
			k, err := c.Read(buf[:])
			n += k
			if err != nil {
				return
			}
		}
	}()
}

// Hold takes one connection's place in the cap for something that holds descriptors like a
// connection but has none of its own — a bridged call parked between MRTR rounds keeps its
// upstream call (and its session's stream) open after the client's request ended. false: the
// cap is reached (nothing taken). Every Hold that succeeds is paired with an Unhold.
func (l *Listener) Hold() bool {
	if l.max <= 0 {
		l.open.Add(1)
		return true
	}
	if l.open.Add(1) <= l.max {
		return true
	}
	l.open.Add(-1)
	return false
}

// Unhold gives back a place taken with Hold.
func (l *Listener) Unhold() { l.open.Add(-1) }

// Open is the number of connections currently counted against the cap.
func (l *Listener) Open() int64 { return l.open.Load() }

// Refused is the number of connections refused so far.
func (l *Listener) Refused() uint64 { return l.refused.Load() }

// conn gives its slot back once, on the first Close.
type conn struct {
	net.Conn
	l      *Listener
	closed atomic.Bool
}

// CloseWrite lets net/http shut the write side before closing (a graceful close).
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *conn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.l.open.Add(-1)
	}
	return c.Conn.Close()
}
