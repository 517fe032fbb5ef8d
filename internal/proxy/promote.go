package proxy

import (
	"bytes"
	"context"
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
	resp *http.Response // headers arrived (first item of a stream)
	ev   *sse.Event     // an SSE event
	json []byte         // a whole JSON body
	err  error          // the exchange failed; last item
	end  bool           // the stream ended; last item
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
	restore := func(m *jsonrpc.Message) []byte { return m.WithID(x.Msg.ID) }
	for {
		select {
		case <-r.Context().Done():
			cancel()
			drain(items)
			return "client_gone"
		case <-deadline:
			cancel()
			drain(items)
			return h.answer(w, sw, jsonrpc.ErrorResponse(x.Msg.ID, timeoutError(x)), "timeout")
		case <-promote.C:
			reply, sink := f.Promote.Start(x)
			if reply == nil {
				continue // could not promote; keep relaying
			}
			go func() { // owned by the task: ends when the upstream answers, fails, or the TTL ends
				stop := time.AfterFunc(f.Promote.Bound, cancel)
				defer stop.Stop()
				defer cancel()
				collect(items, sink)
			}()
			return h.answer(w, sw, reply, "promoted")
		case it, ok := <-items:
			if !ok {
				cancel()
				return "ok"
			}
			switch {
			case it.err != nil:
				cancel()
				if sw != nil {
					return "upstream_unreachable"
				}
				return h.upstreamFailed(w, x, it.err, false)
			case it.end:
				cancel()
				return "ok"
			case it.json != nil:
				cancel()
				if m, err := jsonrpc.Parse(it.json); err == nil && m.Kind == jsonrpc.KindResponse {
					it.json = restore(m)
				}
				writeJSON(w, http.StatusOK, it.json)
				return "ok"
			case it.resp != nil:
				if upstream.IsEventStream(it.resp.Header) {
					sw = newSSEWriter(w)
					copyHeader(w.Header(), it.resp.Header)
					sw.start(it.resp.StatusCode)
					continue
				}
				// Neither JSON nor a stream (an HTTP error): relay it as it is.
				cancel()
				copyHeader(w.Header(), it.resp.Header)
				w.WriteHeader(it.resp.StatusCode)
				_, _ = io.Copy(w, it.resp.Body)
				it.resp.Body.Close()
				return "upstream_http_error"
			case it.ev != nil:
				if it.ev.HasData {
					if m, err := jsonrpc.Parse(it.ev.Data); err == nil && m.Kind == jsonrpc.KindResponse {
						it.ev.Data = restore(m)
						promote.Stop()
					}
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
	switch {
	case upstream.IsEventStream(resp.Header):
		if !send(upstreamItem{resp: resp}) {
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
					send(upstreamItem{err: &upstream.Error{Err: err}})
				}
				return
			}
			if !send(upstreamItem{ev: ev}) {
				return
			}
		}
	case upstream.IsJSON(resp.Header) && resp.StatusCode < 300:
		b, err := readReply(resp)
		if err != nil {
			send(upstreamItem{err: &upstream.Error{Err: err}})
			return
		}
		send(upstreamItem{json: b})
	default:
		// The consumer relays the body; keep it open until then by handing over the response
		// with a body it will close.
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body = io.NopCloser(bytes.NewReader(b))
		send(upstreamItem{resp: resp})
	}
}

// collect feeds the rest of a promoted exchange to its task.
func collect(items <-chan upstreamItem, sink intercept.PromotedSink) {
	defer drain(items)
	for it := range items {
		switch {
		case it.err != nil:
			var ue *upstream.Error
			if errors.As(it.err, &ue) {
				sink.Done(nil, ue.RPCError())
			} else {
				sink.Done(nil, (&upstream.Error{Err: it.err}).RPCError())
			}
			return
		case it.end:
			sink.Done(nil, (&upstream.Error{Err: io.ErrUnexpectedEOF}).RPCError())
			return
		case it.json != nil:
			m, err := jsonrpc.Parse(it.json)
			if err != nil {
				sink.Done(nil, (&upstream.Error{Err: err}).RPCError())
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
				sink.Done(m, nil)
				return
			}
			sink.Other(m)
		case it.resp != nil && !upstream.IsEventStream(it.resp.Header):
			b, _ := io.ReadAll(it.resp.Body)
			sink.Done(nil, (&upstream.Error{Err: errors.New("HTTP " + it.resp.Status + ": " + string(b))}).RPCError())
			return
		}
	}
	sink.Done(nil, (&upstream.Error{Timeout: true, Err: errors.New("no answer within the task's TTL")}).RPCError())
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
