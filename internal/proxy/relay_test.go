package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/tollgate-mcp/tollgate/internal/session"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

// Unit tests of the relay in the manner of a reverse proxy's own: events flushed one by one,
// a client that leaves cancels the upstream request, hop-by-hop headers stay on their hop,
// resumption headers pass, and the timers that bound an exchange. A pure passthrough handler
// (no router) in front of an httptest upstream; no sleeps.

// The relay starts a reader per exchange and the GET stream its own; none may outlive a test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// bound is how long a test waits for something that must happen; reaching it is a failure,
// never a measurement.
const bound = 10 * time.Second

// roundTripFunc is an http.RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// newRelay returns a passthrough /mcp handler in front of upstreamURL; wrap, if set, wraps the
// upstream client's transport.
func newRelay(t *testing.T, upstreamURL string, wrap func(http.RoundTripper) http.RoundTripper) *Handler {
	t.Helper()
	uc, err := upstream.New(upstreamURL, upstream.Options{WrapTransport: wrap})
	if err != nil {
		t.Fatal(err)
	}
	return New(Options{Upstream: uc, Sessions: session.NewRegistry(0, nil), AllowedHosts: []string{"*"}})
}

func postJSON(ctx context.Context, t *testing.T, url, body string, hdr http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestRelayFlushesEachEvent: an event reaches the client while the upstream is still working
// on the next one (spec 2025-11-25 transports: progress before the response).
func TestRelayFlushesEachEvent(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n")
	}))
	defer up.Close()
	front := httptest.NewServer(newRelay(t, up.URL, nil))
	defer front.Close()

	resp := postJSON(t.Context(), t, front.URL, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow"}}`, nil)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q, want text/event-stream", ct)
	}
	rd := bufio.NewReader(resp.Body)
	first := make(chan string, 1)
	go func() {
		line, _ := rd.ReadString('\n')
		first <- line
	}()
	select {
	case line := <-first:
		if !strings.Contains(line, "notifications/progress") {
			t.Fatalf("first line %q, want the progress notification", line)
		}
	case <-time.After(bound):
		close(release)
		t.Fatal("no event reached the client before the upstream's response existed")
	}
	close(release)
	rest, _ := io.ReadAll(rd)
	if !strings.Contains(string(rest), `"id":7,"result":{}`) {
		t.Errorf("rest of the stream %q lacks the response", rest)
	}
}

