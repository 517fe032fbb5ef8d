// Package proxy is Tollgate's streamable-HTTP front end: it validates the HTTP exchange, reads
// one JSON-RPC message, asks the intercept router what to do, and either answers locally or
// relays the upstream's reply (JSON or SSE, flushed per event) with the client's id restored.
package proxy

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/callerauth"
	"github.com/tollgate-mcp/tollgate/internal/identity"

	"github.com/tollgate-mcp/tollgate/internal/era"
	"github.com/tollgate-mcp/tollgate/internal/intercept"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/limits"
	"github.com/tollgate-mcp/tollgate/internal/origin"
	"github.com/tollgate-mcp/tollgate/internal/session"
	"github.com/tollgate-mcp/tollgate/internal/source"
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
	// Divert, if set, may take a notification the upstream sends on a session's
	// server→client stream instead of relaying it (true: taken, not written to the client).
	Divert func(sess *session.Session, m *jsonrpc.Message) bool
	// BodyBudget bounds request-body bytes held at once, and each source's share (nil =
	// unbounded).
	BodyBudget *limits.Budget
	// MaxStreams, MaxStreamsPerSource and MaxStreamsPerSession bound open GET streams in all,
	// of one source and of one session (0 = unbounded).
	MaxStreams, MaxStreamsPerSource, MaxStreamsPerSession int
	// Identity, if set, returns the caller identity (server.identity_header) that names the
	// source of new sessions for their rate ("" falls back to the remote IP) and the identity
	// a new session is bound to ("" binds it to no one). A verified caller (CallerAuth) is the
	// identity before it.
	Identity func(*http.Request) string
	// CallerAuth, if set, authenticates every request to /mcp before its body is read: the
	// verified caller goes into the request's context (identity.NewContext), a request
	// without one is refused 401/403 with the RFC 9728 challenge (server.caller_auth).
	CallerAuth *callerauth.Authenticator
	// ForwardAuthorization keeps the caller's Authorization header for the upstream when
	// CallerAuth verified it (sources[0].forward_authorization); otherwise the upstream never
	// sees the caller's token (MCP security best practices: no token passthrough).
	ForwardAuthorization bool
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
	// closed is done with closing, for waits that end through context.AfterFunc instead of
	// a goroutine watching closing.
	closed     context.Context
	closeCause context.CancelFunc

	streams streamSlots
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
	h.closed, h.closeCause = context.WithCancel(context.Background())
	h.streams.max = int64(o.MaxStreams)
	h.streams.perSource = o.MaxStreamsPerSource
	return h
}

// Close ends open server→client streams and requests Tollgate holds (blocking tasks/result,
// sync_approval block) so a graceful shutdown is not held up by them; clients reconnect and
// ask again (their tasks live on). Plain in-flight requests are left to finish.
func (h *Handler) Close() {
	h.closeOnce.Do(func() {
		close(h.closing)
		h.closeCause()
	})
}

