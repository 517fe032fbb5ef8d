package upstream

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/source"
)

// fakeUpstream stands in for the upstream's handshake, DELETE, GET stream and answers.
type fakeUpstream struct {
	mu      sync.Mutex
	opened  int
	ended   []string
	answers []string
}

func (f *fakeUpstream) pool(maxSessions int, idle time.Duration) *Pool {
	end := func(s *Session) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.ended = append(f.ended, s.ID)
	}
	listen := func(context.Context, http.Header) (*Stream, error) {
		return nil, HTTPFault(http.StatusMethodNotAllowed) // a server without a GET stream
	}
	return newPool(end, listen, PoolOptions{
		Open: func(context.Context, http.Header) (*Session, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.opened++
			return &Session{ID: fmt.Sprint("s", f.opened)}, nil
		},
		Answer: func(_ http.Header, msg []byte) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.answers = append(f.answers, string(msg))
		},
		Log: slog.New(slog.DiscardHandler), MaxSessions: maxSessions, IdleAfter: idle,
	})
}

func (f *fakeUpstream) endedIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(slices.Values(f.ended))
}

func (f *fakeUpstream) openedCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.opened
}

func mustAcquire(t *testing.T, p *Pool, owner string) *PooledSession {
	t.Helper()
	ps, err := p.Acquire(context.Background(), owner, nil)
	if err != nil {
		t.Fatalf("Acquire %q: %v", owner, err)
	}
	return ps
}

// TestPoolOwners: one session per owner, reused across its requests; an anonymous
// caller ("") gets a new one per request, ended when the request ends.
func TestPoolOwners(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeUpstream{}
		p := f.pool(10, time.Minute)
		defer p.Close()
		a1 := mustAcquire(t, p, "auth:a")
		a2 := mustAcquire(t, p, "auth:a")
		b := mustAcquire(t, p, "user:b")
		if a1 != a2 || a1.sess.ID != "s1" || b.sess.ID != "s2" {
			t.Fatalf("sessions: a %s/%s, b %s; want a's reused and b's its own", a1.sess.ID, a2.sess.ID, b.sess.ID)
		}
		n1 := mustAcquire(t, p, "")
		n2 := mustAcquire(t, p, "")
		if n1 == n2 || n1 == a1 || n2 == b {
			t.Fatal("anonymous requests share a session")
		}
		p.Release(n1)
		p.Release(n2)
		p.Release(a1)
		p.Release(a2)
		p.Release(b)
		synctest.Wait()
		if got := f.endedIDs(); !slices.Equal(got, []string{"s3", "s4"}) {
			t.Fatalf("ended %v; want the two anonymous sessions only", got)
		}
		if f.openedCount() != 4 {
			t.Fatalf("opened %d sessions, want 4", f.openedCount())
		}
	})
}

// TestPoolIdle: an owner's session is ended after the idle time without a request, not
// before, and a request in between restarts the clock; the next request opens a new one.
func TestPoolIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeUpstream{}
		p := f.pool(10, time.Minute)
		defer p.Close()
		p.Release(mustAcquire(t, p, "auth:a"))
		time.Sleep(50 * time.Second)
		p.Release(mustAcquire(t, p, "auth:a")) // restarts the clock
		time.Sleep(50 * time.Second)
		synctest.Wait()
		if got := f.endedIDs(); len(got) != 0 {
			t.Fatalf("ended %v before a minute idle", got)
		}
		time.Sleep(11 * time.Second)
		synctest.Wait()
		if got := f.endedIDs(); !slices.Equal(got, []string{"s1"}) {
			t.Fatalf("ended %v after a minute idle, want [s1]", got)
		}
		ps := mustAcquire(t, p, "auth:a")
		if ps.sess.ID != "s2" {
			t.Fatalf("after the idle end: session %s, want a new one", ps.sess.ID)
		}
		// A session in use is never ended for idleness.
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if got := f.endedIDs(); len(got) != 1 {
			t.Fatalf("ended %v while in use", got)
		}
		p.Release(ps)
	})
}

