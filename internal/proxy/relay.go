package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/intercept"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/session"
	"github.com/tollgate-mcp/tollgate/internal/sse"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

// forward relays x upstream and the answer back, and returns an outcome label. Every forwarded
// exchange reads the upstream through one item stream (upstreamItems) and relays each item
// with relay.item; what differs is only how the items arrive.
//
// A plain exchange ranges over them on the handler's goroutine: no hand-off per request or
// event (a goroutine and channel per exchange cost the small passthrough about 10 %). Its
// timers cancel the upstream request with a cause, so when the stream fails the cause says
// whether a timer or the client ended it; nothing is guessed from the read error.
//
// A promotable call (Forward.Promote, tasks.promote_after) must act while the upstream is
// silent, so it selects on the items (readUpstream's channel) together with its timers. If it
// has no answer after Promote.After it is handed to its task: the client gets the task
// reference, and the rest of the items go to the task (collect). Its upstream request therefore
// runs on a context detached from the client's, which the client cancels only before
// promotion; every other upstream request ends with the client's.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, x *intercept.Exchange, f *intercept.Forward) string {
	hdr := outboundHeader(r.Header, x.Session)
	if x.Modern != nil {
		// transports "Earlier Streamable HTTP Revisions": no sessions, no resumption.
		hdr.Del(upstream.HeaderSessionID)
		hdr.Del(upstream.HeaderLastEventID)
	}
	if f.Replayable {
		upstream.MarkReplayable(hdr)
	}
	rl := &relay{h: h, w: w, x: x, f: f, p: pending{x: x}}
	if f.Promote != nil && f.Promote.After > 0 && x.Msg.Kind == jsonrpc.KindRequest {
		return rl.promotable(r, hdr)
	}
	return rl.plain(r, hdr)
}

// Why a plain exchange's upstream request was cancelled (context.Cause).
var (
	errForwardTimeout = errors.New("proxy: Forward.Timeout passed")
	errHeaderTimeout  = errors.New("proxy: no response headers within server.request_timeout")
)

// plain relays an exchange that cannot be promoted.
func (rl *relay) plain(r *http.Request, hdr http.Header) string {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	// Forward.Timeout bounds the wait for the response message. Other requests get
	// server.request_timeout until the upstream's response headers: a hung upstream cannot
	// hold the connection, and a stream, once started, is never cut.
	var deadline, headers *time.Timer
	if rl.f.Timeout > 0 {
		deadline = time.AfterFunc(rl.f.Timeout, func() { cancel(errForwardTimeout) })
		defer deadline.Stop()
	} else if !rl.f.NoHeaderTimeout {
		headers = time.AfterFunc(rl.h.o.RequestTimeout, func() { cancel(errHeaderTimeout) })
		defer headers.Stop()
	}
	timedOut := func() bool {
		c := context.Cause(ctx)
		return c == errForwardTimeout || c == errHeaderTimeout
	}

	outcome := "ok"
	for it := range rl.h.upstreamItems(ctx, hdr, rl.x.Body) {
		if it.resp != nil {
			if headers != nil {
				headers.Stop() // the headers are in
			}
			rl.h.sessionEnded(rl.x.Session, it.resp.StatusCode)
		}
		if it.err != nil {
			if timedOut() && !rl.p.answered {
				return rl.timedOut()
			}
			if r.Context().Err() != nil {
				return "client_gone"
			}
		}
		var done bool
		outcome, done = rl.item(it)
		if rl.f.Transform == nil && rl.f.Memo == nil {
			// Written and referenced nowhere else (no Transform, no memo, not a promotable
			// exchange whose task keeps the answer): the buffer serves the next large reply.
			if it.ev != nil {
				sse.Recycle(it.ev)
			} else if it.json != nil {
				recycleReply(it.json)
			}
		}
		if rl.p.answered && deadline != nil {
			deadline.Stop()
		}
		if done {
			if it.ownsBody() {
				it.resp.Body.Close()
			}
			break
		}
	}
	return outcome
}

