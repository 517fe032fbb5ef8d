// Package proxy is Tollgate's streamable-HTTP front end: it validates the HTTP exchange, reads
// one JSON-RPC message, asks the intercept router what to do, and either answers locally or
// relays the upstream's reply (JSON or SSE, flushed per event) with the client's id restored.
package proxy

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/era"
	"github.com/tollgate-mcp/tollgate/internal/intercept"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/limits"
	"github.com/tollgate-mcp/tollgate/internal/origin"
	"github.com/tollgate-mcp/tollgate/internal/session"
	"github.com/tollgate-mcp/tollgate/internal/sse"
	"github.com/tollgate-mcp/tollgate/internal/telemetry"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

// Options configure the handler.
type Options struct {
	Upstream       *upstream.Client
	Sessions       *session.Registry
	Router         *intercept.Router // nil = pure passthrough
	MaxBodyBytes   int64             // default 4 MiB
	RequestTimeout time.Duration     // until upstream response headers for non-streaming work; default 60s
	KeepAlive      time.Duration     // SSE comment interval while Tollgate holds a request; default 15s
	AllowedOrigins []string          // exact origins ("https://app.example.com") or "*"
	AllowedHosts   []string          // Host header values (host or host:port) or "*"
	ListenAddr     string            // its host is allowed as a Host header
	Logger         *slog.Logger
	Observer       Observer // nil = none
	// OnNotification, if set, sees every notification the upstream sends on a session's
	// server→client stream (for the session's event queue, tollgate_await_activity).
	OnNotification func(sess *session.Session, m *jsonrpc.Message)
	// BodyBudget bounds request-body bytes held at once (nil = unbounded).
	BodyBudget *limits.Budget
	// MaxStreams and MaxStreamsPerSession bound open GET streams (0 = unbounded).
	MaxStreams, MaxStreamsPerSession int
	// Identity, if set, returns the caller identity (server.identity_header) that names the
	// source of new sessions for their rate; "" falls back to the remote IP.
	Identity func(*http.Request) string
}

// Observer receives per-exchange measurements (metrics live elsewhere).
type Observer interface {
	Exchange(method, outcome string, d time.Duration)
	StreamOpened()
	StreamClosed()
	Limited(limit string) // a request refused by one of the Limit* limits
}

// Handler serves /mcp.
type Handler struct {
	o     Options
	log   *slog.Logger
	guard *origin.Guard // Host and Origin (DNS rebinding)

	closeOnce sync.Once
	closing   chan struct{} // closed on shutdown: long-lived streams and held requests end

	streams          streamSlots
	upstreamSessions atomic.Int32 // sessionsUnknown, sessionsIssued or sessionsNone
}

// New returns the /mcp handler.
func New(o Options) *Handler {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 4 << 20
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 60 * time.Second
	}
	if o.KeepAlive <= 0 {
		o.KeepAlive = 15 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Handler{o: o, log: o.Logger, closing: make(chan struct{}),
		guard: origin.New(origin.Options{ListenAddr: o.ListenAddr, AllowedHosts: o.AllowedHosts, AllowedOrigins: o.AllowedOrigins})}
	h.streams.max = int64(o.MaxStreams)
	return h
}

// Close ends open server→client streams and requests Tollgate holds (blocking tasks/result,
// sync_approval block) so a graceful shutdown is not held up by them; clients reconnect and
// ask again (their tasks live on). Plain in-flight requests are left to finish.
func (h *Handler) Close() { h.closeOnce.Do(func() { close(h.closing) }) }

