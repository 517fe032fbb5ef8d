package intercept

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-mcp/tollgate/internal/disclose"
	"github.com/tollgate-mcp/tollgate/internal/execution"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/logcap"
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

	// While parked (guarded by the parking's table): the timer that ends it after parkedFor,
	// and whether it holds a connection's place (Slots).
	timer *time.Timer
	held  bool
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

// Slots is the connection budget a parked call takes a place in (the MCP listener's
// server.limits.max_connections, limits.Listener): each keeps its upstream call, and often
// its upstream session's stream, open after the client's request ended — about the two
// descriptors a client connection is budgeted for.
type Slots interface {
	Hold() bool
	Unhold()
}

// parking holds the bridged calls waiting for their client's next round, bounded per source
// and in total (server.limits.max_parked_calls_per_source, max_parked_calls): a source past
// its share ends its own oldest parked call, and at the total the source holding the most
// does (source.Shares, the rule of every shared pool). Before, one bound of 1000 for all with
// an arbitrary call giving way let 3000 anonymous calls from one address end every other
// caller's parked call, and the parked calls' descriptors were counted nowhere.
type parking struct {
	once  sync.Once
	m     *source.Shares[*parkedCall]
	slots Slots // nil: not counted
	// replica names this process in the requestStates it issues (random, made at start), so
	// a retry that reaches another replica — whose memory has no such parked call — is told
	// so, apart from an expired or foreign state (docs/kubernetes.md, load balancer).
	replica string

	perSource, total int
	evicted          func(reason, source string) // counted and warned of (nil: not)
}

func (p *parking) table() *source.Shares[*parkedCall] {
	p.once.Do(func() {
		if p.total <= 0 {
			p.total = 256
		}
		if p.perSource <= 0 || p.perSource > p.total {
			p.perSource = max(p.total/4, 1)
		}
		p.m = source.NewShares[*parkedCall](p.perSource, p.total, p.evicted).OnDrop(p.release)
		var b [6]byte
		_, _ = rand.Read(b[:])
		p.replica = hex.EncodeToString(b[:])
	})
	return p.m
}

// release ends a parked call that gave way or expired: its upstream call is cancelled and
// its place in the connection budget given back. Called under the table's lock.
func (p *parking) release(pc *parkedCall) {
	p.unpark(pc)
	pc.cancel()
}

// unpark stops pc's timer and gives back its place (it is resumed, or ends).
func (p *parking) unpark(pc *parkedCall) {
	if pc.timer != nil {
		pc.timer.Stop()
	}
	if pc.held {
		pc.held = false
		p.slots.Unhold()
	}
}

// put parks pc for src and returns the requestState that resumes it; false: the connection
// budget has no place for it (nothing parked).
func (p *parking) put(pc *parkedCall, src string) (string, bool) {
	t := p.table()
	var b [16]byte
	_, _ = rand.Read(b[:])
	tok := requestStatePrefix + p.replica + "_" + hex.EncodeToString(b[:])
	if p.slots != nil {
		if !p.slots.Hold() {
			return "", false
		}
		pc.held = true
	}
	pc.timer = time.AfterFunc(parkedFor, func() {
		if pc, ok := t.Take(tok, nil); ok {
			p.release(pc)
		}
	})
	t.Put(src, tok, pc, time.Time{})
	return tok, true
}

// parkedWarnEvery spaces the warnings that parked calls give way (one a minute, with the
// count held back).
const parkedWarnEvery = time.Minute

// initParking bounds the parked calls (server.limits.max_parked_calls and _per_source, read
// at start) and counts them against the MCP listener's connection budget.
func (g *Gateway) initParking() {
	l := g.d.Snapshots.Load().Config.Server.Limits
	warn := logcap.NewSampler(parkedWarnEvery, 1)
	g.modern.parked = parking{slots: g.d.ParkSlots, perSource: l.MaxParkedCallsPerSource, total: l.MaxParkedCalls,
		evicted: func(reason, src string) {
			g.m.parkedCallEvicted(reason)
			if ok, held := warn.Allow(); ok {
				g.log.Warn("parked calls full: an older parked call gave way and was cancelled; its requestState is now refused",
					"reason", reason, "source_hash", disclose.OwnerHash(src), "suppressed", held)
			}
		}}
	if g.d.Registerer != nil {
		g.d.Registerer.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tollgate_parked_calls",
			Help: "Bridged 2026-07-28 calls parked between MRTR rounds (bounded by server.limits.max_parked_calls)."},
			func() float64 { return float64(g.modern.parked.len()) }))
	}
}

// len is the number of calls parked.
func (p *parking) len() int { return p.table().Len() }

// closeAll cancels every parked call (shutdown).
func (p *parking) closeAll() {
	for _, pc := range p.table().Drain() {
		p.release(pc)
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

// elsewhere reports whether tok is a requestState another Tollgate process issued (another
// replica, or this one before a restart): tgrs_<replica>_<random>, another replica.
func (p *parking) elsewhere(tok string) bool {
	p.table()
	rest, ok := strings.CutPrefix(tok, requestStatePrefix)
	replica, random, ok2 := strings.Cut(rest, "_")
	return ok && ok2 && len(replica) == len(p.replica) && len(random) == 32 && replica != p.replica &&
		isHex(replica) && isHex(random)
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil
}

// take resumes the call parked under tok when owner parked it; nil otherwise (it stays).
func (p *parking) take(tok, owner string) *parkedCall {
	pc, ok := p.table().Take(tok, func(pc *parkedCall) bool { return pc.owner == owner })
	if !ok {
		return nil
	}
	p.unpark(pc)
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
		if g.modern.parked.elsewhere(p.RequestState) {
			// Parked in another process: its upstream call, and the question, live there. Say
			// so (the load balancer must keep a caller on one replica), never start it again.
			g.m.parkedElsewhere()
			return nil, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "RequestStateOnOtherReplica",
				"Invalid params: requestState was issued by another Tollgate replica (or before a restart), where the call waits for this input; send a caller's requests to one replica (docs/kubernetes.md), or call again without requestState to start the call anew",
				"correlation_id", x.CorrID), nil
		}
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
			if m.Kind != jsonrpc.KindRequest {
				answered() // a notification on the session's stream: not this client's to answer
				return
			}
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
	tok, ok := g.modern.parked.put(pc, requestSource(x))
	if !ok {
		pc.cancel() // nowhere to keep it: the upstream call ends
		return jsonrpc.ErrorResponse(x.Msg.ID, jsonrpc.NewError(jsonrpc.CodeCapacityExceeded, "ServerBusy",
			"Server busy: the connection budget (server.limits.max_connections) has no place to keep this call waiting for your input; retry shortly",
			"limit", "max_connections", "correlation_id", x.CorrID))
	}
	b, _ := jsonrpc.Marshal(map[string]any{"resultType": "input_required", "inputRequests": reqs, "requestState": tok})
	return jsonrpc.ResultResponse(x.Msg.ID, b)
}
