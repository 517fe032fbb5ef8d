package intercept

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"

	"github.com/tollgate-mcp/tollgate/internal/era"
	"github.com/tollgate-mcp/tollgate/internal/execution"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/session"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

// Legacy clients in front of a modern-only upstream (spec basic/versioning compatibility
// matrix: "Legacy client, Modern server: fails" — without a gateway). Tollgate answers
// initialize itself from the upstream's server/discover, keeps the session locally, and sends
// every request on as a 2026-07-28 request with Tollgate's own _meta.

// reverseBridge is the router's filter for legacy messages: with a modern-only upstream,
// initialize is answered locally and what would be forwarded travels as a modern request.
func (g *Gateway) reverseBridge(_ context.Context, x *Exchange, res Result) Result {
	if !g.br.modernOnly.Load() || x.Modern != nil {
		return res
	}
	if x.Msg.Kind != jsonrpc.KindRequest {
		if res.Forward != nil {
			// Notifications (initialized, cancelled) and responses to server requests have no
			// modern counterpart: taken, not passed on.
			return Result{Accepted: true}
		}
		return res
	}
	if res.Forward == nil {
		return res // answered by Tollgate itself
	}
	if x.Msg.Method == "initialize" {
		return g.localInitialize(x, res.Forward)
	}
	return g.forwardModern(x, res.Forward)
}

// localInitialize answers initialize from the upstream's DiscoverResult and opens a session
// Tollgate keeps itself (the upstream has none).
func (g *Gateway) localInitialize(x *Exchange, f *Forward) Result {
	sid := session.NewLocalID()
	return Result{Header: http.Header{upstream.HeaderSessionID: {sid}}, Wait: func(ctx context.Context, _ func([]byte) bool) []byte {
		disc, err := g.br.upstreamDiscover(ctx)
		if err != nil {
			e := jsonrpc.NewError(jsonrpc.CodeUpstreamUnreachable, "UpstreamUnreachable", "Upstream MCP server did not answer server/discover: "+err.Error())
			return jsonrpc.ErrorResponse(x.Msg.ID, e.WithCorrelation(x.CorrID))
		}
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(x.Msg.Params, &p)
		version := era.LatestLegacy
		if slices.Contains(era.Supported, p.ProtocolVersion) && !era.IsModern(p.ProtocolVersion) {
			version = p.ProtocolVersion
		}
		result, err := initializeFromDiscover(disc, version)
		if err != nil {
			e := jsonrpc.NewError(jsonrpc.CodeInternalError, "UpstreamInvalid", "Upstream server/discover result is not usable: "+err.Error())
			return jsonrpc.ErrorResponse(x.Msg.ID, e.WithCorrelation(x.CorrID))
		}
		t := x.Ticket
		if t == nil { // an exchange that did not come through the proxy's admission
			var err error
			if t, err = g.d.Sessions.Admit(""); err != nil {
				e := jsonrpc.NewError(jsonrpc.CodeCapacityExceeded, "SessionLimit", "No room for a new session: "+err.Error())
				return jsonrpc.ErrorResponse(x.Msg.ID, e.WithCorrelation(x.CorrID))
			}
			defer t.Release()
		}
		x.Session = t.Adopt(sid)
		// What the client can answer (elicitation, sampling, roots) travels in the _meta of its
		// requests, so the upstream may ask it through MRTR.
		g.modern.sessCaps.put(sid, jsonrpc.Member(x.Msg.Params, "capabilities"))
		return g.transformed(x, f, jsonrpc.ResultResponse(x.Msg.ID, result))
	}}
}

// initializeFromDiscover makes a legacy InitializeResult from a DiscoverResult.
func initializeFromDiscover(disc []byte, version string) ([]byte, error) {
	var d struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
		Meta         map[string]json.RawMessage `json:"_meta"`
		Instructions *string                    `json:"instructions"`
	}
	if err := json.Unmarshal(disc, &d); err != nil {
		return nil, err
	}
	delete(d.Capabilities, "extensions") // the modern extensions have no legacy meaning
	if d.Capabilities == nil {
		d.Capabilities = map[string]json.RawMessage{}
	}
	info := d.Meta[era.MetaServerInfo]
	if len(info) == 0 {
		info = json.RawMessage(`{"name":"upstream","version":"unknown"}`)
	}
	out := map[string]any{"protocolVersion": version, "capabilities": d.Capabilities, "serverInfo": info}
	if d.Instructions != nil {
		out["instructions"] = *d.Instructions
	}
	return jsonrpc.Marshal(out)
}

