package proxy

import (
	"errors"
	"net/http"
	"sync"

	"github.com/tollgate-mcp/tollgate/internal/sse"
)

// sseWriter writes events to a client and flushes each one; safe for concurrent use (the GET
// stream merges upstream events with Tollgate's own).
type sseWriter struct {
	mu  sync.Mutex
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf []byte
	// closed is set when the handler returns: a late writer (a goroutine that outlived its
	// request) gets an error instead of touching a finished ResponseWriter.
	closed bool
}

// errClosed is what write returns after close.
var errClosed = errors.New("proxy: event stream closed")

func newSSEWriter(w http.ResponseWriter) *sseWriter {
	return &sseWriter{w: w, rc: http.NewResponseController(w)}
}

func (s *sseWriter) start(status int) {
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	if h.Get("Cache-Control") == "" {
		h.Set("Cache-Control", "no-cache") // keep the upstream's own (e.g. "no-cache, no-transform")
	}
	h.Del("Content-Length")
	h.Set("X-Accel-Buffering", "no") // an nginx in front must not buffer the stream
	s.w.WriteHeader(status)
	_ = s.rc.Flush()
}

func (s *sseWriter) write(ev *sse.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	var err error
	if s.buf, err = sse.Write(s.w, s.buf, ev); err != nil {
		return err
	}
	if cap(s.buf) > 64<<10 {
		s.buf = nil // do not pin a large event's buffer for the stream's lifetime
	}
	return s.rc.Flush()
}

// close makes every later write fail; call it before the handler returns.
func (s *sseWriter) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}
