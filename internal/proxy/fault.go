package proxy

import (
	"io"
	"net/http"

	"github.com/tollgate-mcp/tollgate/internal/intercept"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/sse"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

// An upstream that answers a forwarded request with something other than a JSON-RPC reply
// to it (an HTTP error page, garbage, a malformed error, another request's id, a stream that
// stops short) gets the client a JSON-RPC error for its request instead of the raw bytes:
// clients wait for a response with their id and would otherwise hang or choke, and error
// pages can carry internals. Well-formed replies, errors included, still pass byte for byte.

// pending follows one request's answer on an upstream event stream.
type pending struct {
	x        *intercept.Exchange
	answered bool   // the response to the request has been seen
	lastID   string // the last event id the upstream set ("" = the stream cannot be resumed)
}

// check inspects one event. For the response to the request it returns the message, or the
// fault that makes it unusable; for every other event (and once answered) nil, nil.
func (p *pending) check(ev *sse.Event) (*jsonrpc.Message, error) {
	p.note(ev)
	if p.answered || p.x.Msg.Kind != jsonrpc.KindRequest || !ev.HasData {
		return nil, nil
	}
	m, err := jsonrpc.ParseChecked(ev.Data) // CheckReply's well-formedness check is this scan
	if err != nil || m.Kind != jsonrpc.KindResponse {
		return nil, nil // notifications and server→client requests pass; so do events that are not JSON-RPC
	}
	if err := upstream.CheckReply(m, p.x.Msg.ID); err != nil {
		return nil, err
	}
	p.answered = true
	return m, nil
}

// note records the event id an event sets.
func (p *pending) note(ev *sse.Event) {
	if ev.HasID {
		p.lastID = ev.ID
	}
}

// ended returns the fault to report when the stream stopped (cause: the read error) while the
// request still waits for its response, or nil when nothing is owed. A stream whose last event
// set an id is resumable: spec 2025-11-25 (SEP-1699) lets a server close it before answering,
// and the client reconnects with Last-Event-ID (GET, relayed as is) to get the answer, so an
// invented error would contradict the real reply that follows.
func (p *pending) ended(cause error) error {
	if p.answered || p.x.Msg.Kind != jsonrpc.KindRequest || p.lastID != "" {
		return nil
	}
	return &upstream.Error{Fault: upstream.FaultStream, Err: cause}
}

// faultEvent ends a started stream with the JSON-RPC error for the request.
func (h *Handler) faultEvent(sw *sseWriter, x *intercept.Exchange, err error) string {
	e, outcome := h.faultError(x, err)
	_ = sw.write(sse.Message(jsonrpc.ErrorResponse(x.Msg.ID, e)))
	return outcome
}

// faultError logs a fault (never the upstream's bytes: they may hold tool output) and returns
// the client's error and the metrics outcome.
func (h *Handler) faultError(x *intercept.Exchange, err error) (*jsonrpc.Error, string) {
	ue := upstream.AsError(err)
	h.log.Warn("upstream request failed", "method", x.Msg.Method, "correlation_id", x.CorrID, "error", ue.Error())
	return ue.RPCError().WithCorrelation(x.CorrID), faultOutcome(ue)
}

func faultOutcome(ue *upstream.Error) string {
	switch {
	case ue.Timeout:
		return "timeout"
	case ue.Fault == upstream.FaultHTTP:
		return "upstream_http_error"
	case ue.Fault != upstream.NoFault:
		return "upstream_invalid_reply"
	}
	return "upstream_unreachable"
}

// relayNonReply answers x from an upstream answer that is neither a 2xx JSON body nor a 2xx
// event stream (an HTTP error, a 202 to a request, a body of another type).
func (h *Handler) relayNonReply(w http.ResponseWriter, x *intercept.Exchange, f *intercept.Forward, resp *http.Response) string {
	if x.Msg.Kind != jsonrpc.KindRequest && resp.StatusCode < 500 {
		// 202 for a notification or response, or the upstream refusing it: nothing to
		// correlate a JSON-RPC error with, and the status is the whole message.
		copyHeader(w.Header(), resp.Header)
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
		if resp.StatusCode >= 400 {
			return "upstream_http_error"
		}
		return "ok"
	}
	m, err := upstream.ReadNonReply(resp, x.Msg.ID)
	if err == nil {
		// The upstream's own JSON-RPC error under an HTTP error status passes on as it is.
		copyHeader(w.Header(), resp.Header)
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(m.WithID(x.Msg.ID))
		return "upstream_http_error"
	}
	if resp.StatusCode >= 400 && resp.StatusCode < 500 && x.Msg.Kind == jsonrpc.KindRequest {
		// A 4xx is a signal the client acts on (transport: 404 = the session ended, start a
		// new one; authorization: 401 with WWW-Authenticate): keep the status and headers,
		// replace only the body.
		e, outcome := h.faultError(x, err)
		copyHeader(w.Header(), resp.Header)
		w.Header().Del("Content-Encoding")
		writeJSON(w, resp.StatusCode, jsonrpc.ErrorResponse(x.Msg.ID, e))
		return outcome
	}
	return h.upstreamFailed(w, x, f, err, false)
}