// promotable relays a call that may be handed to a task.
func (rl *relay) promotable(r *http.Request, hdr http.Header) string {
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	handedOver := false
	items := make(chan upstreamItem, 16)
	defer func() {
		if !handedOver {
			cancel()
			drain(items)
		}
	}()
	go rl.h.readUpstream(ctx, hdr, rl.x.Body, items)

	var deadline <-chan time.Time
	if rl.f.Timeout > 0 {
		t := time.NewTimer(rl.f.Timeout)
		defer t.Stop()
		deadline = t.C
	}
	t := time.NewTimer(rl.f.Promote.After)
	defer t.Stop()
	promote := t.C
	for {
		select {
		case <-r.Context().Done():
			return "client_gone"
		case <-deadline:
			return rl.timedOut()
		case <-promote:
			reply, sink := rl.f.Promote.Start(rl.x)
			if reply == nil {
				promote = nil
				continue // could not promote; keep relaying
			}
			handedOver = true
			go func() { // owned by the task: ends when the upstream answers, fails, or the TTL ends
				stop := time.AfterFunc(rl.f.Promote.Bound, cancel)
				defer stop.Stop()
				defer cancel()
				collect(items, sink, rl.x.Msg.ID)
			}()
			return rl.answer(reply, "promoted")
		case it, ok := <-items:
			if !ok {
				return "ok"
			}
			if it.resp != nil {
				rl.h.sessionEnded(rl.x.Session, it.resp.StatusCode)
			}
			outcome, done := rl.item(it)
			if rl.p.answered {
				deadline, promote = nil, nil
			}
			if done {
				if it.ownsBody() {
					it.resp.Body.Close()
				}
				return outcome
			}
		}
	}
}

// relay is the state of one forwarded exchange toward the client.
type relay struct {
	h  *Handler
	w  http.ResponseWriter
	x  *intercept.Exchange
	f  *intercept.Forward
	sw *sseWriter // the client's event stream, once the upstream started one
	p  pending
}

// item relays one item of the upstream exchange; done reports that the exchange is over.
func (rl *relay) item(it upstreamItem) (outcome string, done bool) {
	x, isRequest := rl.x, rl.x.Msg.Kind == jsonrpc.KindRequest
	switch {
	case it.end:
		if fault := rl.p.ended(it.err); fault != nil {
			return rl.h.faultEvent(rl.sw, x, fault), true
		}
		return "ok", true
	case it.err != nil:
		return rl.h.upstreamFailed(rl.w, x, rl.f, it.err, false), true
	case it.stream:
		rl.adopt(it.resp.Header)
		rl.sw = newSSEWriter(rl.w)
		copyHeader(rl.w.Header(), it.resp.Header)
		rl.sw.start(it.resp.StatusCode)
		return "", false
	case it.json != nil:
		b := it.json
		if pre, post, ok := rl.remembered(b); ok {
			rl.adopt(it.resp.Header)
			copyHeader(rl.w.Header(), it.resp.Header)
			rl.w.Header().Del("Content-Length")
			rl.w.WriteHeader(it.resp.StatusCode)
			_, _ = rl.w.Write(pre) // three writes, no copy of a large reply
			_, _ = rl.w.Write(x.Msg.ID)
			_, _ = rl.w.Write(post)
			return "ok", true
		}
		if isRequest {
			m, err := upstream.ParseReply(b, x.Msg.ID)
			if err != nil {
				return rl.h.upstreamFailed(rl.w, x, rl.f, err, false), true
			}
			b = rl.restore(m)
		}
		rl.adopt(it.resp.Header)
		copyHeader(rl.w.Header(), it.resp.Header)
		rl.w.Header().Del("Content-Length")
		rl.w.WriteHeader(it.resp.StatusCode)
		_, _ = rl.w.Write(b)
		return "ok", true
	case it.resp != nil: // the caller closes the body
		return rl.h.relayNonReply(rl.w, x, rl.f, it.resp), true
	case it.ev != nil:
		if it.ev.HasData && !rl.p.answered {
			if pre, post, ok := rl.remembered(it.ev.Data); ok {
				rl.p.note(it.ev)
				rl.p.answered = true
				it.ev.Data = slices.Concat(pre, x.Msg.ID, post)
				if rl.sw.write(it.ev) != nil {
					return "client_gone", true
				}
				return "", false
			}
		}
		m, fault := rl.p.check(it.ev)
		if fault != nil {
			return rl.h.faultEvent(rl.sw, x, fault), true
		}
		if m != nil {
			it.ev.Data = rl.restore(m)
		}
		if rl.sw.write(it.ev) != nil {
			return "client_gone", true
		}
	}
	return "", false
}

// remembered returns what to send, around the client's id, for a reply the Forward's memo
// has answered before (Forward.Memo); ok false when there is none.
func (rl *relay) remembered(b []byte) (pre, post []byte, ok bool) {
	if rl.f.Memo == nil || rl.x.Msg.Kind != jsonrpc.KindRequest {
		return nil, nil, false
	}
	return rl.f.Memo.Memo.Lookup(rl.f.Memo.Tag, b, rl.x.Msg.ID)
}

// restore gives the response message (a checked reply) the client's id and applies the
// Transform; with a Forward.Memo, the result is remembered for the same reply next time.
func (rl *relay) restore(m *jsonrpc.Message) []byte {
	reply := m
	// The client's id first (rarely differs: only when the upstream re-encoded it), so the
	// transform's splice of a large result needs no second parse.
	if !bytes.Equal(m.ID, rl.x.Msg.ID) {
		if m2, err := jsonrpc.Parse(m.WithID(rl.x.Msg.ID)); err == nil {
			m = m2
		}
	}
	out := m.Raw
	if rl.f.Transform != nil {
		if t := rl.f.Transform(rl.x, m); t != nil {
			out = t
		}
	}
	if ms := rl.f.Memo; ms != nil {
		ms.Memo.Store(ms.Gen, ms.Tag, reply, out)
	}
	return out
}

