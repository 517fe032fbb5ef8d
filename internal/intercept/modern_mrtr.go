package intercept

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/execution"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/source"
)

// MRTR across the bridge (spec 2026-07-28 basic/patterns/mrtr): a legacy upstream asks the
// client something (elicitation/create, sampling/createMessage, roots/list) in the middle of a
// call and waits. Tollgate keeps that upstream call running, answers the modern client with an
// InputRequiredResult whose requestState names the parked call, and when the client retries
// with inputResponses and the same requestState, sends the answers upstream and waits for what
// comes next: the result, or another round.

// mrtrMethods are the requests that may answer InputRequiredResult (mrtr "Supported Requests").
var mrtrMethods = map[string]bool{"tools/call": true, "prompts/get": true, "resources/read": true}

// inputCapability is the client capability each server→client request needs: a request the
// client did not declare is refused upstream, never asked (mrtr: servers MUST NOT rely on
// capabilities the client has not declared).
var inputCapability = map[string]string{
	"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots",
}

const (
	requestStatePrefix = "tgrs_"
	maxParked          = 1000
	parkedFor          = 10 * time.Minute // a parked call nobody resumes is cancelled after this
)

// parkedCall is an upstream call waiting for the client's inputResponses.
type parkedCall struct {
	owner   string
	reqs    chan parkedRequest
	done    chan bridgeOutcome
	cancel  context.CancelFunc
	seq     int
	pending map[string]parkedRequest // inputRequests key → the upstream's request
	at      time.Time
}

type parkedRequest struct {
	hdr      http.Header // answers go on the session the request came on
	msg      *jsonrpc.Message
	answered func() // tells the session the upstream has its answer
}

type bridgeOutcome struct {
	msg *jsonrpc.Message
	err *jsonrpc.Error
}

type parking struct {
	mu sync.Mutex
	m  map[string]*parkedCall
}

func (p *parking) put(pc *parkedCall) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	tok := requestStatePrefix + hex.EncodeToString(b[:])
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]*parkedCall{}
	}
	now := time.Now()
	for k, old := range p.m {
		if now.Sub(old.at) > parkedFor || len(p.m) >= maxParked {
			old.cancel()
			delete(p.m, k)
		}
	}
	pc.at = now
	p.m[tok] = pc
	return tok
}

// closeAll cancels every parked call (shutdown).
func (p *parking) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, pc := range p.m {
		pc.cancel()
		delete(p.m, k)
	}
}

// Close ends the bridged calls parked for a client's next round, so a shutdown does not wait
// for them, and the upstream sessions held for bridged requests.
func (g *Gateway) Close() {
	g.modern.parked.closeAll()
	if g.br != nil {
		g.br.Close()
	}
}

func (p *parking) take(tok, owner string) *parkedCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	pc, ok := p.m[tok]
	if !ok || pc.owner != owner {
		return nil
	}
	delete(p.m, tok)
	return pc
}

// bridgeRound runs one MRTR round of a bridged request: the final message or error, or (round
// != nil) the InputRequiredResult to answer with. All nil: the client went away.
func (g *Gateway) bridgeRound(ctx context.Context, x *Exchange, timeout time.Duration) (*jsonrpc.Message, *jsonrpc.Error, []byte) {
	own := owner(x)
	var p struct {
		RequestState   string                     `json:"requestState"`
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
	}
	_ = json.Unmarshal(x.Msg.Params, &p)
	var pc *parkedCall
	if p.RequestState != "" {
		if pc = g.modern.parked.take(p.RequestState, own); pc == nil {
			// Not a state Tollgate issued to this caller (or it expired): refuse rather than
			// start the call again (mrtr: servers validate requestState).
			return nil, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "InvalidRequestState",
				"Invalid params: requestState is unknown, expired or not this caller's; call again without it"), nil
		}
		for key, ans := range p.InputResponses {
			if req, ok := pc.pending[key]; ok { // unknown or answered keys are ignored
				g.br.answerUpstream(req.hdr, jsonrpc.ResultResponse(req.msg.ID, ans))
				req.answered()
				delete(pc.pending, key)
			}
		}
	} else {
		pc = g.startBridged(x, own, timeout)
	}
	if len(pc.pending) > 0 {
		return nil, nil, g.inputRound(x, pc) // what is still unanswered is asked again
	}
	select {
	case o := <-pc.done:
		pc.cancel()
		return o.msg, o.err, nil
	case r := <-pc.reqs:
		pc.add(r)
		for drained := false; !drained; { // every request already waiting goes in this round
			select {
			case r := <-pc.reqs:
				pc.add(r)
			default:
				drained = true
			}
		}
		return nil, nil, g.inputRound(x, pc)
	case <-ctx.Done():
		pc.cancel() // nobody to ask: the upstream call ends
		return nil, nil, nil
	}
}