// TestRelayClientGoneCancelsUpstream: a client that disconnects ends the upstream request.
func TestRelayClientGoneCancelsUpstream(t *testing.T) {
	started, cancelled, giveUp := make(chan struct{}), make(chan struct{}), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		close(started)
		select {
		case <-r.Context().Done():
			close(cancelled)
		case <-giveUp: // the test failed; let the server close
		}
	}))
	defer up.Close()
	front := httptest.NewServer(newRelay(t, up.URL, nil))
	defer front.Close()

	ctx, cancel := context.WithCancel(t.Context())
	resp := postJSON(ctx, t, front.URL, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}`, nil)
	defer resp.Body.Close()
	select {
	case <-started:
	case <-time.After(bound):
		t.Fatal("the upstream never got the request")
	}
	cancel()
	select {
	case <-cancelled:
	case <-time.After(bound):
		close(giveUp)
		t.Fatal("the upstream request outlived the client")
	}
}

// TestRelayHopHeaders: hop-by-hop headers (RFC 9110 §7.6.1), and those the Connection header
// names, are not forwarded in either direction; end-to-end headers are.
func TestRelayHopHeaders(t *testing.T) {
	var mu sync.Mutex
	var sent http.Header
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "X-Resp-Hop")
		w.Header().Set("X-Resp-Hop", "1")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("X-Resp-End", "kept")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	}))
	defer up.Close()
	// The request as the relay hands it to the transport (before net/http's own handling).
	h := newRelay(t, up.URL, func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			sent = r.Header.Clone()
			mu.Unlock()
			return rt.RoundTrip(r)
		})
	})
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	for k, v := range map[string]string{
		"Connection": "X-Custom-Hop, keep-alive", "X-Custom-Hop": "v", "Keep-Alive": "timeout=5",
		"Te": "trailers", "Proxy-Authorization": "Basic eA==", "Upgrade": "h2c", "Trailer": "X-T",
		"Proxy-Connection": "keep-alive", "X-End": "kept", "Authorization": "Bearer t",
		"Content-Type": "application/json",
	} {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, k := range []string{"Connection", "X-Custom-Hop", "Keep-Alive", "Te", "Proxy-Authorization", "Upgrade", "Trailer", "Proxy-Connection"} {
		if v, ok := sent[k]; ok {
			t.Errorf("request header %s: %q forwarded upstream", k, v)
		}
	}
	for _, k := range []string{"X-End", "Authorization"} {
		if sent.Get(k) == "" {
			t.Errorf("end-to-end request header %s not forwarded", k)
		}
	}
	for _, k := range []string{"Connection", "X-Resp-Hop", "Keep-Alive"} {
		if v, ok := rec.Header()[k]; ok {
			t.Errorf("response header %s: %q relayed to the client", k, v)
		}
	}
	if rec.Header().Get("X-Resp-End") != "kept" {
		t.Errorf("end-to-end response header X-Resp-End not relayed: %v", rec.Header())
	}
}

// TestRelayLastEventID: a GET resuming a stream carries Last-Event-ID to the upstream as is
// (spec 2025-11-25 transports, resumability).
func TestRelayLastEventID(t *testing.T) {
	got := make(chan string, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			got <- r.Header.Get("Last-Event-ID")
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "id: 43\ndata: {\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}\n\n")
	}))
	defer up.Close()
	h := newRelay(t, up.URL, nil)
	tk, err := h.o.Sessions.Admit("test")
	if err != nil {
		t.Fatal(err)
	}
	sess := tk.Adopt("upstream-session-1")
	front := httptest.NewServer(h)
	defer front.Close()

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, front.URL, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(upstream.HeaderSessionID, sess.ID)
	req.Header.Set("Last-Event-ID", "42")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body) // the upstream ends its stream, so does the relay
	if id := <-got; id != "42" {
		t.Errorf("upstream saw Last-Event-ID %q, want 42", id)
	}
	if !strings.Contains(string(body), "id: 43\n") || !strings.Contains(string(body), `"id":5`) {
		t.Errorf("resumed stream %q: want the upstream's event with its id", body)
	}
}

// hungUpstream is an upstream that never answers: its transport waits for the request's end.
// In memory, so that synctest's clock can run while the relay waits for it.
func hungUpstream(http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		<-r.Context().Done()
		return nil, r.Context().Err()
	})
}

// TestRelayHeaderTimeout: a request whose upstream sends no response headers is answered
// with UpstreamTimeout after server.request_timeout; tasks/result, which blocks upstream by
// design, is not cut.
func TestRelayHeaderTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newRelay(t, "http://upstream.invalid/mcp", hungUpstream)
		start := time.Now()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)))
		if waited := time.Since(start); waited != h.o.RequestTimeout {
			t.Errorf("answered after %s, want server.request_timeout (%s)", waited, h.o.RequestTimeout)
		}
		var m struct {
			Error struct {
				Code    int
				Message string
			}
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil || m.Error.Code != -32001 || !strings.Contains(m.Error.Message, "server.request_timeout") {
			t.Errorf("reply %s, want -32001 naming server.request_timeout", rec.Body)
		}

		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		rec = httptest.NewRecorder()
		go func() {
			defer close(done)
			h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tasks/result","params":{"taskId":"up-1"}}`)))
		}()
		time.Sleep(10 * h.o.RequestTimeout) // fake time: every timer of the relay has fired
		synctest.Wait()
		select {
		case <-done:
			t.Errorf("tasks/result was cut while the upstream held it: %s", rec.Body)
		default:
		}
		cancel()
		<-done
	})
}

// TestReadReplyWithoutLength: a JSON reply without Content-Length is read whole and exact at
// every size around the piece boundary.
func TestReadReplyWithoutLength(t *testing.T) {
	for _, n := range []int{0, 1, 32<<10 - 1, 32 << 10, 32<<10 + 1, 400 << 10} {
		body := strings.Repeat("x", n)
		got, err := readReply(&http.Response{ContentLength: -1, Body: io.NopCloser(iotest.HalfReader(strings.NewReader(body)))})
		if err != nil || string(got) != body {
			t.Fatalf("%d bytes: got %d bytes, %v", n, len(got), err)
		}
	}
}

// TestRelayLargeRepliesBackToBack: large replies relayed one after another, whose buffers are
// recycled between exchanges, each arrive whole and exact, as JSON (with and without
// Content-Length) and as SSE.
func TestRelayLargeRepliesBackToBack(t *testing.T) {
	var n atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1)
		fill := strings.Repeat(string(rune('a'+i%26)), 300<<10+int(i)*1000)
		msg := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + fill + `"}]}}`
		switch r.URL.Query().Get("as") {
		case "sse":
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: "+msg+"\n\n")
		case "length":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(msg)))
			io.WriteString(w, msg)
		default:
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, msg)
		}
	}))
	defer up.Close()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	for _, as := range []string{"json", "length", "sse"} {
		front := httptest.NewServer(newRelay(t, up.URL+"?as="+as, nil))
		for range 4 {
			resp := postJSON(ctx, t, front.URL, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big"}}`, nil)
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			i := n.Load()
			want := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + strings.Repeat(string(rune('a'+i%26)), 300<<10+int(i)*1000) + `"}]}}`
			if as == "sse" {
				want = "data: " + want + "\n\n"
			}
			if string(body) != want {
				t.Fatalf("%s reply %d: %d bytes differ from the upstream's %d", as, i, len(body), len(want))
			}
		}
		front.Close()
	}
}
