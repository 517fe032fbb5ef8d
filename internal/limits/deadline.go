package limits

import (
	"io"
	"net/http"
	"time"
)

// Deadlines bounds how long a request's body may take to arrive and how long one write to the
// client may block, without a whole-request timeout (http.Server.ReadTimeout/WriteTimeout
// would cut long-lived SSE streams and held requests):
//
//   - body: a read deadline is set when the request has a body and cleared as soon as the body
//     has been read to its end, so a client that stalls mid-body loses the connection while a
//     GET stream (no body) is never cut by it;
//   - write: every Write and Flush re-arms the write deadline, so a client that stops reading
//     (a full socket buffer) is disconnected after write, while a stream that merely stays
//     quiet is not. The deadline left by one request is cleared for the next on the same
//     connection, and re-armed after the handler for net/http's final flush.
func Deadlines(next http.Handler, body, write time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_ = rc.SetWriteDeadline(time.Time{}) // a previous request's deadline must not hit this one
		if body > 0 && r.Body != nil && r.Body != http.NoBody {
			if rc.SetReadDeadline(time.Now().Add(body)) == nil {
				r.Body = &bodyDeadline{ReadCloser: r.Body, rc: rc}
			}
		}
		if write > 0 {
			dw := &deadlineWriter{ResponseWriter: w, rc: rc, d: write}
			defer func() { _ = rc.SetWriteDeadline(time.Now().Add(write)) }()
			w = dw
		}
		next.ServeHTTP(w, r)
	})
}

// bodyDeadline clears the read deadline once the body has ended (EOF): net/http then starts its
// background read to notice a client that goes away, and that read must not time out while a
// long reply is still being produced. After any other error (the deadline itself) it stays, so
// net/http's discarding of an unread rest fails fast instead of waiting for a stalled client.
type bodyDeadline struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *bodyDeadline) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// deadlineWriter re-arms the write deadline before each write or flush.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *deadlineWriter) arm() { _ = w.rc.SetWriteDeadline(time.Now().Add(w.d)) }

func (w *deadlineWriter) Write(p []byte) (int, error) {
	w.arm()
	return w.ResponseWriter.Write(p)
}

func (w *deadlineWriter) WriteHeader(code int) {
	w.arm() // 1xx informational headers are written at once
	w.ResponseWriter.WriteHeader(code)
}

// FlushError is what http.ResponseController.Flush calls.
func (w *deadlineWriter) FlushError() error {
	w.arm()
	return w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection's other controls.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Flush is for callers that assert http.Flusher directly.
func (w *deadlineWriter) Flush() { _ = w.FlushError() }