// startBridged starts the upstream call of a new MRTR-capable request; it outlives the HTTP
// request that started it (up to timeout) so the next round can resume it.
func (g *Gateway) startBridged(x *Exchange, own string, timeout time.Duration) *parkedCall {
	if timeout <= 0 {
		timeout = parkedFor
	}
	// The call outlives the request, so its context is a new one; it carries the request's
	// source, which the upstream session pool charges the session to (fair eviction:
	// source.Victim). Without it every bridged tools/call was charged to nobody and a source
	// minting credentials ended other sources' sessions (plain LRU).
	ctx, cancel := context.WithTimeout(source.NewContext(context.Background(), requestSource(x)), timeout)
	pc := &parkedCall{owner: own, reqs: make(chan parkedRequest, 16), done: make(chan bridgeOutcome, 1),
		cancel: cancel, pending: map[string]parkedRequest{}}
	caps := x.Modern.Capabilities
	captured, body, upOwner := execution.CaptureHeaders(x.HTTP.Header), legacyBody(x.Msg), bridgeOwner(x)
	go func() {
		// The call keeps its upstream session (an anonymous caller's own) until it ends,
		// parked rounds included.
		msg, e := g.br.bridgeCall(ctx, upOwner, captured, body, func(hdr http.Header, m *jsonrpc.Message, answered func()) {
			c, known := inputCapability[m.Method]
			if !known || jsonrpc.Member(caps, c) == nil {
				g.br.answerUpstream(hdr, jsonrpc.ErrorResponse(m.ID, notBridged(m.Method)))
				answered()
				return
			}
			select {
			case pc.reqs <- parkedRequest{hdr: hdr, msg: m, answered: answered}:
			default:
				g.br.answerUpstream(hdr, jsonrpc.ErrorResponse(m.ID, notBridged(m.Method)))
				answered()
			}
		})
		pc.done <- bridgeOutcome{msg, e}
	}()
	return pc
}

// requestSource is the source a bound below the door charges x to (package source).
func requestSource(x *Exchange) string { return source.Request(x.HTTP, x.Subject) }

func (pc *parkedCall) add(r parkedRequest) {
	pc.seq++
	pc.pending["tollgate-input-"+strconv.Itoa(pc.seq)] = r
}

// inputRound parks pc and returns the InputRequiredResult asking for its pending requests.
func (g *Gateway) inputRound(x *Exchange, pc *parkedCall) []byte {
	reqs := make(map[string]json.RawMessage, len(pc.pending))
	for k, r := range pc.pending {
		params := r.msg.Params
		if len(params) == 0 {
			params = json.RawMessage(`{}`)
		}
		b, _ := jsonrpc.Marshal(map[string]any{"method": r.msg.Method, "params": params})
		reqs[k] = b
	}
	tok := g.modern.parked.put(pc)
	b, _ := jsonrpc.Marshal(map[string]any{"resultType": "input_required", "inputRequests": reqs, "requestState": tok})
	return jsonrpc.ResultResponse(x.Msg.ID, b)
}
