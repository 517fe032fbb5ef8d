package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/intercept"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/session"
	"github.com/tollgate-mcp/tollgate/internal/source"
	"github.com/tollgate-mcp/tollgate/internal/sse"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

// get relays the server→client stream and injects Tollgate's own messages for the session.
func (h *Handler) get(w http.ResponseWriter, r *http.Request, sess *session.Session) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var stream *session.Stream
	if sess != nil {
		// Slots first, so a refused stream costs the upstream nothing.
		src := source.Request(r, h.identity(r))
		switch h.streams.acquire(src) {
		case LimitStreams:
			h.tooManyStreams(w, LimitStreams, "server.limits.max_streams")
			return
		case LimitSourceStreams:
			h.tooManyStreams(w, LimitSourceStreams, "server.limits.max_streams_per_source")
			return
		}
		defer h.streams.release(src)
		var detach func()
		var ok bool
		if stream, detach, ok = sess.TryAttach(h.o.MaxStreamsPerSession); !ok {
			h.tooManyStreams(w, LimitSessionStreams, "server.limits.max_streams_per_session")
			return
		}
		defer detach()
	}

	var resp *http.Response
	if sess == nil || !sess.Local {
		var err error
		resp, err = h.o.Upstream.Send(ctx, http.MethodGet, outboundHeader(r.Header, sess), nil)
		if err != nil {
			http.Error(w, upstream.AsError(err).RPCError().Message, http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		h.sessionEnded(sess, resp.StatusCode)
		if !upstream.IsEventStream(resp.Header) && !(resp.StatusCode == http.StatusMethodNotAllowed && sess != nil) {
			copyHeader(w.Header(), resp.Header)
			w.WriteHeader(resp.StatusCode)
			_, _ = io.Copy(w, resp.Body)
			return
		}
		if !upstream.IsEventStream(resp.Header) {
			resp.Body.Close() // upstream has no GET stream; serve Tollgate's own below
			resp = nil
		}
	}
	if sess == nil { // no session and a non-stream answer was handled above
		http.Error(w, "Mcp-Session-Id required", http.StatusBadRequest)
		return
	}

	sw := newSSEWriter(w)
	if resp != nil {
		copyHeader(w.Header(), resp.Header)
		sw.start(resp.StatusCode)
	} else {
		sw.start(http.StatusOK)
	}
	if h.o.Observer != nil {
		h.o.Observer.StreamOpened()
		defer h.o.Observer.StreamClosed()
	}

	upstreamDone := make(chan struct{})
	if resp != nil {
		go func() {
			defer close(upstreamDone)
			rd := sse.NewReader(resp.Body, 0)
			defer rd.Close()
			for {
				ev, err := rd.Next()
				if err != nil {
					cancel()
					return
				}
				var note *jsonrpc.Message
				if (h.o.OnNotification != nil || h.o.Divert != nil) && ev.HasData {
					if m, err := jsonrpc.Parse(ev.Data); err == nil && m.Kind == jsonrpc.KindNotification {
						note = m
					}
				}
				if note != nil && h.o.Divert != nil && h.o.Divert(sess, note) {
					continue
				}
				if sw.write(ev) != nil {
					cancel()
					return
				}
				if note != nil && h.o.OnNotification != nil {
					h.o.OnNotification(sess, note)
				}
			}
		}()
	}
	keep := time.NewTicker(h.o.KeepAlive)
	defer keep.Stop()
	for {
		select {
		case <-h.closing:
			cancel()
		case <-ctx.Done():
			if resp != nil {
				resp.Body.Close()
				<-upstreamDone
			}
			return
		case msg := <-stream.C:
			if sw.write(sse.Message(msg)) != nil {
				cancel()
			}
		case <-keep.C:
			if resp == nil && sw.write(sse.Comment("keep-alive")) != nil {
				cancel()
			}
		}
	}
}

// wait answers a locally held request: SSE with keep-alive comments when the client accepts a
// stream, otherwise one JSON body at the end. At shutdown (Close) the wait's ctx ends with the
// cause intercept.ErrShuttingDown; a wait that settles (a held call) returns its answer then
// and it is sent, others end without one.
//
// It reports whether the message fn returned was written (Result.After runs then).
func (h *Handler) wait(w http.ResponseWriter, r *http.Request, fn func(context.Context, func([]byte) bool) []byte, settles bool) bool {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	shutdown := func() { cancel(intercept.ErrShuttingDown) }
	if !acceptsSSE(r) {
		if settles {
			// Part of the drain: answered at shutdown, not reset when the grace ends.
			defer context.AfterFunc(h.closed, shutdown)()
		}
		msg := fn(ctx, func([]byte) bool { return false })
		return writeJSON(w, http.StatusOK, msg) == nil && msg != nil && r.Context().Err() == nil
	}
	// fn runs on this goroutine and the keep-alives come from a timer: a held call is an open
	// connection, thousands may wait at once, and each used to cost a second goroutine and a
	// ticker (docs/PERFORMANCE.md "Held plain calls"). Shutdown cancels the wait the same way.
	defer context.AfterFunc(h.closed, shutdown)()
	sw := newSSEWriter(w)
	sw.start(http.StatusOK)
	defer sw.close()
	emit := func(msg []byte) bool { return ctx.Err() == nil && sw.write(sse.Message(msg)) == nil }
	var mu sync.Mutex
	done := false
	var keep *time.Timer
	mu.Lock()
	keep = time.AfterFunc(h.o.KeepAlive, func() {
		if sw.write(sse.Comment("keep-alive")) != nil {
			cancel(nil) // the client is gone: end the wait
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !done {
			keep.Reset(h.o.KeepAlive)
		}
	})
	mu.Unlock()
	msg := fn(ctx, emit)
	mu.Lock()
	done = true
	keep.Stop()
	mu.Unlock()
	answer := ctx.Err() == nil || (settles && errors.Is(context.Cause(ctx), intercept.ErrShuttingDown))
	if msg != nil && answer {
		return sw.write(sse.Message(msg)) == nil
	}
	return false
}

func acceptsSSE(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

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