// TestPoolBound: at the bound the least recently used idle session makes room (and is
// ended); when every session is in use a request gets a session of its own, ended with it,
// and the pool keeps the others.
func TestPoolBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeUpstream{}
		p := f.pool(2, time.Hour)
		defer p.Close()
		p.Release(mustAcquire(t, p, "auth:a")) // s1
		p.Release(mustAcquire(t, p, "auth:b")) // s2
		p.Release(mustAcquire(t, p, "auth:a")) // a is now the most recent
		c := mustAcquire(t, p, "auth:c")       // s3 evicts b
		synctest.Wait()
		if got := f.endedIDs(); !slices.Equal(got, []string{"s2"}) {
			t.Fatalf("ended %v, want b's session s2 (least recently used)", got)
		}
		a := mustAcquire(t, p, "auth:a")
		if a.sess.ID != "s1" {
			t.Fatalf("a's session %s, want s1 kept", a.sess.ID)
		}
		// a and c are in use: d gets its own session.
		d := mustAcquire(t, p, "auth:d")
		if d.sess.ID != "s4" || d.elem != nil || len(p.m) != 2 {
			t.Fatalf("full pool: d got %s pooled=%v (pool %d)", d.sess.ID, d.elem != nil, len(p.m))
		}
		p.Release(d)
		synctest.Wait()
		if got := f.endedIDs(); !slices.Equal(got, []string{"s2", "s4"}) {
			t.Fatalf("ended %v, want d's own session s4 ended with its request", got)
		}
		p.Release(a)
		p.Release(c)
	})
}

// TestPoolFairAcrossSources: in a full pool, a source minting owners ends its own least
// recently used idle session, never one of a source holding fewer; a lighter source may take
// from the heaviest.
func TestPoolFairAcrossSources(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeUpstream{}
		p := f.pool(3, time.Hour)
		defer p.Close()
		from := func(src, owner string) *PooledSession {
			t.Helper()
			ps, err := p.Acquire(source.NewContext(context.Background(), src), owner, nil)
			if err != nil {
				t.Fatalf("Acquire %q from %s: %v", owner, src, err)
			}
			return ps
		}
		p.Release(from("ip:B", "auth:bob"))   // s1, the least recently used of all
		p.Release(from("ip:A", "auth:mint1")) // s2
		p.Release(from("ip:A", "auth:mint2")) // s3
		p.Release(from("ip:A", "auth:mint3")) // s4 ends A's own s2, not bob's s1
		synctest.Wait()
		if got := f.endedIDs(); !slices.Equal(got, []string{"s2"}) {
			t.Fatalf("ended %v, want A's own least recently used s2", got)
		}
		p.Release(from("ip:C", "auth:carol")) // s5: C holds none, A two: A's s3 gives way
		synctest.Wait()
		if got := f.endedIDs(); !slices.Equal(got, []string{"s2", "s3"}) {
			t.Fatalf("ended %v, want s2 and A's s3", got)
		}
		bob := from("ip:B", "auth:bob")
		if bob.sess.ID != "s1" {
			t.Fatalf("bob's session %s, want s1 kept", bob.sess.ID)
		}
		p.Release(bob)
	})
}

// TestPoolDrop: a session the upstream forgot (404) leaves the pool; the owner's next
// request opens a new one, and the forgotten one is ended when its last user leaves.
func TestPoolDrop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeUpstream{}
		p := f.pool(10, time.Hour)
		defer p.Close()
		old := mustAcquire(t, p, "auth:a")
		p.Drop(old)
		fresh := mustAcquire(t, p, "auth:a")
		if fresh == old || fresh.sess.ID != "s2" {
			t.Fatalf("after drop: %s", fresh.sess.ID)
		}
		p.Release(old)
		p.Release(fresh)
		synctest.Wait()
		if got := f.endedIDs(); !slices.Equal(got, []string{"s1"}) {
			t.Fatalf("ended %v, want the dropped s1", got)
		}
	})
}

// TestPoolClose: shutdown ends idle sessions at once and busy ones when their call ends.
func TestPoolClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeUpstream{}
		p := f.pool(10, time.Hour)
		p.Release(mustAcquire(t, p, "auth:a"))
		busy := mustAcquire(t, p, "auth:b")
		p.Close()
		if got := f.endedIDs(); !slices.Equal(got, []string{"s1"}) {
			t.Fatalf("ended at close %v, want [s1]", got)
		}
		p.Release(busy)
		if got := f.endedIDs(); !slices.Equal(got, []string{"s1", "s2"}) {
			t.Fatalf("ended %v, want s2 too once its call ended", got)
		}
		if _, err := p.Acquire(context.Background(), "auth:c", nil); err == nil {
			t.Fatal("acquire after close succeeded")
		}
	})
}

