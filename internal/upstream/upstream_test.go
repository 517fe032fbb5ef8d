package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
)

// Tests start loopback servers and pooled connections; none may outlive them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const request = `{"jsonrpc":"2.0","id":1,"method":"ping"}`

// newClient returns a client for srv whose idle connections close with the test.
func newClient(t *testing.T, url string, o Options) *Client {
	t.Helper()
	c, err := New(url, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.hc.CloseIdleConnections)
	return c
}

func serve(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"http://127.0.0.1:3000/mcp", true},
		{"https://mcp.internal/mcp", true},
		{"ftp://127.0.0.1/mcp", false},
		{"/mcp", false},
		{"127.0.0.1:3000/mcp", false},
		{"http:///mcp", false},
		{"", false},
		{"http://[::1", false},
	} {
		c, err := New(tc.url, Options{})
		if (err == nil) != tc.ok {
			t.Errorf("New(%q) error = %v, want ok=%v", tc.url, err, tc.ok)
			continue
		}
		if tc.ok && c.URL() != tc.url {
			t.Errorf("URL() = %q, want %q", c.URL(), tc.url)
		}
	}
}

func TestSendHeaders(t *testing.T) {
	type seen struct {
		method, ct, session, accept, body string
	}
	got := make(chan seen, 1)
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.Header.Get("Content-Type"), r.Header.Get(HeaderSessionID), r.Header.Get("Accept"), string(b)}
		w.WriteHeader(http.StatusTeapot)
	})
	c := newClient(t, srv.URL+"/mcp", Options{})
	tests := []struct {
		name   string
		method string
		hdr    http.Header
		body   []byte
		want   seen
	}{
		{"default content type", http.MethodPost, http.Header{HeaderSessionID: {"s1"}}, []byte(request),
			seen{http.MethodPost, "application/json", "s1", "", request}},
		{"content type kept", http.MethodPost, http.Header{"Content-Type": {"application/json; charset=utf-8"}, "Accept": {"text/event-stream"}}, []byte(request),
			seen{http.MethodPost, "application/json; charset=utf-8", "", "text/event-stream", request}},
		{"no body no content type", http.MethodGet, http.Header{HeaderSessionID: {"s2"}}, nil,
			seen{http.MethodGet, "", "s2", "", ""}},
		{"delete", http.MethodDelete, nil, nil, seen{http.MethodDelete, "", "", "", ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := c.Send(context.Background(), tc.method, tc.hdr, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			// Any status is an answer; classifying it is the caller's job.
			if resp.StatusCode != http.StatusTeapot {
				t.Errorf("status %d", resp.StatusCode)
			}
			if s := <-got; s != tc.want {
				t.Errorf("upstream saw %+v, want %+v", s, tc.want)
			}
		})
	}
}

func TestLastContact(t *testing.T) {
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) })
	c := newClient(t, srv.URL, Options{})
	if !c.LastContact().IsZero() {
		t.Fatal("LastContact before any request is not zero")
	}
	before := time.Now()
	resp, err := c.Send(context.Background(), http.MethodGet, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	first := c.LastContact()
	if first.Before(before.Add(-time.Second)) || first.IsZero() {
		t.Fatalf("LastContact = %v, want about %v", first, before)
	}
	// A failed request is no contact.
	dead := newClient(t, closedURL(t), Options{})
	dead.lastOK.Store(first.UnixNano())
	if _, err := dead.Send(context.Background(), http.MethodGet, nil, nil); err == nil {
		t.Fatal("Send to a closed port succeeded")
	}
	if !dead.LastContact().Equal(first) {
		t.Errorf("LastContact moved on a failed request: %v", dead.LastContact())
	}
}

// closedURL is a loopback URL on which nothing listens.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/mcp"
}

