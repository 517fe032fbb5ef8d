package intercept

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/tollgate-mcp/tollgate/internal/era"
	"github.com/tollgate-mcp/tollgate/internal/execution"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

// Bridging: a modern request in front of a legacy-only upstream is sent on an upstream session
// Tollgate holds (spec basic/versioning compatibility matrix: a modern client cannot talk to a
// legacy server; the gateway can). The modern _meta keys are taken out of the body, since a
// legacy server would read them as a modern request without the matching headers.

// modernMetaKeys are the request _meta keys only the modern revision defines.
var modernMetaKeys = []string{era.MetaProtocolVersion, era.MetaClientCapabilities, era.MetaClientInfo,
	"io.modelcontextprotocol/logLevel"}

// legacyBody returns body with the modern _meta keys removed from params._meta.
func legacyBody(m *jsonrpc.Message) []byte {
	meta := jsonrpc.Member(m.Params, "_meta")
	if meta == nil {
		return m.Raw
	}
	var mm map[string]json.RawMessage
	if json.Unmarshal(meta, &mm) != nil {
		return m.Raw
	}
	for _, k := range modernMetaKeys {
		delete(mm, k)
	}
	nm, err := jsonrpc.Marshal(mm)
	if err != nil {
		return m.Raw
	}
	params, err := jsonrpc.Replace(m.Params, "_meta", nm)
	if err != nil {
		return m.Raw
	}
	return jsonrpc.Request(m.ID, m.Method, params)
}

// bridge answers a modern request through Tollgate's own legacy upstream session. transform,
// if set, edits the result. A server→client request the upstream sends meanwhile becomes an
// InputRequiredResult for tools/call, prompts/get and resources/read (MRTR, see
// modern_mrtr.go) and is refused for any other method.
func (g *Gateway) bridge(x *Exchange, transform func([]byte) []byte) Result {
	timeout := g.d.Snapshots.Load().Config.Server.SyncForwardTimeout.D()
	return Result{Wait: func(ctx context.Context, _ func([]byte) bool) []byte {
		var msg *jsonrpc.Message
		var e *jsonrpc.Error
		if mrtrMethods[x.Msg.Method] {
			var round []byte
			if msg, e, round = g.bridgeRound(ctx, x, timeout); round != nil {
				return round
			}
			if msg == nil && e == nil {
				return nil // the client went away
			}
		} else {
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			msg, e = g.bridgeCall(ctx, execution.CaptureHeaders(x.HTTP.Header), legacyBody(x.Msg), nil)
		}
		switch {
		case e != nil:
			return jsonrpc.ErrorResponse(x.Msg.ID, e.WithCorrelation(x.CorrID))
		case msg.Error != nil:
			return jsonrpc.ErrorResponse(x.Msg.ID, jsonrpc.DecodeError(msg.Error))
		}
		res := msg.Result
		if transform != nil {
			res = transform(res)
		}
		if cacheable[x.Msg.Method] {
			res = withCacheHints(res, "private") // a legacy server may tailor it to the credential
		}
		return jsonrpc.ResultResponse(x.Msg.ID, withResultType(res))
	}}
}

// bridgeCall sends body on the held upstream session, opening (or, after a 404, reopening) it
// as needed. onRequest gets the upstream's server→client requests with the headers to answer
// them with; nil refuses them.
func (g *Gateway) bridgeCall(ctx context.Context, captured http.Header, body []byte, onRequest func(http.Header, *jsonrpc.Message)) (*jsonrpc.Message, *jsonrpc.Error) {
	for attempt := 0; ; attempt++ {
		sid, prot, err := g.bridgeSession(ctx)
		if err != nil {
			return nil, jsonrpc.NewError(jsonrpc.CodeUpstreamUnreachable, "UpstreamUnreachable",
				"Upstream MCP server did not accept a session: "+err.Error())
		}
		hdr := execution.CallerHeaders(captured, sid)
		hdr.Set(upstream.HeaderProtocolVersion, prot)
		rep, err := g.d.Upstream.Call(ctx, hdr, body, func(m *jsonrpc.Message) {
			switch {
			case m.Kind != jsonrpc.KindRequest:
			case onRequest != nil:
				onRequest(hdr, m)
			default:
				g.answerUpstream(hdr, jsonrpc.ErrorResponse(m.ID, notBridged(m.Method)))
			}
		})
		if upstream.StatusOf(rep, err) == http.StatusNotFound && attempt == 0 {
			g.dropBridgeSession(sid) // the upstream forgot the session: open a new one once
			continue
		}
		if err != nil {
			return nil, upstream.AsError(err).RPCError()
		}
		return rep.Msg, nil
	}
}

