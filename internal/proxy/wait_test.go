package proxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/session"
)

// heldRequest is a POST that accepts SSE, as a held tools/call arrives.
func heldRequest(ctx context.Context) *http.Request {
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/mcp", strings.NewReader(`{}`))
	r.Header.Set("Accept", "application/json, text/event-stream")
	return r
}

func waitHandler() *Handler {
	return New(Options{Sessions: session.NewRegistry(0, nil), AllowedHosts: []string{"*"}, KeepAlive: 10 * time.Second})
}

// onWaitGoroutine matches a stack in which the wait function itself (not a goroutine it
// started) called fn.
var onWaitGoroutine = regexp.MustCompile(`proxy\.\(\*Handler\)\.wait\(`)

// TestWaitKeepAlivesThenAnswer: while Tollgate holds a request the client gets an SSE comment
// every KeepAlive, then the answer; the wait runs on the handler's own goroutine (a held call
// costs no goroutine of its own: thousands may wait at once).
func TestWaitKeepAlivesThenAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := waitHandler()
		rec := newStreamRecorder()
		release := make(chan struct{})
		var stack string
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.wait(rec, heldRequest(t.Context()), func(ctx context.Context, emit func([]byte) bool) []byte {
				buf := make([]byte, 64<<10)
				stack = string(buf[:runtime.Stack(buf, false)])
				<-release
				return []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)
			}, false)
		}()
		time.Sleep(35 * time.Second)
		synctest.Wait()
		if n := strings.Count(rec.String(), ": keep-alive"); n != 3 {
			t.Errorf("%d keep-alive comments after 35s at 10s, want 3:\n%s", n, rec.String())
		}
		close(release)
		<-done
		if !strings.HasSuffix(rec.String(), "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n") {
			t.Errorf("the answer is not the last event:\n%q", rec.String())
		}
		time.Sleep(time.Minute) // no keep-alive after the answer
		synctest.Wait()
		if n := strings.Count(rec.String(), ": keep-alive"); n != 3 {
			t.Errorf("%d keep-alive comments after the answer, want still 3", n)
		}
		if !onWaitGoroutine.MatchString(stack) {
			t.Errorf("fn did not run on the wait's own goroutine:\n%s", stack)
		}
	})
}

// TestWaitEndsOnClose: shutdown (Handler.Close) cancels a held request's wait, and what fn
// returns then is not written (the client asks again after reconnecting).
func TestWaitEndsOnClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := waitHandler()
		rec := newStreamRecorder()
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.wait(rec, heldRequest(t.Context()), func(ctx context.Context, _ func([]byte) bool) []byte {
				<-ctx.Done()
				return []byte(`{"jsonrpc":"2.0","id":1,"result":{"late":true}}`)
			}, false)
		}()
		time.Sleep(time.Second)
		h.Close()
		<-done
		if strings.Contains(rec.String(), "late") {
			t.Errorf("an answer was written after shutdown:\n%s", rec.String())
		}
	})
}

// TestWaitEndsWhenClientLeaves: the request's context ending cancels fn's context.
func TestWaitEndsWhenClientLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := waitHandler()
		ctx, leave := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			h.wait(newStreamRecorder(), heldRequest(ctx), func(ctx context.Context, _ func([]byte) bool) []byte {
				<-ctx.Done()
				done <- ctx.Err()
				return nil
			}, false)
		}()
		time.Sleep(time.Second)
		leave()
		if err := <-done; err == nil {
			t.Error("fn's context did not end with the request's")
		}
	})
}
