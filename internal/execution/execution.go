// Package execution owns running the calls of approved and promoted tasks upstream: it is the
// tasks.Executor, and keeps the registry of promoted calls (Promotions). The task manager
// decides when a task runs (at most once); intercept decides per method which task is made.
package execution

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/session"
	"github.com/tollgate-mcp/tollgate/internal/source"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

// Options are what the Runner needs.
type Options struct {
	Upstream   *upstream.Client
	Sessions   *session.Registry
	Promotions *Promotions
	// Modern runs t the 2026-07-28 way when it reports ok: a task a modern caller created,
	// or any task while the upstream speaks only that era (the bridge session lives in
	// intercept). Nil = never.
	Modern func(ctx context.Context, t *tasks.Task) (res json.RawMessage, rpcErr *jsonrpc.Error, ok bool)
}

// Runner executes tasks' calls (tasks.Executor).
type Runner struct{ o Options }

// New returns a Runner.
func New(o Options) *Runner {
	if o.Promotions == nil {
		o.Promotions = NewPromotions()
	}
	return &Runner{o: o}
}

// Execute runs an approved task's call upstream with the caller's session and headers; a
// promoted task waits for the call already in flight instead (tasks.promote_after).
func (r *Runner) Execute(ctx context.Context, t *tasks.Task) (json.RawMessage, *jsonrpc.Error) {
	// An upstream session or process opened for the call is charged to the task's creator.
	ctx = source.NewContext(ctx, t.Source)
	if t.Promoted {
		// The call is the client's, already in flight; the upstream's questions on its stream
		// after the promotion go to the task's owner like an approved call's.
		relay := NewRelay(ctx, r.o.Upstream)
		defer relay.Close()
		hdr := CallerHeaders(t.Headers, t.SessionID)
		return r.o.Promotions.await(ctx, t.ID, func(m *jsonrpc.Message) { relay.Handle(hdr, m, nil) })
	}
	if r.o.Modern != nil {
		if res, rpcErr, ok := r.o.Modern(ctx, t); ok {
			return res, rpcErr
		}
	}
	// Tollgate asks for the call's progress under a token of its own: whoever follows the task
	// gets it under theirs (tasks.NoteFrom; spec 2025-11-25 basic/utilities/progress).
	params, err := json.Marshal(struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments,omitempty"`
		Meta      map[string]any  `json:"_meta"`
	}{t.Tool, t.Arguments, map[string]any{"progressToken": tasks.ProgressToken(t.ID)}})
	if err != nil {
		return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "ExecutionFailed", "Encoding the call failed")
	}
	if r.o.Sessions.Ended(t.SessionID) {
		return nil, sessionGone(t)
	}
	// Ended through another replica sharing the store (it records the end): the same.
	if s := r.o.Sessions.Peek(t.SessionID); s != nil {
		if ended, _ := r.o.Sessions.EndedElsewhere(ctx, s); ended {
			return nil, sessionGone(t)
		}
	}
	hdr := CallerHeaders(t.Headers, t.SessionID)
	id, _ := jsonrpc.Marshal("tollgate-exec-" + t.ID)
	// No client is connected to an execution Tollgate runs itself: the upstream's
	// elicitation/sampling/roots requests go to the task's owner through the task (Relay).
	relay := NewRelay(ctx, r.o.Upstream)
	defer relay.Close()
	rep, err := r.o.Upstream.Call(ctx, hdr, jsonrpc.Request(id, "tools/call", params), func(m *jsonrpc.Message) {
		relay.Handle(hdr, m, nil)
	})
	if upstream.StatusOf(rep, err) == http.StatusNotFound {
		// Spec 2025-11-25 transports (session management): a server answers 404 for an ended
		// session, as plain text or with a JSON-RPC error; either way the session is gone.
		return nil, sessionGone(t)
	}
	if err != nil {
		if ctx.Err() != nil {
			// Tollgate gave up on the call (execution_timeout, the task cancelled or expired,
			// shutdown): spec 2025-11-25 utilities/cancellation, the sender SHOULD say so.
			cancelled(r.o.Upstream, hdr, id)
		}
		return nil, upstream.AsError(err).RPCError()
	}
	if rep.Msg.Error != nil {
		return nil, jsonrpc.DecodeError(rep.Msg.Error)
	}
	return rep.Msg.Result, nil
}

// Answer posts a JSON-RPC response to one of the upstream's server→client requests, with the
// transport's headers (upstream.Client.Post). A refused answer leaves the tool waiting until
// its call times out; nothing more can be done for it here.
func Answer(up *upstream.Client, hdr http.Header, msg []byte) {
	_ = up.Post(hdr, msg)
}

// cancelled tells the upstream that Tollgate no longer waits for request id (a disconnect
// alone may not stop the tool), with the transport's headers (upstream.Client.Post).
func cancelled(up *upstream.Client, hdr http.Header, id json.RawMessage) {
	params, _ := jsonrpc.Marshal(map[string]any{"requestId": id, "reason": "Tollgate stopped waiting for the task's call"})
	_ = up.Post(hdr, jsonrpc.Notification("notifications/cancelled", params))
}

// noClientToAsk answers a server→client request sent during an approved call Tollgate
// executes on the caller's behalf that it does not relay to the task's owner.
func noClientToAsk(method string) *jsonrpc.Error {
	return jsonrpc.NewError(jsonrpc.CodeMethodNotFound, "NotBridged",
		"Tollgate executes this approved call on the caller's behalf and does not relay "+method+" to its owner")
}

func sessionGone(t *tasks.Task) *jsonrpc.Error {
	return jsonrpc.NewError(jsonrpc.CodeUpstreamUnreachable, "SessionGone",
		"The caller's upstream MCP session no longer exists; the approved call was not executed", "taskId", t.ID)
}

// replayHeaders are the end-to-end headers a held call is executed with later. The session id
// is not among them: the task keeps it as SessionID (and Execute puts it back).
var replayHeaders = []string{"Authorization", upstream.HeaderProtocolVersion, "Traceparent", "Tracestate"}

// CaptureHeaders keeps the end-to-end headers of a caller's request that a task's call is
// later sent with.
func CaptureHeaders(in http.Header) http.Header {
	var out http.Header
	for _, k := range replayHeaders {
		if v := in.Values(k); len(v) > 0 {
			if out == nil {
				out = make(http.Header, len(replayHeaders))
			}
			out[http.CanonicalHeaderKey(k)] = append([]string(nil), v...)
		}
	}
	return out
}

// CallerHeaders are the headers of a request Tollgate sends upstream on a caller's behalf (an
// approved call, the tasks/list merge): the captured ones plus the caller's upstream session
// (none for a session Tollgate minted itself).
func CallerHeaders(captured http.Header, sessionID string) http.Header {
	hdr := make(http.Header, len(captured)+2)
	for k, v := range captured {
		hdr[k] = v
	}
	if sessionID != "" && !strings.HasPrefix(sessionID, session.LocalPrefix) {
		hdr.Set(upstream.HeaderSessionID, sessionID)
	}
	hdr.Set("Content-Type", "application/json")
	return hdr
}
