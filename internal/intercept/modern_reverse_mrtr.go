package intercept

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"sync"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
)

// MRTR for legacy clients in front of a modern-only upstream: an InputRequiredResult becomes
// the legacy client's own server→client requests on its request's stream (spec 2025-11-25
// elicitation/sampling/roots), and their answers the inputResponses of the retry (spec
// 2026-07-28 basic/patterns/mrtr "Basic Workflow").

// maxInputRounds bounds the MRTR rounds of one request (as the SDKs do).
const maxInputRounds = 10

// maxSessionCaps bounds the remembered client capabilities of bridged sessions.
const maxSessionCaps = 10000

// mrtrAskPrefix marks the ids of the requests Tollgate sends legacy clients for MRTR; they are
// inside ElicitIDPrefix so the router hands their answers to elicitResponse.
const mrtrAskPrefix = ElicitIDPrefix + "mrtr-"

type sessionCaps struct {
	mu sync.Mutex
	m  map[string]json.RawMessage
}

func (s *sessionCaps) put(sid string, caps json.RawMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]json.RawMessage{}
	}
	if len(s.m) >= maxSessionCaps {
		for k := range s.m { // an arbitrary old session loses its capabilities: it is not asked
			delete(s.m, k)
			break
		}
	}
	s.m[sid] = append(json.RawMessage(nil), caps...)
}

func (s *sessionCaps) get(sid string) json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[sid]
}

type legacyAsk struct {
	owner string
	ch    chan *jsonrpc.Message
}

type legacyAsks struct {
	mu sync.Mutex
	m  map[string]legacyAsk
}

func (a *legacyAsks) add(id string, ask legacyAsk) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]legacyAsk{}
	}
	a.m[id] = ask
}

func (a *legacyAsks) remove(id string) {
	a.mu.Lock()
	delete(a.m, id)
	a.mu.Unlock()
}

// deliver hands a client's response to the request waiting for it; false when id is not one
// of Tollgate's MRTR requests for this owner.
func (a *legacyAsks) deliver(id, owner string, m *jsonrpc.Message) bool {
	a.mu.Lock()
	ask, ok := a.m[id]
	if ok && ask.owner == owner {
		delete(a.m, id)
	}
	a.mu.Unlock()
	if !ok || ask.owner != owner {
		return false
	}
	ask.ch <- m // buffered: never blocks
	return true
}

func isInputRequired(result json.RawMessage) bool {
	var r struct {
		ResultType string `json:"resultType"`
	}
	return json.Unmarshal(result, &r) == nil && r.ResultType == "input_required"
}

// askLegacyClient sends each input request to the legacy client on its stream and waits for
// every answer: the inputResponses of the retry.
func (g *Gateway) askLegacyClient(ctx context.Context, x *Exchange, emit func([]byte) bool, inputRequests json.RawMessage) (map[string]json.RawMessage, *jsonrpc.Error) {
	var reqs map[string]struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(inputRequests, &reqs); err != nil || len(reqs) == 0 {
		return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "UnsupportedResult", "The upstream asked for input without usable inputRequests")
	}
	own := owner(x)
	ch := make(chan *jsonrpc.Message, len(reqs))
	ids := make(map[string]string, len(reqs)) // our request id → inputRequests key
	defer func() {
		for id := range ids {
			g.modern.asks.remove(id)
		}
	}()
	for key, r := range reqs {
		var b [12]byte
		_, _ = rand.Read(b[:])
		id := mrtrAskPrefix + hex.EncodeToString(b[:])
		ids[id] = key
		g.modern.asks.add(id, legacyAsk{owner: own, ch: ch})
		params := r.Params
		if len(params) == 0 {
			params = json.RawMessage(`{}`)
		}
		if !emit(jsonrpc.Request(rawString(id), r.Method, params)) {
			return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "UnsupportedResult",
				"The upstream needs the client to answer "+r.Method+", which needs a response stream (Accept: text/event-stream)")
		}
	}
	answers := make(map[string]json.RawMessage, len(reqs))
	for len(answers) < len(reqs) {
		select {
		case <-ctx.Done():
			return nil, jsonrpc.NewError(jsonrpc.CodeUpstreamTimeout, "UpstreamTimeout", "No answer from the client to the upstream's input request in time")
		case m := <-ch:
			var id string
			_ = json.Unmarshal(m.ID, &id)
			if m.Error != nil {
				return nil, jsonrpc.DecodeError(m.Error) // the client could not answer: so be it
			}
			answers[ids[id]] = m.Result
		}
	}
	return answers, nil
}

// retryBody is the request sent again with the client's inputResponses and the upstream's
// requestState echoed (mrtr: clients MUST echo it unchanged).
func retryBody(body []byte, answers map[string]json.RawMessage, requestState json.RawMessage) ([]byte, error) {
	m, err := jsonrpc.Parse(body)
	if err != nil {
		return nil, err
	}
	ir, err := jsonrpc.Marshal(answers)
	if err != nil {
		return nil, err
	}
	params, err := jsonrpc.Replace(m.Params, "inputResponses", ir)
	if err != nil {
		return nil, err
	}
	if len(requestState) > 0 && string(requestState) != "null" {
		if params, err = jsonrpc.Replace(params, "requestState", requestState); err != nil {
			return nil, err
		}
	}
	return jsonrpc.Request(m.ID, m.Method, params), nil
}