// ServeHTTP implements the MCP streamable HTTP endpoint.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Spec 2025-11-25 transports: servers MUST validate Origin (DNS rebinding).
	if msg, ok := h.guard.Check(r); !ok {
		http.Error(w, msg, http.StatusForbidden)
		return
	}
	if r.Method != http.MethodPost && era.IsModern(r.Header.Get(upstream.HeaderProtocolVersion)) {
		// transports "Earlier Streamable HTTP Revisions": GET and DELETE are not part of the
		// modern transport; notifications come on subscriptions/listen.
		w.Header().Set("Allow", "POST")
		http.Error(w, "GET and DELETE are not part of protocol "+era.Modern+"; use subscriptions/listen", http.StatusMethodNotAllowed)
		return
	}
	switch r.Method {
	case http.MethodPost:
		h.post(w, r)
	case http.MethodGet:
		corr := correlationID(r)
		w.Header().Set("X-Request-Id", corr)
		var sess *session.Session
		if sid := r.Header.Get(upstream.HeaderSessionID); sid != "" {
			var ok bool
			if sess, ok = h.resolveSession(w, r, sid, corr); !ok {
				return
			}
		}
		h.get(w, r, sess)
	case http.MethodDelete:
		h.delete(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// correlationID reuses a sane X-Request-Id or makes one.
func correlationID(r *http.Request) string {
	if v := r.Header.Get("X-Request-Id"); v != "" && len(v) <= 64 && printable(v) {
		return v
	}
	return corrPrefix + strconv.FormatUint(corrSeq.Add(1), 36)
}

// Correlation ids are a per-process random prefix and a counter: unique, cheap, and not a
// secret (they appear in error replies and logs).
var (
	corrPrefix = func() string {
		var b [4]byte
		_, _ = rand.Read(b[:])
		return hex.EncodeToString(b[:]) + "-"
	}()
	corrSeq atomic.Uint64
)

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func (h *Handler) post(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	corr := correlationID(r)
	w.Header().Set("X-Request-Id", corr)
	body, taken, err := readBody(r.Body, r.ContentLength, h.o.MaxBodyBytes, h.o.BodyBudget)
	defer h.o.BodyBudget.Release(taken)
	if err != nil {
		switch {
		case errors.Is(err, errTooLarge):
			writeJSON(w, http.StatusRequestEntityTooLarge, jsonrpc.ErrorResponse(nil, jsonrpc.NewError(
				jsonrpc.CodeInvalidRequest, "RequestTooLarge",
				"Request body exceeds the limit of "+strconv.FormatInt(h.o.MaxBodyBytes, 10)+" bytes (server.max_body_bytes)",
				"correlation_id", corr)))
			h.observe("", "too_large", start)
		case errors.Is(err, errBusy):
			h.limited(LimitBodyBytes)
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusServiceUnavailable, jsonrpc.ErrorResponse(nil, jsonrpc.NewError(
				jsonrpc.CodeCapacityExceeded, "ServerBusy",
				"Too many request bodies in flight (server.limits.max_inflight_body_bytes); retry shortly",
				"correlation_id", corr)))
			h.observe("", "busy", start)
		default:
			http.Error(w, "reading request body: "+err.Error(), http.StatusBadRequest)
		}
		return
	}
	msg, err := jsonrpc.Parse(body)
	if err != nil {
		code, name := jsonrpc.CodeParseError, "ParseError"
		if errors.Is(err, jsonrpc.ErrBatch) {
			code, name = jsonrpc.CodeInvalidRequest, "BatchNotSupported"
		}
		writeJSON(w, http.StatusBadRequest, jsonrpc.ErrorResponse(nil, jsonrpc.NewError(code, name,
			"Invalid JSON-RPC message: "+err.Error(), "correlation_id", corr)))
		h.observe("", "invalid", start)
		return
	}
	// The era is decided per request (spec 2026-07-28 basic/versioning): a modern request is
	// checked here (headers against body, version) and never joins a legacy session.
	modern, rej := era.Classify(r.Header, msg)
	if rej != nil {
		writeJSON(w, rej.Status, jsonrpc.ErrorResponse(msg.ID, rej.Err.WithCorrelation(corr)))
		h.observe(msg.Method, rejectOutcome(rej.Err.Code), start)
		return
	}
	telemetry.Annotate(r.Context(), msg.Method)
	x := &intercept.Exchange{HTTP: r, Body: body, Msg: msg, CorrID: corr, Modern: modern}
	if modern == nil { // a modern request never joins a legacy session
		if sid := r.Header.Get(upstream.HeaderSessionID); sid != "" {
			var ok bool
			if x.Session, ok = h.resolveSession(w, r, sid, corr); !ok {
				h.observe(msg.Method, "unknown_session", start)
				return
			}
		}
		if intercept.OpensSession(msg) {
			var ok bool
			if x.Ticket, ok = h.admit(w, r, corr); !ok {
				h.observe(msg.Method, "limited", start)
				return
			}
			defer x.Ticket.Release()
		}
	}
	res := h.o.Router.Route(r.Context(), x)
	for k, v := range res.Header {
		w.Header()[k] = v
	}
	outcome := "ok"
	switch {
	case res.Reply != nil:
		writeJSON(w, cmp.Or(res.Status, http.StatusOK), res.Reply)
		if res.After != nil {
			_ = http.NewResponseController(w).Flush()
			res.After()
		}
		outcome = "local"
	case res.Wait != nil:
		h.wait(w, r, res.Wait)
		outcome = "local"
	case res.Accepted:
		w.WriteHeader(http.StatusAccepted)
		outcome = "local"
	default:
		outcome = h.forward(w, r, x, res.Forward)
	}
	h.observe(msg.Method, outcome, start)
}

func (h *Handler) observe(method, outcome string, start time.Time) {
	if h.o.Observer != nil {
		if method == "" {
			method = "invalid"
		}
		h.o.Observer.Exchange(method, outcome, time.Since(start))
	}
}

// rejectOutcome labels a request refused by the era checks.
func rejectOutcome(code int) string {
	switch code {
	case era.CodeUnsupportedVersion:
		return "unsupported_protocol"
	case era.CodeHeaderMismatch:
		return "header_mismatch"
	}
	return "invalid"
}

// wait answers a locally held request: SSE with keep-alive comments when the client accepts a
// stream, otherwise one JSON body at the end.
func (h *Handler) wait(w http.ResponseWriter, r *http.Request, fn func(context.Context, func([]byte) bool) []byte) {
	if !acceptsSSE(r) {
		writeJSON(w, http.StatusOK, fn(r.Context(), func([]byte) bool { return false }))
		return
	}
	done := make(chan []byte, 1)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	sw := newSSEWriter(w)
	sw.start(http.StatusOK)
	defer sw.close()
	emit := func(msg []byte) bool { return ctx.Err() == nil && sw.write(sse.Message(msg)) == nil }
	go func() { done <- fn(ctx, emit) }()
	t := time.NewTicker(h.o.KeepAlive)
	defer t.Stop()
	for {
		select {
		case msg := <-done:
			if msg != nil {
				sw.write(sse.Message(msg))
			}
			return
		case <-h.closing:
			cancel()
			<-done
			return
		case <-t.C:
			if sw.write(sse.Comment("keep-alive")) != nil {
				cancel()
				<-done
				return
			}
		}
	}
}

func acceptsSSE(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// forward relays x upstream and the reply back. It returns an outcome label.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, x *intercept.Exchange, f *intercept.Forward) string {
	if f.Promote != nil && f.Promote.After > 0 && x.Msg.Kind == jsonrpc.KindRequest {
		return h.forwardPromotable(w, r, x, f)
	}
	body := x.Body
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var timer *time.Timer
	var timedOut atomic.Bool
	expire := func() {
		timedOut.Store(true)
		cancel()
	}
	if f.Timeout > 0 {
		timer = time.AfterFunc(f.Timeout, expire)
		defer timer.Stop()
	}
	didTimeout := timedOut.Load
	// Other requests get server.request_timeout until the upstream's response headers: a
	// hung upstream cannot hold the connection, and a stream, once started, is never cut.
	var headerTimer *time.Timer
	if timer == nil && !f.NoHeaderTimeout {
		headerTimer = time.AfterFunc(h.o.RequestTimeout, expire)
		defer headerTimer.Stop()
	}

	hdr := outboundHeader(r.Header, x.Session)
	if x.Modern != nil {
		// transports "Earlier Streamable HTTP Revisions": no sessions, no resumption.
		hdr.Del(upstream.HeaderSessionID)
		hdr.Del(upstream.HeaderLastEventID)
	}
	if f.Replayable {
		upstream.MarkReplayable(hdr)
	}
	resp, err := h.o.Upstream.Send(ctx, http.MethodPost, hdr, body)
	if headerTimer != nil {
		headerTimer.Stop()
	}
	if err != nil {
		return h.upstreamFailed(w, x, f, err, didTimeout())
	}
	defer resp.Body.Close()

	h.sessionEnded(x.Session, resp.StatusCode)
	isRequest := x.Msg.Kind == jsonrpc.KindRequest
	restore := func(m *jsonrpc.Message) []byte {
		// The client's id first (rarely differs: only when the upstream re-encoded it), so the
		// transform's splice of a large result needs no second parse.
		if isRequest && !bytes.Equal(m.ID, x.Msg.ID) {
			if m2, err := jsonrpc.Parse(m.WithID(x.Msg.ID)); err == nil {
				m = m2
			}
		}
		if f.Transform != nil {
			if t := f.Transform(x, m); t != nil {
				return t
			}
		}
		return m.Raw
	}
	adopt := func() {
		if f.AdoptSession && x.Ticket != nil { // admitted in post
			h.adoptSession(resp.Header, x)
		}
	}

	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	switch {
	case ok && upstream.IsEventStream(resp.Header):
		adopt()
		sw := newSSEWriter(w)
		copyHeader(w.Header(), resp.Header)
		sw.start(resp.StatusCode)
		rd := sse.NewReader(resp.Body, 0)
		defer rd.Close()
		p := pending{x: x}
		for {
			ev, err := rd.Next()
			if err != nil {
				if didTimeout() && !p.answered && isRequest {
					sw.write(sse.Message(jsonrpc.ErrorResponse(x.Msg.ID, timeoutError(x, f))))
					return "timeout"
				}
				if r.Context().Err() != nil {
					return "client_gone"
				}
				if fault := p.ended(err); fault != nil {
					return h.faultEvent(sw, x, fault)
				}
				return "ok"
			}
			m, fault := p.check(ev)
			if fault != nil {
				return h.faultEvent(sw, x, fault)
			}
			if m != nil {
				if timer != nil {
					timer.Stop()
				}
				ev.Data = restore(m)
			}
			if sw.write(ev) != nil {
				return "client_gone"
			}
		}
	case ok && upstream.IsJSON(resp.Header):
		b, err := readReply(resp)
		if err != nil {
			if didTimeout() {
				writeJSON(w, http.StatusOK, jsonrpc.ErrorResponse(x.Msg.ID, timeoutError(x, f)))
				return "timeout"
			}
			return h.upstreamFailed(w, x, f, &upstream.Error{Fault: upstream.FaultReply, Err: err}, false)
		}
		if isRequest {
			m, err := upstream.ParseReply(b, x.Msg.ID)
			if err != nil {
				return h.upstreamFailed(w, x, f, err, false)
			}
			b = restore(m)
		}
		adopt()
		copyHeader(w.Header(), resp.Header)
		w.Header().Del("Content-Length")
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(b)
		return "ok"
	default:
		return h.relayNonReply(w, x, f, resp)
	}
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
	h.noteSessions(sid != "")
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

// get relays the server→client stream and injects Tollgate's own messages for the session.
func (h *Handler) get(w http.ResponseWriter, r *http.Request, sess *session.Session) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var stream *session.Stream
	if sess != nil {
		// Slots first, so a refused stream costs the upstream nothing.
		if !h.streams.acquire() {
			h.tooManyStreams(w, LimitStreams, "server.limits.max_streams")
			return
		}
		defer h.streams.release()
		var detach func()
		var ok bool
		if stream, detach, ok = sess.TryAttach(h.o.MaxStreamsPerSession); !ok {
			h.tooManyStreams(w, LimitSessionStreams, "server.limits.max_streams_per_session")
			return
		}
		defer detach()
	}

	var resp *http.Response
	if sess == nil || !sess.Local {
		var err error
		resp, err = h.o.Upstream.Send(ctx, http.MethodGet, outboundHeader(r.Header, sess), nil)
		if err != nil {
			http.Error(w, upstream.AsError(err).RPCError().Message, http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		h.sessionEnded(sess, resp.StatusCode)
		if !upstream.IsEventStream(resp.Header) && !(resp.StatusCode == http.StatusMethodNotAllowed && sess != nil) {
			copyHeader(w.Header(), resp.Header)
			w.WriteHeader(resp.StatusCode)
			_, _ = io.Copy(w, resp.Body)
			return
		}
		if !upstream.IsEventStream(resp.Header) {
			resp.Body.Close() // upstream has no GET stream; serve Tollgate's own below
			resp = nil
		}
	}
	if sess == nil { // no session and a non-stream answer was handled above
		http.Error(w, "Mcp-Session-Id required", http.StatusBadRequest)
		return
	}

	sw := newSSEWriter(w)
	if resp != nil {
		copyHeader(w.Header(), resp.Header)
		sw.start(resp.StatusCode)
	} else {
		sw.start(http.StatusOK)
	}
	if h.o.Observer != nil {
		h.o.Observer.StreamOpened()
		defer h.o.Observer.StreamClosed()
	}

	upstreamDone := make(chan struct{})
	if resp != nil {
		go func() {
			defer close(upstreamDone)
			rd := sse.NewReader(resp.Body, 0)
			defer rd.Close()
			for {
				ev, err := rd.Next()
				if err != nil || sw.write(ev) != nil {
					cancel()
					return
				}
				if h.o.OnNotification != nil && ev.HasData {
					if m, err := jsonrpc.Parse(ev.Data); err == nil && m.Kind == jsonrpc.KindNotification {
						h.o.OnNotification(sess, m)
					}
				}
			}
		}()
	}
	keep := time.NewTicker(h.o.KeepAlive)
	defer keep.Stop()
	for {
		select {
		case <-h.closing:
			cancel()
		case <-ctx.Done():
			if resp != nil {
				resp.Body.Close()
				<-upstreamDone
			}
			return
		case msg := <-stream.C:
			if sw.write(sse.Message(msg)) != nil {
				cancel()
			}
		case <-keep.C:
			if resp == nil && sw.write(sse.Comment("keep-alive")) != nil {
				cancel()
			}
		}
	}
}

func (h *Handler) delete(w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get(upstream.HeaderSessionID)
	sess := h.o.Sessions.Get(sid)
	if sess != nil && sess.Local {
		h.o.Sessions.Delete(sid)
		w.WriteHeader(http.StatusNoContent)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.o.RequestTimeout)
	defer cancel()
	resp, err := h.o.Upstream.Send(ctx, http.MethodDelete, outboundHeader(r.Header, sess), nil)
	if err != nil {
		http.Error(w, upstream.AsError(err).RPCError().Message, http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode < 300 && sid != "" {
		h.o.Sessions.Delete(sid)
	}
	copyHeader(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// maxReply bounds a JSON reply read whole (a large tools/list is about 0.5 MB).
const maxReply = 256 << 20

// readReply reads a JSON reply whole, sized by Content-Length when the upstream sent one (a
// 400 KB tools/list read with io.ReadAll would be copied a dozen times as the buffer grows).
func readReply(resp *http.Response) ([]byte, error) {
	if n := resp.ContentLength; n > 0 && n <= maxReply {
		b := make([]byte, n)
		if _, err := io.ReadFull(resp.Body, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxReply+1))
	if err == nil && len(b) > maxReply {
		err = fmt.Errorf("reply exceeds %d bytes", maxReply)
	}
	return b, err
}

func writeJSON(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
