// Package intercept is the seam between the transport (package proxy) and governance: one
// handler per JSON-RPC method Tollgate must change (initialize, tools/list, tools/call, tasks/*).
// Every other message is forwarded untouched.
package intercept

import (
	"bytes"
	"context"
	"net/http"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/era"
	"github.com/tollgate-mcp/tollgate/internal/identity"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/session"
)

// Exchange is one client POST carrying one JSON-RPC message.
type Exchange struct {
	HTTP    *http.Request
	Body    []byte
	Msg     *jsonrpc.Message
	Session *session.Session // nil until the session is known (initialize)
	// Ticket is the room the proxy reserved for the session an initialize creates
	// (server.limits): whoever learns the session id adopts it with Ticket.Adopt.
	Ticket *session.Ticket
	CorrID string
	// Subject is the caller's authenticated identity (server.identity_header), "" if unknown.
	Subject string
	// Caller is the verified caller (server.caller_auth), nil without one; Subject is its
	// subject then.
	Caller *identity.Caller
	// Modern is set for a protocol 2026-07-28 request (package era): no session, the era's
	// handlers serve it.
	Modern *era.Request
	// Owner owns the tasks of a modern request (set with Subject; see modernOwner).
	Owner string

	// written runs once the answer to this exchange has been written (Result.After): it
	// records a task outcome as delivered only when it went out (onWritten).
	written []func()
}

// onWritten has fn run once the answer to x (its Reply, or what its Wait returns) has been
// written to the client. Called by a handler or its Wait, on the exchange's goroutine.
func (x *Exchange) onWritten(fn func()) { x.written = append(x.written, fn) }

// Result says how the proxy answers an exchange. Exactly one of Reply, Wait or Forward is set.
type Result struct {
	// Reply is a complete JSON-RPC message answered locally.
	Reply []byte
	// Header holds response headers for a Reply or Wait (e.g. the Mcp-Session-Id of a session
	// Tollgate opens itself).
	Header http.Header
	// Status is the HTTP status of Reply; 0 means 200. The modern era answers some errors
	// with 400 or 404 (era.HTTPStatus).
	Status int
	// Wait produces a local answer that may take long (tasks/result, sync_approval block);
	// the proxy keeps the connection alive meanwhile. It returns the JSON-RPC message to send.
	// emit sends a message ahead of the answer on the same SSE stream (a server→client
	// request such as elicitation/create); it reports false when the client did not accept a
	// stream or has gone.
	Wait func(ctx context.Context, emit func(msg []byte) bool) []byte
	// Settles says Wait answers when Tollgate shuts down: its ctx then ends with the cause
	// ErrShuttingDown and the message it returns is sent (a held call's "call again" result).
	// Other waits end without an answer then.
	Settles bool
	// Accepted answers 202 with no body: a client's response to a request Tollgate sent.
	Accepted bool
	// Forward sends the request upstream.
	Forward *Forward
	// After, if set, runs once the Reply, or the message Wait returned, has been written (e.g.
	// start a task only after the client has its id, so status notifications never precede
	// the CreateTaskResult; record a task outcome as delivered). Not run when a Wait returned
	// nothing or its client was gone.
	After func()
}