// ServeHTTP implements the MCP streamable HTTP endpoint.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Spec 2025-11-25 transports: servers MUST validate Origin (DNS rebinding).
	if msg, ok := h.guard.Check(r); !ok {
		http.Error(w, msg, http.StatusForbidden)
		return
	}
	if a := h.o.CallerAuth; a != nil {
		c, f := a.Authenticate(r)
		if f != nil {
			h.refuseCaller(w, r, a, f)
			return
		}
		r = r.WithContext(identity.NewContext(r.Context(), c))
		if !h.o.ForwardAuthorization {
			r.Header.Del("Authorization") // never forwarded, captured or hashed past this point
		}
	}
	if r.Method == http.MethodGet || r.Method == http.MethodDelete {
		if rej := era.CheckHeaders(r.Header); rej != nil {
			corr := correlationID(r)
			w.Header().Set("X-Request-Id", corr)
			writeJSON(w, rej.Status, jsonrpc.ErrorResponse(nil, rej.Err.WithCorrelation(corr)))
			return
		}
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

// refuseCaller answers a request without a verified caller: 401 (no token, or an invalid
// one) or 403 (insufficient_scope) with the WWW-Authenticate challenge that names the
// resource metadata, in both eras (MCP authorization: the client starts its OAuth flow from
// it), and a JSON-RPC error body naming the reason. The token is never logged.
func (h *Handler) refuseCaller(w http.ResponseWriter, r *http.Request, a *callerauth.Authenticator, f *callerauth.Failure) {
	corr := correlationID(r)
	w.Header().Set("X-Request-Id", corr)
	w.Header().Set("WWW-Authenticate", a.Challenge(f))
	w.Header().Set("Cache-Control", "no-store")
	kv := []any{"reason", f.Reason, "resource_metadata", a.MetadataURL()}
	e := jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Unauthorized",
		"Tollgate requires a valid bearer token for "+a.Resource()+": "+f.Description, kv...)
	if f.Status == http.StatusForbidden {
		e = jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "InsufficientScope",
			"The bearer token lacks a scope Tollgate requires: "+f.Description, append(kv, "scope", f.Scope)...)
	}
	writeJSON(w, f.Status, jsonrpc.ErrorResponse(nil, e.WithCorrelation(corr)))
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
	src := h.source(r)
	// What the request opens further down (an upstream session or stdio process) is charged
	// to its source.
	r = r.WithContext(source.NewContext(r.Context(), src))
	share := h.o.BodyBudget.For(src) // one source may hold only its share
	body, taken, err := readBody(r.Body, r.ContentLength, h.o.MaxBodyBytes, share)
	defer share.Release(taken)
	if err != nil {
		switch {
		case errors.Is(err, errTooLarge):
			writeJSON(w, http.StatusRequestEntityTooLarge, jsonrpc.ErrorResponse(nil, jsonrpc.NewError(
				jsonrpc.CodeInvalidRequest, "RequestTooLarge",
				"Request body exceeds the limit of "+strconv.FormatInt(h.o.MaxBodyBytes, 10)+" bytes (server.max_body_bytes)",
				"correlation_id", corr)))
			h.observe("", "too_large", start)
		case errors.Is(err, errBusy):
			limit, msg := LimitBodyBytes, "Too many request bodies in flight (server.limits.max_inflight_body_bytes); retry shortly"
			if share.BySource {
				limit, msg = LimitSourceBytes, "Too many request bodies in flight from this client (server.limits.max_inflight_body_bytes_per_source); retry shortly"
			}
			h.limited(limit)
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusServiceUnavailable, jsonrpc.ErrorResponse(nil, jsonrpc.NewError(
				jsonrpc.CodeCapacityExceeded, "ServerBusy", msg, "correlation_id", corr)))
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
		if h.wait(w, r, res.Wait, res.Settles) && res.After != nil {
			res.After()
		}
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

func (h *Handler) delete(w http.ResponseWriter, r *http.Request) {
	sid := r.Header.Get(upstream.HeaderSessionID)
	sess, foreign := h.o.Sessions.GetAs(sid, h.identity(r))
	if foreign { // another identity's session: neither ended here nor upstream
		corr := correlationID(r)
		w.Header().Set("X-Request-Id", corr)
		h.foreignSession(w, corr)
		return
	}
	// Not held here: the store says whether this identity may end it (a session another
	// replica holds, bound to this identity or to no one). Another identity's session, or a
	// made-up id, gets 404 and is not sent upstream, where it would end the owner's upstream
	// session. When the store cannot answer, a session the upstream keeps is ended there as
	// before; one of Tollgate's own (tgs_) is not.
	var known bool
	if sess == nil && sid != "" && h.o.Sessions.HasBook() {
		var err error
		known, err = h.o.Sessions.Known(r.Context(), sid, h.identity(r))
		if !known && (err == nil || strings.HasPrefix(sid, session.LocalPrefix)) {
			corr := correlationID(r)
			w.Header().Set("X-Request-Id", corr)
			h.unknownSession(w, corr)
			return
		}
	}
	// The end is recorded for the other replicas (store.EndedSessions) when this process holds
	// the session or the store knows it, as ended by this request's identity: a replica still
	// holding it answers 404 from then on, unless it is bound to another identity.
	end := func() { h.o.Sessions.End(sid, h.identity(r), h.source(r), sess != nil || known) }
	if sess == nil && strings.HasPrefix(sid, session.LocalPrefix) {
		end() // minted by another replica (or before a restart): the upstream never knew it
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if sess != nil && sess.Local {
		end()
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
		end()
	}
	copyHeader(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

func writeJSON(w http.ResponseWriter, status int, b []byte) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	_, err := w.Write(b)
	return err
}