func TestSendUnreachable(t *testing.T) {
	c := newClient(t, closedURL(t), Options{ConnectTimeout: time.Second})
	_, err := c.Send(context.Background(), http.MethodPost, nil, []byte(request))
	var ue *Error
	if !errors.As(err, &ue) {
		t.Fatalf("error %T %v, want *Error", err, err)
	}
	if ue.Timeout {
		t.Error("a refused connection was classified as a timeout")
	}
	re := ue.RPCError()
	if re.Code != jsonrpc.CodeUpstreamUnreachable || re.Name() != "UpstreamUnreachable" {
		t.Errorf("RPCError = %d %q", re.Code, re.Name())
	}
	if !strings.Contains(re.Message, "dial tcp") || !strings.Contains(ue.Error(), "upstream unreachable") {
		t.Errorf("message %q / %q does not name the cause", re.Message, ue.Error())
	}
}

func TestSendTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	c := newClient(t, srv.URL, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c.Send(ctx, http.MethodPost, nil, []byte(request))
	var ue *Error
	if !errors.As(err, &ue) || !ue.Timeout {
		t.Fatalf("error %v, want a timeout *Error", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Error("the cause is not unwrapped")
	}
	re := ue.RPCError()
	if re.Code != jsonrpc.CodeUpstreamTimeout || re.Name() != "UpstreamTimeout" {
		t.Errorf("RPCError = %d %q", re.Code, re.Name())
	}
	if !strings.HasPrefix(ue.Error(), "upstream timed out") {
		t.Errorf("Error() = %q", ue.Error())
	}
}

// timeoutErr is a net.Error that timed out.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

type failingTransport struct{ err error }

func (f failingTransport) RoundTrip(*http.Request) (*http.Response, error) { return nil, f.err }

// A dial that times out means the upstream is unreachable; a timeout once connected (or the
// caller's deadline) means it did not answer in time.
func TestErrorClassification(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		timeout bool
	}{
		{"dial timeout", &net.OpError{Op: "dial", Net: "tcp", Err: timeoutErr{}}, false},
		{"dial refused", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}, false},
		{"read timeout", &net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}, true},
		{"deadline", context.DeadlineExceeded, true},
		{"dial under deadline", &net.OpError{Op: "dial", Net: "tcp", Err: context.DeadlineExceeded}, true},
		{"reset", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}, false},
		{"eof", io.EOF, false},
		{"file deadline", os.ErrDeadlineExceeded, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, "http://127.0.0.1:1/mcp", Options{
				WrapTransport: func(http.RoundTripper) http.RoundTripper { return failingTransport{tc.err} },
			})
			_, err := c.Send(context.Background(), http.MethodPost, nil, []byte(request))
			var ue *Error
			if !errors.As(err, &ue) {
				t.Fatalf("error %T %v, want *Error", err, err)
			}
			if ue.Timeout != tc.timeout {
				t.Errorf("Timeout = %v, want %v (%v)", ue.Timeout, tc.timeout, err)
			}
			want := jsonrpc.CodeUpstreamUnreachable
			if tc.timeout {
				want = jsonrpc.CodeUpstreamTimeout
			}
			if got := ue.RPCError().Code; got != want {
				t.Errorf("RPCError code %d, want %d", got, want)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("the cause %v is not unwrapped from %v", tc.err, err)
			}
		})
	}
}

func TestContentTypes(t *testing.T) {
	for _, tc := range []struct {
		ct          string
		json, event bool
	}{
		{"application/json", true, false},
		{"application/json; charset=utf-8", true, false},
		{"Application/JSON", true, false},
		{"application/vnd.mcp+json", true, false},
		{"text/event-stream", false, true},
		{"text/event-stream; charset=utf-8", false, true},
		{"TEXT/EVENT-STREAM", false, true},
		{"text/plain", false, false},
		{"application/jsonl", false, false},
		{"", false, false},
		{";;;", false, false},
	} {
		h := http.Header{"Content-Type": {tc.ct}}
		if got := IsJSON(h); got != tc.json {
			t.Errorf("IsJSON(%q) = %v", tc.ct, got)
		}
		if got := IsEventStream(h); got != tc.event {
			t.Errorf("IsEventStream(%q) = %v", tc.ct, got)
		}
	}
}