// TestPoolDispatch: a server→client request on a session's GET stream goes only to the one
// call in flight on it; with several in flight (even when all but one already wait for their
// own answer: a call may ask twice at once), or none, or one that cannot ask, it is refused at
// once (NotBridged: no call sees another's question, nothing waits); pings are answered.
func TestPoolDispatch(t *testing.T) {
	f := &fakeUpstream{}
	p := f.pool(10, time.Hour)
	defer p.Close()
	ps := mustAcquire(t, p, "auth:a")
	defer p.Release(ps)
	req := func(id int, method string) *jsonrpc.Message {
		m, err := jsonrpc.Parse(jsonrpc.Request([]byte(fmt.Sprint(id)), method, []byte(`{}`)))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	var got []string
	asker := func(name string) Asker {
		return func(_ http.Header, m *jsonrpc.Message, _ func()) { got = append(got, name+" "+m.Method) }
	}

	p.dispatch(ps, http.Header{}, req(1, "elicitation/create")) // no call
	finish := p.Begin(ps, nil, asker("first"))
	p.dispatch(ps, http.Header{}, req(2, "elicitation/create")) // the one call
	p.dispatch(ps, http.Header{}, req(3, "ping"))
	// A second call while the first waits for its answer: the question may be either's.
	finish2 := p.Begin(ps, nil, asker("second"))
	p.dispatch(ps, http.Header{}, req(4, "elicitation/create"))
	p.dispatch(ps, http.Header{}, req(5, "sampling/createMessage"))
	finish()
	p.dispatch(ps, http.Header{}, req(6, "sampling/createMessage")) // the second alone again
	finish2()
	finishOther := p.Begin(ps, nil, nil)
	p.dispatch(ps, http.Header{}, req(7, "roots/list")) // one call that cannot ask
	finishOther()

	if !slices.Equal(got, []string{"first elicitation/create", "second sampling/createMessage"}) {
		t.Fatalf("delivered %v, want the first call's elicitation alone, then the second's sampling alone", got)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	want := []string{`"id":1,"error"`, `"id":3,"result":{}`, `"id":4,"error"`, `"id":5,"error"`, `"id":7,"error"`}
	if len(f.answers) != len(want) {
		t.Fatalf("answers %v", f.answers)
	}
	for i, w := range want {
		if !strings.Contains(f.answers[i], w) || (strings.Contains(w, "error") && !strings.Contains(f.answers[i], "NotBridged")) {
			t.Errorf("answer %d: %s; want %s (NotBridged)", i, f.answers[i], w)
		}
	}
}

// TestPoolDispatchNotes: a notification on a session's GET stream names no call either:
// progress goes to every call in flight (its token names its call, and each takes only its
// own), a log message only to the one call in flight, else nowhere; none is answered.
func TestPoolDispatchNotes(t *testing.T) {
	f := &fakeUpstream{}
	p := f.pool(10, time.Hour)
	defer p.Close()
	ps := mustAcquire(t, p, "auth:a")
	defer p.Release(ps)
	note := func(method string) *jsonrpc.Message {
		m, err := jsonrpc.Parse(jsonrpc.Notification(method, []byte(`{}`)))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	var got []string
	asker := func(name string) Asker {
		return func(_ http.Header, m *jsonrpc.Message, _ func()) { got = append(got, name+" "+m.Method) }
	}
	p.dispatch(ps, http.Header{}, note("notifications/progress")) // no call
	finish := p.Begin(ps, nil, asker("first"))
	finish2 := p.Begin(ps, nil, asker("second"))
	p.dispatch(ps, http.Header{}, note("notifications/progress"))
	p.dispatch(ps, http.Header{}, note("notifications/message")) // whose?
	finish2()
	p.dispatch(ps, http.Header{}, note("notifications/message"))
	finish()
	if len(got) >= 2 {
		slices.Sort(got[:2]) // the two calls in any order
	}
	want := []string{"first notifications/progress", "second notifications/progress", "first notifications/message"}
	if !slices.Equal(got, want) {
		t.Errorf("delivered %v, want %v", got, want)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.answers) != 0 {
		t.Errorf("notifications answered: %v", f.answers)
	}
}