// Forward describes an upstream exchange.
type Forward struct {
	Timeout time.Duration // until the response message arrives; 0 = none
	// Transform edits the upstream's response message to this request (nil = unchanged). It
	// runs after Exchange.Session is set from the response headers. Returning nil keeps the
	// message as it was.
	Transform func(x *Exchange, resp *jsonrpc.Message) []byte
	// Promote, when set, turns a call that outlives Promote.After into a Tollgate task
	// (tasks.promote_after): the client is answered at once and the upstream's answer is
	// collected in the background.
	Promote *Promotion
	// Memo, when set, remembers the transformed answers to this kind of request: a reply seen
	// before (byte for byte but its id) is answered from it without parse, check or Transform.
	Memo *MemoSlot

	// How the exchange travels. Router.Route sets these from the method, so handlers leave
	// them alone and the proxy needs no method names.

	// Replayable lets the transport resend the request once on a fresh connection when a
	// pooled one turns out dead (upstream.MarkReplayable); never for tools/call, whose tool
	// must not run twice.
	Replayable bool
	// NoHeaderTimeout exempts the exchange from server.request_timeout, which otherwise bounds
	// the wait for the upstream's response headers of a request without Timeout: tasks/result
	// blocks upstream by design, and only requests are answered.
	NoHeaderTimeout bool
	// AdoptSession says the upstream's answer names the session this exchange opens
	// (initialize): the proxy adopts it with Exchange.Ticket.
	AdoptSession bool
	// TimeoutSetting names the setting that bounded the wait, for the UpstreamTimeout error.
	TimeoutSetting string
}

// MemoSlot is where a Forward's transformed reply is looked up and stored: Tag names
// everything the Transform's output depends on besides the reply bytes, Gen is the memo's
// generation when the request arrived (jsonrpc.ReplyMemo).
type MemoSlot struct {
	Memo *jsonrpc.ReplyMemo
	Gen  uint64
	Tag  string
}

// OpensSession reports whether m opens a legacy session (an initialize request): the proxy
// reserves room for the session (Exchange.Ticket) before routing it.
func OpensSession(m *jsonrpc.Message) bool {
	return m.Kind == jsonrpc.KindRequest && m.Method == "initialize"
}

// transport returns a copy of f with the transport fields set for x's method.
func transport(x *Exchange, f *Forward) *Forward {
	t := *f
	isRequest := x.Msg.Kind == jsonrpc.KindRequest
	t.Replayable = x.Msg.Method != "tools/call"
	t.NoHeaderTimeout = !isRequest || x.Msg.Method == "tasks/result"
	t.AdoptSession = OpensSession(x.Msg)
	t.TimeoutSetting = "server.request_timeout"
	if x.Msg.Method == "tools/call" {
		t.TimeoutSetting = "TOLLGATE_SYNC_FORWARD_TIMEOUT_SECS"
	}
	return &t
}

// Promotion hands a slow exchange over to a task.
type Promotion struct {
	After time.Duration
	Bound time.Duration // how long the upstream may take after promotion (the task's TTL)
	// Start creates the task. It returns the JSON-RPC message to answer the client with now,
	// and a sink for what the upstream sends afterwards; nil reply = do not promote.
	Start func(x *Exchange) (reply []byte, sink PromotedSink)
}

// PromotedSink receives the rest of a promoted exchange.
type PromotedSink interface {
	// Other is a message the upstream sent before its answer (server→client requests are
	// kept for the caller as pending items).
	Other(msg *jsonrpc.Message)
	// Done delivers the upstream's answer, or the failure to get one.
	Done(resp *jsonrpc.Message, err *jsonrpc.Error)
}

// Passthrough forwards the client's bytes as they are.
var Passthrough = Result{Forward: &Forward{}}

// ReplyError answers x locally with a JSON-RPC error carrying the correlation id.
func ReplyError(x *Exchange, e *jsonrpc.Error) Result {
	return Result{Reply: jsonrpc.ErrorResponse(x.Msg.ID, e.WithCorrelation(x.CorrID))}
}

// ReplyResult answers x locally with a result.
func ReplyResult(x *Exchange, result []byte) Result {
	return Result{Reply: jsonrpc.ResultResponse(x.Msg.ID, result)}
}

// Handler serves one intercepted method.
type Handler func(ctx context.Context, x *Exchange) Result

// Router maps request methods to handlers.
type Router struct {
	handlers  map[string]Handler
	respIDs   []byte // prefix (as JSON, with the opening quote) of ids Tollgate gives its own requests
	responses Handler
	modern    map[string]Handler // protocol 2026-07-28 requests by method
	modernAny Handler            // modern requests of any other method
	// legacy, if set, may replace the result of every legacy-era message (a modern-only
	// upstream: see Gateway.reverseBridge).
	legacy func(ctx context.Context, x *Exchange, r Result) Result
}