// sseHandler answers with an SSE stream made of the given frames.
func sseHandler(frames ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, f := range frames {
			_, _ = io.WriteString(w, f)
			w.(http.Flusher).Flush()
		}
	}
}

func jsonHandler(status int, ct, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if ct != "" {
			w.Header().Set("Content-Type", ct)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

func TestCall(t *testing.T) {
	long := strings.Repeat("x", 511) + "END" + strings.Repeat("y", 600)
	tests := []struct {
		name     string
		h        http.HandlerFunc
		max      int64
		wantMsg  string // the response's result ("null" for an error response), "" if a fault is expected
		others   []string
		wantErr  string // the fault: a substring of its text and its data.error name
		wantName string
		status   int // Reply.Status
	}{
		{name: "json", h: jsonHandler(200, "application/json", `{"jsonrpc":"2.0","id":1,"result":{"ok":true}}`),
			wantMsg: `{"ok":true}`, status: 200},
		{name: "json+suffix", h: jsonHandler(200, "application/vnd.x+json; charset=utf-8", `{"jsonrpc":"2.0","id":1,"result":{}}`),
			wantMsg: `{}`, status: 200},
		{name: "json error response", h: jsonHandler(200, "application/json", `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"nope"}}`),
			wantMsg: `null`, status: 200},
		{name: "json error response with null id", h: jsonHandler(200, "application/json", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}`),
			wantMsg: `null`, status: 200},
		{name: "id re-encoded as a float", h: jsonHandler(200, "application/json", `{"jsonrpc":"2.0","id":1.0,"result":{}}`),
			wantMsg: `{}`, status: 200},
		{name: "sse", h: sseHandler(
			": comment\n\n",
			"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n",
			"data:\n\n",
			"data: not json\n\n",
			"id: 7\n\n",
			"data: {\"jsonrpc\":\"2.0\",\"id\":\"srv-1\",\"method\":\"sampling/createMessage\",\"params\":{}}\n\n",
			"data: {\"jsonrpc\":\"2.0\",\"id\":1,\n",
			"data: \"result\":{\"done\":1}}\n\n",
			"data: {\"jsonrpc\":\"2.0\",\"method\":\"after/the/response\"}\n\n",
		), wantMsg: `{"done":1}`, others: []string{"notifications/progress", "sampling/createMessage"}, status: 200},
		{name: "sse without response", h: sseHandler("data: {\"jsonrpc\":\"2.0\",\"method\":\"n\"}\n\n"),
			others: []string{"n"}, wantErr: io.ErrUnexpectedEOF.Error(), wantName: "UpstreamStreamEnded"},
		{name: "sse event too large", max: 64, h: sseHandler("data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"pad\":\"" + strings.Repeat("p", 200) + "\"}}\n\n"),
			wantErr: "reading event stream", wantName: "UpstreamStreamEnded"},
		{name: "sse response with another id", h: sseHandler("data: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n\n"),
			wantErr: "another request id", wantName: "UpstreamInvalidReply"},
		{name: "sse malformed error", h: sseHandler("data: {\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":\"x\",\"message\":\"m\"}}\n\n"),
			wantErr: "not an integer", wantName: "UpstreamInvalidReply"},
		{name: "http error text", h: jsonHandler(500, "text/plain", long),
			wantErr: "HTTP 500", wantName: "UpstreamHTTPError"},
		{name: "http error json that is no JSON-RPC error", h: jsonHandler(404, "application/json", ` {"error":"no session"} `),
			wantErr: "HTTP 404", wantName: "UpstreamHTTPError"},
		{name: "http error carrying a JSON-RPC error", h: jsonHandler(500, "application/json", `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"crash","data":[1]}}`),
			wantMsg: `null`, status: 500},
		{name: "accepted without body", h: jsonHandler(202, "", ""), wantErr: "HTTP 202", wantName: "UpstreamInvalidReply"},
		{name: "2xx not json", h: jsonHandler(200, "text/html", "<html>"), wantErr: "HTTP 200", wantName: "UpstreamInvalidReply"},
		{name: "reply at the limit", max: 44, h: jsonHandler(200, "application/json", `{"jsonrpc":"2.0","id":1,"result":{"a":"bc"}}`),
			wantMsg: `{"a":"bc"}`, status: 200},
		{name: "reply over the limit", max: 43, h: jsonHandler(200, "application/json", `{"jsonrpc":"2.0","id":1,"result":{"a":"bc"}}`),
			wantErr: "reply exceeds 43 bytes", wantName: "UpstreamInvalidReply"},
		{name: "truncated reply", h: jsonHandler(200, "application/json", `{"jsonrpc":"2.0","id":1,"result":`),
			wantErr: "not a JSON-RPC message", wantName: "UpstreamInvalidReply"},
		{name: "invalid JSON inside", h: jsonHandler(200, "application/json", `{"jsonrpc":"2.0","id":1,"result":{"a":nul}}`),
			wantErr: "not valid JSON", wantName: "UpstreamInvalidReply"},
		{name: "another id", h: jsonHandler(200, "application/json", `{"jsonrpc":"2.0","id":"1","result":{}}`),
			wantErr: "another request id", wantName: "UpstreamInvalidReply"},
		{name: "null id with a result", h: jsonHandler(200, "application/json", `{"jsonrpc":"2.0","id":null,"result":{}}`),
			wantErr: "another request id", wantName: "UpstreamInvalidReply"},
		{name: "error is a string", h: jsonHandler(200, "application/json", `{"jsonrpc":"2.0","id":1,"error":"boom"}`),
			wantErr: "error member", wantName: "UpstreamInvalidReply"},
		{name: "result and error", h: jsonHandler(200, "application/json", `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}`),
			wantErr: `both "result" and "error"`, wantName: "UpstreamInvalidReply"},
		{name: "a request instead of a response", h: jsonHandler(200, "application/json", `{"jsonrpc":"2.0","id":1,"method":"ping"}`),
			wantErr: "a request instead of a response", wantName: "UpstreamInvalidReply"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := serve(t, tc.h)
			c := newClient(t, srv.URL, Options{MaxReplyBytes: tc.max})
			var others []string
			rep, err := c.Call(context.Background(), nil, []byte(request), func(m *jsonrpc.Message) {
				others = append(others, m.Method)
			})
			if fmt.Sprint(others) != fmt.Sprint(tc.others) {
				t.Errorf("onOther saw %v, want %v", others, tc.others)
			}
			if tc.wantErr != "" {
				var ue *Error
				if !errors.As(err, &ue) || ue.Timeout {
					t.Fatalf("error %v, want a fault *Error", err)
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %q does not contain %q", err, tc.wantErr)
				}
				e := ue.RPCError()
				if e.Code != jsonrpc.CodeUpstreamUnreachable || e.Name() != tc.wantName {
					t.Errorf("RPCError %d %q, want -32000 %q", e.Code, e.Name(), tc.wantName)
				}
				if strings.Contains(err.Error()+e.Message, "xxx") {
					t.Errorf("the upstream's body leaked into the error: %q", err)
				}
				if rep != nil {
					t.Errorf("reply %+v with a fault", rep)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rep.Status != tc.status || rep.Msg == nil || rep.Msg.Kind != jsonrpc.KindResponse {
				t.Fatalf("reply %+v", rep)
			}
			if got := string(rep.Msg.Result); got != tc.wantMsg && !(tc.wantMsg == "null" && rep.Msg.Result == nil) {
				t.Errorf("result %s, want %s", got, tc.wantMsg)
			}
		})
	}
}

// Call asks for both reply kinds and leaves the caller's headers alone.
func TestCallHeaders(t *testing.T) {
	var accept, session atomic.Value
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		accept.Store(r.Header.Get("Accept"))
		session.Store(r.Header.Get(HeaderSessionID))
		jsonHandler(200, "application/json", `{"jsonrpc":"2.0","id":1,"result":{}}`)(w, r)
	})
	c := newClient(t, srv.URL, Options{})
	hdr := http.Header{HeaderSessionID: {"s1"}, "Accept": {"application/json"}}
	rep, err := c.Call(context.Background(), hdr, []byte(request), nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Header.Get("Content-Type") != "application/json" {
		t.Errorf("reply header %v", rep.Header)
	}
	if accept.Load() != "application/json, text/event-stream" || session.Load() != "s1" {
		t.Errorf("upstream saw Accept %q, session %q", accept.Load(), session.Load())
	}
	if hdr.Get("Accept") != "application/json" || len(hdr) != 2 {
		t.Errorf("caller's headers modified: %v", hdr)
	}
}

// TestPost: a message Tollgate sends that expects no reply (an answer to the upstream's
// request, a notification) carries every header the streamable HTTP transport requires,
// whatever the caller's headers lacked; a refusal (HTTP 400) is reported, 202 is not.
func TestPost(t *testing.T) {
	var got atomic.Value
	status := atomic.Int32{}
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Clone())
		w.WriteHeader(int(status.Load()))
	})
	c := newClient(t, srv.URL, Options{})
	hdr := http.Header{HeaderSessionID: {"s1"}, HeaderProtocolVersion: {"2025-11-25"}}
	for _, tc := range []struct {
		status int32
		ok     bool
	}{{202, true}, {400, false}} {
		status.Store(tc.status)
		err := c.Post(hdr, []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
		if (err == nil) != tc.ok {
			t.Errorf("HTTP %d: err %v", tc.status, err)
		}
		h := got.Load().(http.Header)
		for k, want := range map[string]string{"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
			HeaderSessionID: "s1", HeaderProtocolVersion: "2025-11-25"} {
			if h.Get(k) != want {
				t.Errorf("%s: %q, want %q", k, h.Get(k), want)
			}
		}
	}
	if len(hdr) != 2 {
		t.Errorf("caller's headers modified: %v", hdr)
	}
}

// A stream that stalls before the response ends with a timeout once ctx expires.
func TestCallStreamTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"n\"}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	c := newClient(t, srv.URL, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	var n atomic.Int32
	_, err := c.Call(ctx, nil, []byte(request), func(*jsonrpc.Message) { n.Add(1) })
	var ue *Error
	if !errors.As(err, &ue) || !ue.Timeout || ue.RPCError().Code != jsonrpc.CodeUpstreamTimeout {
		t.Fatalf("error %v, want a timeout", err)
	}
	if n.Load() != 1 {
		t.Errorf("onOther ran %d times, want 1", n.Load())
	}
}

func TestMarkReplayable(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   http.Header
		want http.Header
	}{
		{"empty", http.Header{}, http.Header{"X-Idempotency-Key": nil}},
		{"keeps x key", http.Header{"X-Idempotency-Key": {"k1"}}, http.Header{"X-Idempotency-Key": {"k1"}}},
		{"keeps key", http.Header{"Idempotency-Key": {"k2"}}, http.Header{"Idempotency-Key": {"k2"}}},
	} {
		MarkReplayable(tc.in)
		if fmt.Sprint(tc.in) != fmt.Sprint(tc.want) || len(tc.in) != len(tc.want) {
			t.Errorf("%s: header %v, want %v", tc.name, tc.in, tc.want)
		}
		if _, ok := tc.in["X-Idempotency-Key"]; tc.name == "empty" && !ok {
			t.Errorf("%s: key missing", tc.name)
		}
	}
}

// killSecond is an upstream that answers the first request and then, on the same (now pooled)
// connection, reads the second request and drops the connection without answering — as an
// upstream that restarts between requests does. Later requests are answered.
type killSecond struct {
	srv     *httptest.Server
	mu      sync.Mutex
	remotes []string
	idemKey []bool // whether each request carried an X-Idempotency-Key header on the wire
}

func newKillSecond(t *testing.T) *killSecond {
	k := &killSecond{}
	k.srv = serve(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		k.mu.Lock()
		k.remotes = append(k.remotes, r.RemoteAddr)
		_, has := r.Header["X-Idempotency-Key"]
		k.idemKey = append(k.idemKey, has)
		n := len(k.remotes)
		k.mu.Unlock()
		if n == 2 {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		jsonHandler(200, "application/json", `{"jsonrpc":"2.0","id":1,"result":{}}`)(w, r)
	})
	return k
}

func (k *killSecond) seen() ([]string, []bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.remotes...), append([]bool(nil), k.idemKey...)
}

func TestReplay(t *testing.T) {
	for _, replayable := range []bool{true, false} {
		t.Run(fmt.Sprintf("replayable=%v", replayable), func(t *testing.T) {
			k := newKillSecond(t)
			c := newClient(t, k.srv.URL, Options{})
			send := func() error {
				h := http.Header{}
				if replayable {
					MarkReplayable(h)
				}
				resp, err := c.Send(context.Background(), http.MethodPost, h, []byte(request))
				if err != nil {
					return err
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				return resp.Body.Close()
			}
			if err := send(); err != nil {
				t.Fatal(err)
			}
			err := send()
			remotes, keys := k.seen()
			if len(remotes) < 2 || remotes[0] != remotes[1] {
				t.Fatalf("test premise: the second request must reuse the pooled connection: %v", remotes)
			}
			for i, has := range keys {
				if has {
					t.Errorf("request %d carried X-Idempotency-Key on the wire", i)
				}
			}
			if replayable {
				if err != nil {
					t.Fatalf("replayable request failed: %v", err)
				}
				if len(remotes) != 3 || remotes[2] == remotes[1] {
					t.Errorf("want one retry on a fresh connection, upstream saw %v", remotes)
				}
				return
			}
			// Not replayable (tools/call): the request may have run; it must not run twice.
			var ue *Error
			if !errors.As(err, &ue) || ue.Timeout {
				t.Fatalf("error %v, want an unreachable *Error", err)
			}
			if len(remotes) != 2 {
				t.Errorf("a non-replayable request was resent: upstream saw %v", remotes)
			}
		})
	}
}

// TestAsErrorAndStatusOf: callers map any failure to a JSON-RPC error and read the answer's
// HTTP status without assuming the error's type (a failure that is not an *Error once made
// the GET and DELETE relays dereference a nil *Error).
func TestAsErrorAndStatusOf(t *testing.T) {
	foreign := errors.New("not from this package")
	http404 := HTTPFault(http.StatusNotFound)
	tests := []struct {
		name       string
		rep        *Reply
		err        error
		wantName   string
		wantStatus int
	}{
		{"foreign error", nil, foreign, "UpstreamUnreachable", 0},
		{"wrapped foreign error", nil, fmt.Errorf("ctx: %w", foreign), "UpstreamUnreachable", 0},
		{"HTTP fault", nil, http404, "UpstreamHTTPError", http.StatusNotFound},
		{"wrapped HTTP fault", nil, fmt.Errorf("initialize: %w", http404), "UpstreamHTTPError", http.StatusNotFound},
		{"timeout", nil, &Error{Timeout: true, Err: context.DeadlineExceeded}, "UpstreamTimeout", 0},
		{"reply with a status", &Reply{Status: http.StatusNotFound}, nil, "", http.StatusNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err != nil {
				ue := AsError(tc.err)
				if ue == nil {
					t.Fatal("AsError returned nil")
				}
				if got, _ := ue.RPCError().Data["error"].(string); got != tc.wantName {
					t.Errorf("RPCError name = %q, want %q", got, tc.wantName)
				}
			}
			if got := StatusOf(tc.rep, tc.err); got != tc.wantStatus {
				t.Errorf("StatusOf = %d, want %d", got, tc.wantStatus)
			}
		})
	}
}
