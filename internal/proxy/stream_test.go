package proxy

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/tollgate-mcp/tollgate/internal/session"
	"github.com/tollgate-mcp/tollgate/internal/source"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

// streamRecorder is a ResponseWriter for handlers that stream: it records what was written and
// calls onFlush after each flush, the moment bytes reach the client.
type streamRecorder struct {
	mu      sync.Mutex
	header  http.Header
	status  int
	body    bytes.Buffer
	flushes int
	onFlush func(n int) // n counts flushes from 1
}

func newStreamRecorder() *streamRecorder { return &streamRecorder{header: http.Header{}} }

func (s *streamRecorder) Header() http.Header { return s.header }

func (s *streamRecorder) WriteHeader(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status == 0 {
		s.status = code
	}
}

func (s *streamRecorder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.body.Write(p)
}

func (s *streamRecorder) Flush() {
	s.mu.Lock()
	s.flushes++
	n, f := s.flushes, s.onFlush
	s.mu.Unlock()
	if f != nil {
		f(n)
	}
}

func (s *streamRecorder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.body.String()
}

// localSession is a session Tollgate minted itself (the upstream has none), so its GET stream
// is Tollgate's alone and the handler never contacts the upstream.
func localSession(t *testing.T, reg *session.Registry) *session.Session {
	t.Helper()
	tk, err := reg.Admit("test")
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Release()
	return tk.Adopt(session.NewLocalID())
}

// TestGetStreamAttachedBeforeHeaders: a client that has the GET stream's response headers may
// act at once (call a tool, get a task approved), and Tollgate's notification for it must
// reach that stream; so the stream is attached to the session before the headers go out.
func TestGetStreamAttachedBeforeHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := session.NewRegistry(0, nil)
		sess := localSession(t, reg)
		h := New(Options{Sessions: reg, AllowedHosts: []string{"*"}})
		note := []byte(`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"tg_1"}}`)

		rec := newStreamRecorder()
		pushed := make(chan bool, 1)
		rec.onFlush = func(n int) {
			if n == 1 { // the headers: the client now knows the stream is open
				pushed <- sess.Push(note)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/mcp", nil)
		req.Header.Set(upstream.HeaderSessionID, sess.ID)
		req.Header.Set("Accept", "text/event-stream")
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.ServeHTTP(rec, req)
		}()
		synctest.Wait()
		if !<-pushed {
			t.Error("no stream was attached when the headers were flushed: the notification was dropped")
		}
		if got := rec.String(); !bytes.Contains([]byte(got), note) {
			t.Errorf("stream body %q lacks the notification", got)
		}
		cancel()
		<-done
	})
}

// TestStreamsPerSource: a source opening session after session, each with its per-session
// share of GET streams, stops at server.limits.max_streams_per_source and leaves the rest of
// max_streams to other sources (before, it took all of them: the total was the only bound).
func TestStreamsPerSource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := session.NewRegistry(0, nil)
		h := New(Options{Sessions: reg, AllowedHosts: []string{"*"}, MaxStreams: 8, MaxStreamsPerSource: 2, MaxStreamsPerSession: 4})
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		open := func(addr string) *streamRecorder {
			sess := localSession(t, reg)
			rec := newStreamRecorder()
			req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/mcp", nil)
			req.RemoteAddr = addr
			req.Header.Set(upstream.HeaderSessionID, sess.ID)
			req.Header.Set("Accept", "text/event-stream")
			wg.Go(func() { h.ServeHTTP(rec, req) })
			synctest.Wait()
			return rec
		}
		for i := range 10 {
			rec := open("192.0.2.1:1000")
			want := http.StatusOK
			if i >= 2 {
				want = http.StatusTooManyRequests
			}
			if rec.status != want {
				t.Errorf("flooding source's stream %d: HTTP %d, want %d", i+1, rec.status, want)
			}
		}
		if got := h.streams.heldBy(source.Addr("192.0.2.1:1000")); got != 2 {
			t.Errorf("flooding source holds %d streams, want 2", got)
		}
		for i := range 2 {
			if rec := open("198.51.100.7:2000"); rec.status != http.StatusOK {
				t.Errorf("another source's stream %d: HTTP %d, want 200", i+1, rec.status)
			}
		}
		cancel()
		wg.Wait()
		if got := h.streams.open.Load(); got != 0 {
			t.Errorf("%d stream slots held after every stream ended", got)
		}
		if got := h.streams.heldBy(source.Addr("192.0.2.1:1000")); got != 0 {
			t.Errorf("flooding source still holds %d after its streams ended", got)
		}
	})
}