// adopt records the session an exchange that opens one (initialize, admitted in post) got.
func (rl *relay) adopt(respHdr http.Header) {
	if rl.f.AdoptSession && rl.x.Ticket != nil {
		rl.h.adoptSession(respHdr, rl.x)
	}
}

// timedOut answers a request whose upstream did not answer in time.
func (rl *relay) timedOut() string {
	if rl.sw == nil {
		return rl.h.upstreamFailed(rl.w, rl.x, rl.f, &upstream.Error{Timeout: true, Err: context.DeadlineExceeded}, true)
	}
	return rl.answer(jsonrpc.ErrorResponse(rl.x.Msg.ID, timeoutError(rl.x, rl.f)), "timeout")
}

// answer sends a final message as JSON, or as the last event of a stream already started.
func (rl *relay) answer(msg []byte, outcome string) string {
	if rl.sw != nil {
		_ = rl.sw.write(sse.Message(msg))
	} else {
		writeJSON(rl.w, http.StatusOK, msg)
	}
	return outcome
}

func timeoutError(x *intercept.Exchange, f *intercept.Forward) *jsonrpc.Error {
	return jsonrpc.NewError(jsonrpc.CodeUpstreamTimeout, "UpstreamTimeout",
		"Upstream MCP server did not answer "+x.Msg.Method+" in time ("+f.TimeoutSetting+")",
		"correlation_id", x.CorrID)
}

// adoptSession records the session the upstream assigned, or mints a local one when the
// upstream runs without sessions (tasks need an owner).
func (h *Handler) adoptSession(respHdr http.Header, x *intercept.Exchange) {
	sid := respHdr.Get(upstream.HeaderSessionID)
	if sid == "" {
		sid = session.NewLocalID()
		respHdr.Set(upstream.HeaderSessionID, sid)
	}
	x.Session = x.Ticket.Adopt(sid)
}

// upstreamFailed answers x with the JSON-RPC error for a failed exchange: no answer at all,
// or an answer that was not a reply (an *upstream.Error with a Fault).
func (h *Handler) upstreamFailed(w http.ResponseWriter, x *intercept.Exchange, f *intercept.Forward, err error, timedOut bool) string {
	if x.HTTP.Context().Err() != nil {
		return "client_gone"
	}
	ue := upstream.AsError(err)
	if timedOut && !ue.Timeout {
		ue = &upstream.Error{Timeout: true, Err: ue.Err}
	}
	e, outcome := h.faultError(x, ue)
	if ue.Timeout {
		e = timeoutError(x, f)
	}
	status := http.StatusOK
	if x.Msg.Kind != jsonrpc.KindRequest {
		status = http.StatusBadGateway // nothing to correlate a JSON-RPC error with
	}
	writeJSON(w, status, jsonrpc.ErrorResponse(x.Msg.ID, e))
	return outcome
}

// collect feeds the rest of a promoted exchange (request id reqID) to its task; an answer
// that is not a JSON-RPC reply to the request fails the task as it would fail a plain call.
func collect(items <-chan upstreamItem, sink intercept.PromotedSink, reqID json.RawMessage) {
	defer drain(items)
	fail := func(err error) { sink.Done(nil, upstream.AsError(err).RPCError()) }
	for it := range items {
		switch {
		case it.end:
			cause := it.err
			if errors.Is(cause, io.EOF) {
				cause = io.ErrUnexpectedEOF
			}
			fail(&upstream.Error{Fault: upstream.FaultStream, Err: cause})
			return
		case it.err != nil:
			fail(it.err)
			return
		case it.json != nil:
			if m, err := upstream.ParseReply(it.json, reqID); err != nil {
				fail(err)
			} else {
				sink.Done(m, nil)
			}
			return
		case it.ev != nil && it.ev.HasData:
			m, err := jsonrpc.ParseChecked(it.ev.Data)
			if err != nil {
				continue
			}
			if m.Kind == jsonrpc.KindResponse {
				if err := upstream.CheckReply(m, reqID); err != nil {
					fail(err)
				} else {
					sink.Done(m, nil)
				}
				return
			}
			sink.Other(m)
		case it.resp != nil && !it.stream:
			m, err := upstream.ReadNonReply(it.resp, reqID)
			it.resp.Body.Close()
			if err != nil {
				fail(err)
			} else {
				sink.Done(m, nil)
			}
			return
		}
	}
	fail(&upstream.Error{Timeout: true, Err: errors.New("no answer within the task's TTL or tasks.execution_timeout")})
}
