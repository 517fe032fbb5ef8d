package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/intercept"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/sse"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

// upstreamItem is one thing read from a promotable upstream exchange.
type upstreamItem struct {
	resp   *http.Response // headers of an event stream (first item), or a whole other answer, buffered
	stream bool           // resp starts a 2xx event stream
	ev     *sse.Event     // an SSE event
	json   []byte         // a whole JSON body
	err    error          // the exchange failed; last item
	end    bool           // the stream ended; last item
}

// forwardPromotable relays a plain tools/call like forward does, but if no answer has
// arrived after Promote.After it answers the client with a task reference and lets the task
// collect the upstream's answer (tasks.promote_after). The upstream request therefore runs on
// a context detached from the client's, cancelled by the client only before promotion.
func (h *Handler) forwardPromotable(w http.ResponseWriter, r *http.Request, x *intercept.Exchange, f *intercept.Forward) string {
	body := x.Body
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	items := make(chan upstreamItem, 16)
	go h.readUpstream(ctx, outboundHeader(r.Header, x.Session), body, items)

	promote := time.NewTimer(f.Promote.After)
	defer promote.Stop()
	var deadline <-chan time.Time
	if f.Timeout > 0 {
		t := time.NewTimer(f.Timeout)
		defer t.Stop()
		deadline = t.C
	}
	var sw *sseWriter
	p := pending{x: x}
	for {
		select {
		case <-r.Context().Done():
			cancel()
			drain(items)
			return "client_gone"
		case <-deadline:
			cancel()
			drain(items)
			if p.answered {
				return "ok" // the stream stayed open after its answer
			}
			return h.answer(w, sw, jsonrpc.ErrorResponse(x.Msg.ID, timeoutError(x, f)), "timeout")
		case <-promote.C:
			reply, sink := f.Promote.Start(x)
			if reply == nil {
				continue // could not promote; keep relaying
			}
			go func() { // owned by the task: ends when the upstream answers, fails, or the TTL ends
				stop := time.AfterFunc(f.Promote.Bound, cancel)
				defer stop.Stop()
				defer cancel()
				collect(items, sink, x.Msg.ID)
			}()
			return h.answer(w, sw, reply, "promoted")
		case it, ok := <-items:
			if !ok {
				cancel()
				return "ok"
			}
			switch {
			case it.err != nil || it.end:
				cancel()
				if sw == nil {
					return h.upstreamFailed(w, x, f, it.err, false)
				}
				cause := it.err
				if it.end {
					cause = io.EOF
				}
				if fault := p.ended(cause); fault != nil {
					return h.faultEvent(sw, x, fault)
				}
				return "ok"
			case it.json != nil:
				cancel()
				m, err := upstream.ParseReply(it.json, x.Msg.ID)
				if err != nil {
					return h.upstreamFailed(w, x, f, err, false)
				}
				writeJSON(w, http.StatusOK, m.WithID(x.Msg.ID))
				return "ok"
			case it.resp != nil:
				if it.stream {
					sw = newSSEWriter(w)
					copyHeader(w.Header(), it.resp.Header)
					sw.start(it.resp.StatusCode)
					continue
				}
				cancel()
				defer it.resp.Body.Close()
				return h.relayNonReply(w, x, f, it.resp)
			case it.ev != nil:
				m, fault := p.check(it.ev)
				if fault != nil {
					cancel()
					drain(items)
					return h.faultEvent(sw, x, fault)
				}
				if m != nil {
					it.ev.Data = m.WithID(x.Msg.ID)
					promote.Stop()
				}
				if sw.write(it.ev) != nil {
					cancel()
					drain(items)
					return "client_gone"
				}
			}
		}
	}
}

// answer sends a final message as JSON, or as the last event of a stream already started.
func (h *Handler) answer(w http.ResponseWriter, sw *sseWriter, msg []byte, outcome string) string {
	if sw != nil {
		_ = sw.write(sse.Message(msg))
	} else {
		writeJSON(w, http.StatusOK, msg)
	}
	return outcome
}

// readUpstream performs the exchange and reports what arrives on items; it closes nothing the
// consumer owns and stops when ctx ends.
func (h *Handler) readUpstream(ctx context.Context, hdr http.Header, body []byte, items chan<- upstreamItem) {
	defer close(items)
	send := func(it upstreamItem) bool {
		select {
		case items <- it:
			return true
		case <-ctx.Done():
			return false
		}
	}
	resp, err := h.o.Upstream.Send(ctx, http.MethodPost, hdr, body)
	if err != nil {
		send(upstreamItem{err: err})
		return
	}
	defer resp.Body.Close()
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	switch {
	case ok && upstream.IsEventStream(resp.Header):
		if !send(upstreamItem{resp: resp, stream: true}) {
			return
		}
		rd := sse.NewReader(resp.Body, 0)
		defer rd.Close()
		for {
			ev, err := rd.Next()
			if err != nil {
				if errors.Is(err, io.EOF) {
					send(upstreamItem{end: true})
				} else {
					send(upstreamItem{err: &upstream.Error{Fault: upstream.FaultStream, Err: err}})
				}
				return
			}
			if !send(upstreamItem{ev: ev}) {
				return
			}
		}
	case ok && upstream.IsJSON(resp.Header):
		b, err := readReply(resp)
		if err != nil {
			send(upstreamItem{err: &upstream.Error{Fault: upstream.FaultReply, Err: err}})
			return
		}
		send(upstreamItem{json: b})
	default:
		// The consumer judges the answer (relayNonReply, ReadNonReply) after this function
		// has closed the body: hand it over buffered.
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body = io.NopCloser(bytes.NewReader(b))
		send(upstreamItem{resp: resp})
	}
}

// collect feeds the rest of a promoted exchange (request id reqID) to its task; an answer
// that is not a JSON-RPC reply to the request fails the task as it would fail a plain call.
func collect(items <-chan upstreamItem, sink intercept.PromotedSink, reqID json.RawMessage) {
	defer drain(items)
	fail := func(err error) {
		ue := upstream.AsError(err)
		sink.Done(nil, ue.RPCError())
	}
	for it := range items {
		switch {
		case it.err != nil:
			fail(it.err)
			return
		case it.end:
			fail(&upstream.Error{Fault: upstream.FaultStream, Err: io.ErrUnexpectedEOF})
			return
		case it.json != nil:
			if m, err := upstream.ParseReply(it.json, reqID); err != nil {
				fail(err)
			} else {
				sink.Done(m, nil)
			}
			return
		case it.ev != nil && it.ev.HasData:
			m, err := jsonrpc.Parse(it.ev.Data)
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

// drain discards the remaining items in the background so the reader can finish.
func drain(items <-chan upstreamItem) {
	go func() {
		for it := range items {
			if it.resp != nil {
				it.resp.Body.Close()
			}
		}
	}()
}
