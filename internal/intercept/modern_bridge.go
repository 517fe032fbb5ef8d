package intercept

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/tollgate-mcp/tollgate/internal/era"
	"github.com/tollgate-mcp/tollgate/internal/execution"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
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

// bridge answers a modern request through a legacy upstream session Tollgate holds for the
// caller's owner (an anonymous caller's is its own, ended with the request). transform,
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
			msg, e = g.br.bridgeCall(ctx, bridgeOwner(x), execution.CaptureHeaders(x.HTTP.Header), legacyBody(x.Msg), nil)
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

func notBridged(method string) *jsonrpc.Error {
	return jsonrpc.NewError(jsonrpc.CodeMethodNotFound, "NotBridged",
		"Tollgate does not relay "+method+" from a legacy upstream to a "+era.Modern+" client for this request")
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