func notBridged(method string) *jsonrpc.Error {
	return jsonrpc.NewError(jsonrpc.CodeMethodNotFound, "NotBridged",
		"Tollgate does not relay "+method+" from a legacy upstream to a "+era.Modern+" client for this request")
}

// answerUpstream posts a JSON-RPC response to one of the upstream's server→client requests.
func (g *Gateway) answerUpstream(hdr http.Header, msg []byte) {
	execution.Answer(g.d.Upstream, hdr, msg)
}

// bridgeSession returns the upstream session Tollgate holds, opening one if needed.
func (g *Gateway) bridgeSession(ctx context.Context) (sid, prot string, err error) {
	st := &g.modern
	st.sessMu.Lock()
	defer st.sessMu.Unlock()
	if st.sessProt != "" {
		return st.sessID, st.sessProt, nil
	}
	sid, prot, init, err := g.openLegacySession(ctx, "bridge")
	if err != nil {
		return "", "", err
	}
	g.noteLegacyInit(init)
	st.sessID, st.sessProt = sid, prot
	return sid, prot, nil
}

func (g *Gateway) dropBridgeSession(sid string) {
	st := &g.modern
	st.sessMu.Lock()
	if st.sessID == sid {
		st.sessID, st.sessProt = "", ""
	}
	st.sessMu.Unlock()
}

// legacyInitialize returns the upstream's initialize result (opening the bridge session).
func (g *Gateway) legacyInitialize(ctx context.Context) ([]byte, error) {
	if _, _, err := g.bridgeSession(ctx); err != nil {
		return nil, err
	}
	g.modern.mu.Lock()
	defer g.modern.mu.Unlock()
	return g.modern.init, nil
}

// openLegacySession performs the initialize handshake with the upstream and returns the
// session id ("" for a session-less upstream), the negotiated version and the result.
func (g *Gateway) openLegacySession(ctx context.Context, purpose string) (sid, prot string, result []byte, err error) {
	sess, err := g.d.Upstream.Handshake(ctx, json.RawMessage(
		`{"protocolVersion":"`+era.LatestLegacy+`","capabilities":{"elicitation":{},"sampling":{},"roots":{}},"clientInfo":{"name":"tollgate","version":"`+purpose+`"}}`),
		era.LatestLegacy)
	if err != nil {
		return "", "", nil, err
	}
	return sess.ID, sess.Version, sess.Result, nil
}

// executeModern runs an approved modern task's call: as a modern request when the upstream is
// modern (no session: any replica can, docs/contract.md §1 task stores), else on the bridge session.
func (g *Gateway) executeModern(ctx context.Context, t *tasks.Task) (json.RawMessage, *jsonrpc.Error) {
	meta := t.Meta
	if len(meta) == 0 {
		meta = json.RawMessage(ownMeta)
	}
	params, err := jsonrpc.Marshal(struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments,omitempty"`
		Meta      json.RawMessage `json:"_meta"`
	}{t.Tool, t.Arguments, meta})
	if err != nil {
		return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "ExecutionFailed", "Encoding the call failed")
	}
	id := json.RawMessage(rawString("tollgate-exec-" + t.ID))
	body := jsonrpc.Request(id, "tools/call", params)
	if !g.upstreamModern(ctx) {
		m, err := jsonrpc.Parse(body)
		if err != nil {
			return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "ExecutionFailed", "Encoding the call failed")
		}
		msg, e := g.bridgeCall(ctx, t.Headers, legacyBody(m), nil)
		return callOutcome(msg, e)
	}
	hdr := execution.CallerHeaders(t.Headers, "")
	hdr = modernHeaders(hdr, "tools/call", t.Tool)
	rep, err := g.d.Upstream.Call(ctx, hdr, body, nil)
	if err != nil {
		return nil, upstream.AsError(err).RPCError()
	}
	return callOutcome(rep.Msg, nil)
}

func callOutcome(msg *jsonrpc.Message, e *jsonrpc.Error) (json.RawMessage, *jsonrpc.Error) {
	switch {
	case e != nil:
		return nil, e
	case msg.Error != nil:
		return nil, jsonrpc.DecodeError(msg.Error)
	}
	var r struct {
		ResultType string `json:"resultType"`
	}
	if json.Unmarshal(msg.Result, &r) == nil && r.ResultType != "" && r.ResultType != "complete" {
		// input_required (MRTR) or a task of the upstream's own: nothing Tollgate can finish
		// for an absent caller.
		return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "UnsupportedResult",
			fmt.Sprintf("The upstream answered the approved call with resultType %q, which Tollgate cannot complete on the caller's behalf", r.ResultType))
	}
	return msg.Result, nil
}