// transformed applies a handler's Transform to a response Tollgate obtained itself.
func (g *Gateway) transformed(x *Exchange, f *Forward, resp []byte) []byte {
	m, err := jsonrpc.Parse(resp)
	if err != nil || f.Transform == nil {
		return resp
	}
	if out := f.Transform(x, m); out != nil {
		return out
	}
	return resp
}

// forwardModern sends a legacy request to the modern-only upstream as a 2026-07-28 request;
// notifications the upstream sends before its answer reach the client on the same stream.
func (g *Gateway) forwardModern(x *Exchange, f *Forward) Result {
	return Result{Wait: func(ctx context.Context, emit func([]byte) bool) []byte {
		if f.Timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, f.Timeout)
			defer cancel()
		}
		var caps json.RawMessage
		if x.Session != nil {
			caps = g.modern.sessCaps.get(x.Session.ID)
		}
		body, name, err := modernBody(x.Msg, caps)
		if err != nil {
			e := jsonrpc.NewError(jsonrpc.CodeInvalidParams, "InvalidParams", "Invalid params: "+err.Error())
			return jsonrpc.ErrorResponse(x.Msg.ID, e.WithCorrelation(x.CorrID))
		}
		hdr := modernHeaders(execution.CaptureHeaders(x.HTTP.Header), x.Msg.Method, name)
		for round := 0; ; round++ {
			rep, err := g.d.Upstream.Call(ctx, hdr, body, func(m *jsonrpc.Message) {
				if m.Kind == jsonrpc.KindNotification {
					emit(m.Raw)
				}
			})
			if err != nil {
				e := upstream.AsError(err).RPCError()
				if rep != nil && rep.Msg != nil {
					return rep.Msg.WithID(x.Msg.ID) // an error the upstream answered with (HTTP 4xx)
				}
				return jsonrpc.ErrorResponse(x.Msg.ID, e.WithCorrelation(x.CorrID))
			}
			if rep.Msg.Error == nil && mrtrMethods[x.Msg.Method] && round < maxInputRounds && isInputRequired(rep.Msg.Result) {
				// MRTR → the legacy client's own server→client requests, then the retry.
				answers, e := g.askLegacyClient(ctx, x, emit, jsonrpc.Member(rep.Msg.Result, "inputRequests"))
				if e != nil {
					return jsonrpc.ErrorResponse(x.Msg.ID, e.WithCorrelation(x.CorrID))
				}
				if body, err = retryBody(body, answers, jsonrpc.Member(rep.Msg.Result, "requestState")); err != nil {
					e := jsonrpc.NewError(jsonrpc.CodeInternalError, "UpstreamInvalid", "Could not build the retry: "+err.Error())
					return jsonrpc.ErrorResponse(x.Msg.ID, e.WithCorrelation(x.CorrID))
				}
				continue
			}
			if rep.Msg.Error == nil {
				if _, e := callOutcome(rep.Msg, nil); e != nil {
					// input_required beyond the rounds allowed, or an upstream task.
					return jsonrpc.ErrorResponse(x.Msg.ID, e.WithCorrelation(x.CorrID))
				}
			}
			return g.transformed(x, f, rep.Msg.WithID(x.Msg.ID))
		}
	}}
}

// modernBody adds Tollgate's _meta to a legacy request's params (clientCapabilities: caps, the
// capabilities the client declared at initialize, when known) and returns the Mcp-Name value.
func modernBody(m *jsonrpc.Message, caps json.RawMessage) ([]byte, string, error) {
	params := m.Params
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage(`{}`)
	}
	meta := jsonrpc.Member(params, "_meta")
	if len(meta) == 0 || string(meta) == "null" {
		meta = []byte(`{}`)
	}
	var own map[string]json.RawMessage
	_ = json.Unmarshal([]byte(ownMeta), &own)
	if len(caps) > 0 && caps[0] == '{' {
		own[era.MetaClientCapabilities] = caps
	}
	for _, k := range []string{era.MetaProtocolVersion, era.MetaClientCapabilities, era.MetaClientInfo} {
		var err error
		if meta, err = jsonrpc.Replace(meta, k, own[k]); err != nil {
			return nil, "", err
		}
	}
	params, err := jsonrpc.Replace(params, "_meta", meta)
	if err != nil {
		return nil, "", err
	}
	name := ""
	for _, k := range []string{"name", "uri", "taskId"} {
		var s string
		if v := jsonrpc.Member(params, k); v != nil && json.Unmarshal(v, &s) == nil {
			name = s
			break
		}
	}
	return jsonrpc.Request(m.ID, m.Method, params), name, nil
}