// FilterLegacy sets the filter every legacy-era message's result passes through.
func (r *Router) FilterLegacy(f func(ctx context.Context, x *Exchange, r Result) Result) {
	r.legacy = f
}

// HandleResponses routes clients' responses whose string id starts with prefix — answers to
// server→client requests Tollgate itself sent — to h instead of the upstream.
func (r *Router) HandleResponses(prefix string, h Handler) {
	r.respIDs, r.responses = []byte(`"`+prefix), h
}

// NewRouter returns an empty router (everything passes through).
func NewRouter() *Router { return &Router{handlers: map[string]Handler{}} }

// Handle registers h for requests with the given method.
func (r *Router) Handle(method string, h Handler) { r.handlers[method] = h }

// HandleModern registers h for modern-era requests with the given method; method "" is the
// handler for every other modern request.
func (r *Router) HandleModern(method string, h Handler) {
	if method == "" {
		r.modernAny = h
		return
	}
	if r.modern == nil {
		r.modern = map[string]Handler{}
	}
	r.modern[method] = h
}

// Route picks the handler for x; other requests, notifications and responses pass through.
// A forwarded exchange's Forward carries its transport fields.
func (r *Router) Route(ctx context.Context, x *Exchange) Result {
	res := r.route(ctx, x)
	if res.Forward != nil {
		res.Forward = transport(x, res.Forward)
	}
	// A Wait registers its hooks while it runs, a Reply's handler before it returned.
	if res.Wait != nil || (res.Reply != nil && len(x.written) > 0) {
		after := res.After
		res.After = func() {
			if after != nil {
				after()
			}
			for _, fn := range x.written {
				fn()
			}
		}
	}
	return res
}

func (r *Router) route(ctx context.Context, x *Exchange) Result {
	if r == nil {
		return Passthrough
	}
	if x.Modern != nil && x.Msg.Kind == jsonrpc.KindRequest {
		if h, ok := r.modern[x.Msg.Method]; ok {
			return h(ctx, x)
		}
		if r.modernAny != nil {
			return r.modernAny(ctx, x)
		}
		return Passthrough
	}
	res := r.routeLegacy(ctx, x)
	if r.legacy != nil {
		res = r.legacy(ctx, x, res)
	}
	return res
}

func (r *Router) routeLegacy(ctx context.Context, x *Exchange) Result {
	switch x.Msg.Kind {
	case jsonrpc.KindRequest:
		if h, ok := r.handlers[x.Msg.Method]; ok {
			return h(ctx, x)
		}
	case jsonrpc.KindNotification:
		_, legacy := r.handlers[x.Msg.Method]
		if _, modern := r.modern[x.Msg.Method]; legacy || modern {
			return refuseNotification(x)
		}
	case jsonrpc.KindResponse:
		if r.responses != nil && bytes.HasPrefix(x.Msg.ID, r.respIDs) {
			return r.responses(ctx, x)
		}
	}
	return Passthrough
}

// refuseNotification answers a governed method sent without an id (or with id null). Passing it
// on as a notification would run a tools/call no rule saw; dropping it silently with 202 would
// hide the mistake. A notification gets no JSON-RPC response by spec (JSON-RPC 2.0 §4.1), so
// the refusal travels as HTTP 400 whose body is a -32600 error with id null.
func refuseNotification(x *Exchange) Result {
	r := ReplyError(x, jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "IdRequired",
		"Invalid Request: "+x.Msg.Method+" must be sent as a request with an id (not a notification, not id null); Tollgate governs it and never forwards it unchecked",
		"method", x.Msg.Method))
	r.Status = http.StatusBadRequest
	return r
}
