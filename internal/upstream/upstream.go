// Package upstream is Tollgate's HTTP client to the one MCP server it fronts (streamable HTTP).
package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
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
	// Transport, if set, replaces the network: every exchange goes to it (a stdio server run
	// by internal/stdio, which answers as a streamable HTTP endpoint would).
	Transport http.RoundTripper
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
	if o.Transport != nil {
		rt = o.Transport
	}
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

// Error classifies a failure to get a usable answer from the upstream: no answer at all
// (unreachable, timeout), or an answer that is not a JSON-RPC reply to the request (Fault).
type Error struct {
	Timeout bool
	Err     error
	Fault   Fault
	Status  int // the HTTP status of a FaultHTTP answer
}

// Fault says how an upstream answer that did arrive was unusable.
type Fault uint8

const (
	NoFault     Fault = iota // no answer: unreachable or timed out
	FaultHTTP                // an HTTP error status without a JSON-RPC reply
	FaultReply               // not a JSON-RPC response to the request: garbage, wrong id, malformed error
	FaultStream              // the event stream ended before the response to the request
)

func (e *Error) Error() string {
	switch {
	case e.Timeout:
		return "upstream timed out: " + e.Err.Error()
	case e.Fault == FaultHTTP:
		return "upstream answered HTTP " + strconv.Itoa(e.Status) + " without a JSON-RPC reply"
	case e.Fault == FaultReply:
		return "upstream sent an invalid reply: " + e.Err.Error()
	case e.Fault == FaultStream:
		return "upstream event stream ended without the response: " + e.Err.Error()
	}
	return "upstream unreachable: " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// RPCError maps the failure to Tollgate's JSON-RPC codes: -32001 for a timeout, -32000 for the
// rest with a data.error name per kind (docs/errors.md). The upstream's own bytes (an error
// page, a stack trace) never go into the message; the HTTP status does.
func (e *Error) RPCError() *jsonrpc.Error {
	switch {
	case e.Timeout:
		return jsonrpc.NewError(jsonrpc.CodeUpstreamTimeout, "UpstreamTimeout",
			"Upstream MCP server did not answer in time")
	case e.Fault == FaultHTTP:
		return jsonrpc.NewError(jsonrpc.CodeUpstreamUnreachable, "UpstreamHTTPError",
			"Upstream MCP server answered HTTP "+strconv.Itoa(e.Status)+" without a JSON-RPC reply", "status", e.Status)
	case e.Fault == FaultReply:
		return jsonrpc.NewError(jsonrpc.CodeUpstreamUnreachable, "UpstreamInvalidReply",
			"Upstream MCP server sent an invalid reply: "+e.Err.Error())
	case e.Fault == FaultStream:
		return jsonrpc.NewError(jsonrpc.CodeUpstreamUnreachable, "UpstreamStreamEnded",
			"Upstream MCP server ended its event stream without answering the request")
	}
	return jsonrpc.NewError(jsonrpc.CodeUpstreamUnreachable, "UpstreamUnreachable",
		"Upstream MCP server is unreachable: "+shortCause(e.Err))
}

// AsError returns err as an *Error. Every failure this package reports is one; anything else
// (a caller's own error) counts as no answer, so callers never dereference a nil *Error.
func AsError(err error) *Error {
	var ue *Error
	if errors.As(err, &ue) {
		return ue
	}
	return &Error{Err: err}
}

// StatusOf is the HTTP status the upstream answered a Call with: the reply's, or that of a
// FaultHTTP failure; 0 when no answer arrived.
func StatusOf(rep *Reply, err error) int {
	if rep != nil {
		return rep.Status
	}
	var ue *Error
	if errors.As(err, &ue) && ue.Fault == FaultHTTP {
		return ue.Status
	}
	return 0
}

// HTTPFault is the error for an answer with HTTP status code and no JSON-RPC reply.
func HTTPFault(status int) *Error {
	return &Error{Fault: FaultHTTP, Status: status, Err: errors.New(http.StatusText(status))}
}

// ParseReply reads b as the upstream's answer to the request whose raw id is reqID. The error
// (a FaultReply *Error) says why it is not one; its reason never quotes the upstream's bytes.
func ParseReply(b []byte, reqID json.RawMessage) (*jsonrpc.Message, error) {
	m, err := jsonrpc.ParseChecked(b)
	if err != nil {
		return nil, &Error{Fault: FaultReply, Err: errors.New("not a JSON-RPC message")}
	}
	if err := CheckReply(m, reqID); err != nil {
		return nil, err
	}
	return m, nil
}

// CheckReply reports why m is not a usable answer to the request whose raw id is reqID
// (JSON-RPC 2.0 §5): not a response, another request's id, both or neither of result and
// error, a malformed error object, or invalid JSON inside. A well-formed error with a null id
// is accepted (§5: the server could not read the id). nil = usable.
func CheckReply(m *jsonrpc.Message, reqID json.RawMessage) error {
	fault := func(reason string) error { return &Error{Fault: FaultReply, Err: errors.New(reason)} }
	switch {
	case m.Kind != jsonrpc.KindResponse:
		return fault("a " + m.Kind.String() + " instead of a response")
	case m.Result != nil && m.Error != nil:
		return fault(`both "result" and "error"`)
	case m.Error != nil:
		if err := jsonrpc.CheckErrorObject(m.Error); err != nil {
			return fault(err.Error())
		}
		if string(m.ID) != "null" && !jsonrpc.SameID(m.ID, reqID) {
			return fault("the response is for another request id")
		}
	case !jsonrpc.SameID(m.ID, reqID):
		return fault("the response is for another request id")
	}
	// Parse checks the envelope only; a client that cannot decode the rest would never see
	// its answer, so the whole message must be JSON (what jsontext accepts with duplicate names
	// and invalid UTF-8 allowed). A message from ParseChecked, as every reply on the relay path
	// is, was checked in the scan that found its members; docs/PERFORMANCE.md, tools/list.
	if !m.ValidJSON() {
		return fault("the response is not valid JSON")
	}
	return nil
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

// acceptBoth is the Accept header a POST to a streamable HTTP endpoint must carry (spec
// 2025-11-25 transports: "The client MUST include an Accept header, listing both
// application/json and text/event-stream"); strict servers (go-sdk) answer 400 without it.
const acceptBoth = "application/json, text/event-stream"

// PostHeader is hdr (the session's Mcp-Session-Id and MCP-Protocol-Version, end-to-end
// headers) plus what every POST of the streamable HTTP transport carries: Accept and
// Content-Type.
func PostHeader(hdr http.Header) http.Header {
	h := hdr.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Accept", acceptBoth)
	h.Set("Content-Type", "application/json")
	return h
}

// answerWithin bounds one Post: an answer or a notification is acknowledged with 202 at once.
const answerWithin = 5 * time.Second

// Post sends a message that expects no JSON-RPC reply — a response to one of the upstream's
// server→client requests, a notification such as notifications/cancelled — with the
// transport's headers (PostHeader; hdr names the session and protocol version). Every such
// message Tollgate sends goes through here. The error says the upstream did not accept it
// (unreachable, or an HTTP status other than 2xx).
func (c *Client) Post(hdr http.Header, msg []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), answerWithin)
	defer cancel()
	resp, err := c.Send(ctx, http.MethodPost, PostHeader(hdr), msg)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxNonReply))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return HTTPFault(resp.StatusCode)
	}
	return nil
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
// An answer that is not a JSON-RPC response to this request is an *Error with a Fault; a
// well-formed JSON-RPC error (even under an HTTP error status) is a Reply whose Msg.Error is set.
func (c *Client) Call(ctx context.Context, hdr http.Header, body []byte, onOther func(*jsonrpc.Message)) (*Reply, error) {
	var reqID json.RawMessage
	if m, err := jsonrpc.Parse(body); err == nil {
		reqID = m.ID
	}
	resp, err := c.Send(ctx, http.MethodPost, PostHeader(hdr), body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	rep := &Reply{Header: resp.Header, Status: resp.StatusCode}
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	switch {
	case ok && IsEventStream(resp.Header):
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
				return nil, &Error{Fault: FaultStream, Err: fmt.Errorf("reading event stream: %w", err)}
			}
			if !ev.HasData || len(ev.Data) == 0 {
				continue
			}
			m, err := jsonrpc.ParseChecked(ev.Data)
			if err != nil {
				continue // not ours to judge; skip unparsable events
			}
			if m.Kind == jsonrpc.KindResponse {
				if err := CheckReply(m, reqID); err != nil {
					return nil, err
				}
				rep.Msg = m
				return rep, nil
			}
			if onOther != nil {
				onOther(m)
			}
		}
	case ok && IsJSON(resp.Header):
		b, err := io.ReadAll(io.LimitReader(resp.Body, c.maxReply+1))
		if err != nil {
			if ctx.Err() != nil {
				return nil, &Error{Timeout: true, Err: ctx.Err()}
			}
			return nil, &Error{Fault: FaultReply, Err: fmt.Errorf("reading the reply: %w", err)}
		}
		if int64(len(b)) > c.maxReply {
			return nil, &Error{Fault: FaultReply, Err: fmt.Errorf("reply exceeds %d bytes", c.maxReply)}
		}
		if rep.Msg, err = ParseReply(b, reqID); err != nil {
			return nil, err
		}
		return rep, nil
	default:
		m, err := ReadNonReply(resp, reqID)
		if err != nil {
			return nil, err
		}
		rep.Msg = m
		return rep, nil
	}
}

// maxNonReply bounds what is read of an answer that is not a JSON or SSE reply.
const maxNonReply = 64 << 10

// ReadNonReply judges an answer to the request reqID that is neither a 2xx JSON body nor a
// 2xx event stream: an HTTP error status carrying a well-formed JSON-RPC error response is
// returned as that message (the upstream's own error passes on); anything else is a fault —
// FaultHTTP for an error status, FaultReply for a 2xx answer without a reply (e.g. 202 to a
// request, which would leave the client waiting forever).
func ReadNonReply(resp *http.Response, reqID json.RawMessage) (*jsonrpc.Message, error) {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil, &Error{Fault: FaultReply, Err: fmt.Errorf("an HTTP %d answer without a JSON or event-stream body", resp.StatusCode)}
	}
	if IsJSON(resp.Header) {
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxNonReply))
		if err == nil {
			if m, err := ParseReply(b, reqID); err == nil && m.Error != nil {
				return m, nil
			}
		}
	}
	return nil, HTTPFault(resp.StatusCode)
}
