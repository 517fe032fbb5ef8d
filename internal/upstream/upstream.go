// Package upstream is Tollgate's HTTP client to the one MCP server it fronts (streamable HTTP).
package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/sse"
)

// Header names of the streamable HTTP transport.
const (
	HeaderSessionID       = "Mcp-Session-Id"
	HeaderProtocolVersion = "Mcp-Protocol-Version"
	HeaderLastEventID     = "Last-Event-Id"
)

// Client sends requests to the upstream MCP endpoint.
type Client struct {
	url      *url.URL
	hc       *http.Client
	lastOK   atomic.Int64 // unix nanos of the last response of any kind
	maxReply int64
}

// Options tune the client.
type Options struct {
	ConnectTimeout time.Duration // dial bound; default 5s
	MaxReplyBytes  int64         // bound on a JSON reply read whole; default 64 MiB
	// WrapTransport, if set, wraps the HTTP transport (metrics, tracing).
	WrapTransport func(http.RoundTripper) http.RoundTripper
}

// New returns a client for the upstream endpoint rawURL.
func New(rawURL string, o Options) (*Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("upstream url %q: must be an absolute http(s) URL", rawURL)
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 5 * time.Second
	}
	if o.MaxReplyBytes <= 0 {
		o.MaxReplyBytes = 64 << 20
	}
	tr := &http.Transport{
		Proxy:                 nil, // a sidecar talks to its pod neighbour, never through a proxy
		DialContext:           (&net.Dialer{Timeout: o.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   o.ConnectTimeout,
		MaxIdleConns:          512,
		MaxIdleConnsPerHost:   512,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		// Tollgate must read the bytes it rewrites; ask the upstream for identity encoding.
		DisableCompression: true,
		ForceAttemptHTTP2:  true,
	}
	var rt http.RoundTripper = tr
	if o.WrapTransport != nil {
		rt = o.WrapTransport(rt)
	}
	return &Client{url: u, hc: &http.Client{Transport: rt}, maxReply: o.MaxReplyBytes}, nil
}

// URL is the upstream endpoint.
func (c *Client) URL() string { return c.url.String() }

// LastContact is when the upstream last answered anything (zero if never).
func (c *Client) LastContact() time.Time {
	n := c.lastOK.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// Error classifies a failure to get an answer from the upstream.
type Error struct {
	Timeout bool
	Err     error
}

func (e *Error) Error() string {
	if e.Timeout {
		return "upstream timed out: " + e.Err.Error()
	}
	return "upstream unreachable: " + e.Err.Error()
}
func (e *Error) Unwrap() error { return e.Err }

// RPCError maps the failure to Tollgate's JSON-RPC codes (-32001 timeout, -32000 unreachable).
func (e *Error) RPCError() *jsonrpc.Error {
	if e.Timeout {
		return jsonrpc.NewError(jsonrpc.CodeUpstreamTimeout, "UpstreamTimeout",
			"Upstream MCP server did not answer in time")
	}
	return jsonrpc.NewError(jsonrpc.CodeUpstreamUnreachable, "UpstreamUnreachable",
		"Upstream MCP server is unreachable: "+shortCause(e.Err))
}

func shortCause(err error) string {
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Op + " " + op.Net + ": " + op.Err.Error()
	}
	return err.Error()
}

// Send issues one HTTP request to the upstream endpoint with the given end-to-end headers.
// A nil error means a response arrived (of any status); the caller closes its body.
func (c *Client) Send(ctx context.Context, method string, hdr http.Header, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url.String(), rd)
	if err != nil {
		return nil, &Error{Err: err}
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	if body != nil {
		req.ContentLength = int64(len(body))
		if req.Header.Get("Content-Type") == "" {
			req.Header.Set("Content-Type", "application/json")
		}
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		// Pooled connections to an upstream that went away are all dead; drop them now rather
		// than failing the next requests one by one.
		c.hc.CloseIdleConnections()
		timeout := errors.Is(err, context.DeadlineExceeded)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && !isDial(err) {
			timeout = true
		}
		return nil, &Error{Timeout: timeout, Err: err}
	}
	c.lastOK.Store(time.Now().UnixNano())
	return resp, nil
}

// MarkReplayable lets the transport resend the request once on a fresh connection when a
// pooled one turns out to be dead (the upstream restarted). A nil X-Idempotency-Key is never
// sent on the wire (net/http). Never use it for tools/call: a tool must not run twice.
func MarkReplayable(h http.Header) {
	if _, ok := h["X-Idempotency-Key"]; !ok {
		if _, ok := h["Idempotency-Key"]; !ok {
			h["X-Idempotency-Key"] = nil
		}
	}
}

func isDial(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// IsEventStream reports whether a response is an SSE stream.
func IsEventStream(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == "text/event-stream"
}

// IsJSON reports whether a response is a JSON body.
func IsJSON(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// Reply is the answer to one request Tollgate itself sent (Call).
type Reply struct {
	Msg    *jsonrpc.Message
	Header http.Header
	Status int
}

// Call sends one JSON-RPC request and returns its response message, read from a JSON body or
// from the SSE stream the upstream chose. Other messages on that stream (notifications,
// server→client requests) go to onOther when it is non-nil. ctx bounds the whole exchange.
func (c *Client) Call(ctx context.Context, hdr http.Header, body []byte, onOther func(*jsonrpc.Message)) (*Reply, error) {
	h := hdr.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Accept", "application/json, text/event-stream")
	resp, err := c.Send(ctx, http.MethodPost, h, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	rep := &Reply{Header: resp.Header, Status: resp.StatusCode}
	switch {
	case IsEventStream(resp.Header):
		r := sse.NewReader(resp.Body, int(c.maxReply))
		defer r.Close()
		for {
			ev, err := r.Next()
			if err != nil {
				if ctx.Err() != nil {
					return nil, &Error{Timeout: true, Err: ctx.Err()}
				}
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return nil, &Error{Err: fmt.Errorf("reading event stream: %w", err)}
			}
			if !ev.HasData || len(ev.Data) == 0 {
				continue
			}
			m, err := jsonrpc.Parse(ev.Data)
			if err != nil {
				continue // not ours to judge; skip unparsable events
			}
			if m.Kind == jsonrpc.KindResponse {
				rep.Msg = m
				return rep, nil
			}
			if onOther != nil {
				onOther(m)
			}
		}
	case resp.StatusCode >= 200 && resp.StatusCode < 300 && IsJSON(resp.Header):
		b, err := io.ReadAll(io.LimitReader(resp.Body, c.maxReply+1))
		if err != nil {
			if ctx.Err() != nil {
				return nil, &Error{Timeout: true, Err: ctx.Err()}
			}
			return nil, &Error{Err: err}
		}
		if int64(len(b)) > c.maxReply {
			return nil, &Error{Err: fmt.Errorf("reply exceeds %d bytes", c.maxReply)}
		}
		m, err := jsonrpc.Parse(b)
		if err != nil {
			return nil, &Error{Err: fmt.Errorf("invalid JSON-RPC reply: %w", err)}
		}
		rep.Msg = m
		return rep, nil
	default:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return rep, &Error{Err: fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))}
	}
}
