package intercept

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/era"
	"github.com/tollgate-mcp/tollgate/internal/execution"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

// Bridge is what Tollgate knows of the upstream's protocol era and the legacy upstream sessions
// it holds to answer 2026-07-28 requests, one per owner (modern_bridge.go; the sessions are an
// upstream.Pool, whose owners bridge_sessions.go names). The Gateway bridges callers'
// requests through it; the execution.Runner runs modern tasks through it (ExecuteModern).
// Built before both and handed to each, so neither needs the other.
type Bridge struct {
	up  *upstream.Client
	log *slog.Logger

	mu      sync.Mutex
	known   bool
	modern  bool
	checked time.Time
	init    []byte // the upstream's last legacy initialize result

	pool *upstream.Pool // upstream sessions for bridged modern requests, one per owner

	modernOnly atomic.Bool // the upstream refuses initialize: legacy clients are bridged
}

// NewBridge returns a Bridge to up; it opens no session until one is needed. Close ends them.
func NewBridge(up *upstream.Client, log *slog.Logger) *Bridge {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &Bridge{up: up, log: log}
	b.pool = upstream.NewPool(up, upstream.PoolOptions{
		Open: b.openBridgeSession, Answer: b.answerUpstream, Refusal: notBridged, Log: log,
	})
	return b
}

// ExecuteModern runs t the 2026-07-28 way when it is a modern caller's task or the upstream
// speaks only that era (execution.Options.Modern); ok is false otherwise.
func (b *Bridge) ExecuteModern(ctx context.Context, t *tasks.Task) (json.RawMessage, *jsonrpc.Error, bool) {
	if t.Era != tasks.EraModern && !b.modernOnly.Load() {
		return nil, nil, false
	}
	res, rpcErr := b.executeModern(ctx, t)
	return res, rpcErr, true
}

// Sessionless reports whether t would run without the caller's own upstream session: a
// modern task, or any task while the upstream speaks only 2026-07-28 (ExecuteModern). Such a
// call does not fail when the caller's session ends (a bridged session is opened again).
func (b *Bridge) Sessionless(t *tasks.Task) bool {
	return t.Era == tasks.EraModern || b.modernOnly.Load()
}

// setModernOnly records whether the upstream refuses initialize but serves 2026-07-28.
func (b *Bridge) setModernOnly(v bool) {
	if b.modernOnly.Swap(v) != v {
		b.log.Info("Upstream serves protocol " + era.Modern + " only: legacy clients are bridged=" + fmt.Sprint(v))
	}
}

// upstreamModern reports whether the upstream serves protocol 2026-07-28, probing it with
// server/discover when the last answer is older than eraRecheck (a dual-era client's
// detection: spec basic/versioning "Backward Compatibility").
func (b *Bridge) upstreamModern(ctx context.Context) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.known && time.Since(b.checked) < eraRecheck {
		return b.modern
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := b.upstreamDiscover(pctx)
	modern := err == nil && slices.Contains(supportedVersions(res), era.Modern)
	if err != nil && ctx.Err() != nil {
		return b.modern // the caller went away; do not record a verdict
	}
	if !b.known || b.modern != modern {
		b.log.Info("Upstream era: modern=" + fmt.Sprint(modern))
	}
	b.known, b.modern, b.checked = true, modern, time.Now()
	return modern
}

func (b *Bridge) upstreamDiscover(ctx context.Context) ([]byte, error) {
	body := jsonrpc.Request(json.RawMessage(`"tollgate-discover"`), "server/discover", json.RawMessage(`{"_meta":`+ownMeta+`}`))
	rep, err := b.up.Call(ctx, modernHeaders(nil, "server/discover", ""), body, nil)
	if err != nil {
		return nil, err
	}
	if rep.Msg.Error != nil {
		return nil, fmt.Errorf("upstream error %s", rep.Msg.Error)
	}
	return rep.Msg.Result, nil
}

// noteLegacyInit keeps the upstream's initialize result for a synthesised server/discover.
func (b *Bridge) noteLegacyInit(result []byte) {
	b.mu.Lock()
	b.init = slices.Clone(result)
	b.mu.Unlock()
}

// bridgeCall sends body on owner's upstream session ("" = a session of its own for this call,
// ended after it), opening (or, after a 404, reopening) it as needed. onRequest gets the
// upstream's server→client requests with the headers to answer them with; nil refuses them.
func (b *Bridge) bridgeCall(ctx context.Context, owner string, captured http.Header, body []byte, onRequest upstream.Asker) (*jsonrpc.Message, *jsonrpc.Error) {
	mayAsk := false
	if m, err := jsonrpc.Parse(body); err == nil {
		mayAsk = mrtrMethods[m.Method]
	}
	for attempt := 0; ; attempt++ {
		ps, err := b.pool.Acquire(ctx, owner, captured)
		if err != nil {
			return nil, jsonrpc.NewError(jsonrpc.CodeUpstreamUnreachable, "UpstreamUnreachable",
				"Upstream MCP server did not accept a session: "+err.Error())
		}
		msg, e, forgotten := b.callOn(ctx, ps, captured, body, mayAsk, onRequest)
		b.pool.Release(ps)
		if forgotten && attempt == 0 {
			continue // the upstream forgot the session: open a new one once
		}
		return msg, e
	}
}

// callOn sends body on ps. forgotten: the upstream answered 404 (ps is dropped).
func (b *Bridge) callOn(ctx context.Context, ps *upstream.PooledSession, captured http.Header, body []byte, mayAsk bool,
	onRequest upstream.Asker) (_ *jsonrpc.Message, _ *jsonrpc.Error, forgotten bool) {
	sess := ps.Session()
	hdr := execution.CallerHeaders(captured, sess.ID)
	hdr.Set(upstream.HeaderProtocolVersion, sess.Version)
	if mayAsk {
		// A request of the upstream's on the session's GET stream goes to this call when it
		// is the only one in flight there (upstream.Pool.Begin).
		defer b.pool.Begin(ps, hdr, onRequest)()
	}
	note := tasks.NoteFrom(ctx) // a task's execution: its progress and log messages
	rep, err := b.up.Call(ctx, hdr, body, func(m *jsonrpc.Message) {
		switch {
		case m.Kind != jsonrpc.KindRequest:
			execution.Note(note, m)
		case onRequest != nil:
			onRequest(hdr, m, func() {})
		default:
			b.answerUpstream(hdr, jsonrpc.ErrorResponse(m.ID, notBridged(m.Method)))
		}
	})
	if upstream.StatusOf(rep, err) == http.StatusNotFound {
		b.pool.Drop(ps)
		if err != nil {
			return nil, upstream.AsError(err).RPCError(), true
		}
		return rep.Msg, nil, true
	}
	if err != nil {
		return nil, upstream.AsError(err).RPCError(), false
	}
	return rep.Msg, nil, false
}

// answerUpstream posts a JSON-RPC response to one of the upstream's server→client requests.
func (b *Bridge) answerUpstream(hdr http.Header, msg []byte) {
	execution.Answer(b.up, hdr, msg)
}

// openBridgeSession opens an upstream session for bridged requests with the caller's
// credential (an upstream may bind a session to it) and keeps the initialize result.
func (b *Bridge) openBridgeSession(ctx context.Context, captured http.Header) (*upstream.Session, error) {
	var extra http.Header
	if v := captured.Values("Authorization"); len(v) > 0 {
		extra = http.Header{"Authorization": slices.Clone(v)}
	}
	sess, err := b.up.HandshakeWith(ctx, extra, legacyInitParams("bridge"), era.LatestLegacy)
	if err != nil {
		return nil, err
	}
	b.noteLegacyInit(sess.Result)
	return sess, nil
}

// Close ends the bridged sessions Tollgate holds (shutdown).
func (b *Bridge) Close() { b.pool.Close() }

// legacyInitialize returns the upstream's initialize result, opening (and ending) a session
// of its own to learn it.
func (b *Bridge) legacyInitialize(ctx context.Context) ([]byte, error) {
	ps, err := b.pool.Acquire(ctx, "", nil)
	if err != nil {
		return nil, err
	}
	b.pool.Release(ps)
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.init, nil
}

// legacyInitParams are the params of the bridge's initialize: every client capability a
// bridged caller may have, so the upstream may ask (only what the caller declared reaches it).
func legacyInitParams(purpose string) json.RawMessage {
	return json.RawMessage(`{"protocolVersion":"` + era.LatestLegacy + `","capabilities":{"elicitation":{},"sampling":{},"roots":{}},"clientInfo":{"name":"tollgate","version":"` + purpose + `"}}`)
}

// executeModern runs an approved modern task's call: as a modern request when the upstream is
// modern (no session: any replica can, docs/contract.md §1 task stores), else on the task
// owner's bridged session.
func (b *Bridge) executeModern(ctx context.Context, t *tasks.Task) (json.RawMessage, *jsonrpc.Error) {
	meta := t.Meta
	if len(meta) == 0 {
		meta = json.RawMessage(ownMeta)
	}
	// Progress under Tollgate's own token: whoever follows the task gets it under theirs
	// (tasks.NoteFrom), not the token of the request that happened to create it.
	if m, err := jsonrpc.Replace(meta, "progressToken", rawString(tasks.ProgressToken(t.ID))); err == nil {
		meta = m
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
	if !b.upstreamModern(ctx) {
		m, err := jsonrpc.Parse(body)
		if err != nil {
			return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "ExecutionFailed", "Encoding the call failed")
		}
		// The upstream's questions during the call go to the task's owner (execution.Relay).
		relay := execution.NewRelay(ctx, b.up)
		defer relay.Close()
		msg, e := b.bridgeCall(ctx, taskBridgeOwner(t.Owner), t.Headers, legacyBody(m), relay.Handle)
		return callOutcome(msg, e)
	}
	hdr := execution.CallerHeaders(t.Headers, "")
	hdr = modernHeaders(hdr, "tools/call", t.Tool)
	note := tasks.NoteFrom(ctx)
	for round := 0; ; round++ {
		rep, err := b.up.Call(ctx, hdr, body, func(m *jsonrpc.Message) { execution.Note(note, m) })
		if err != nil {
			return nil, upstream.AsError(err).RPCError()
		}
		if rep.Msg.Error == nil && round < maxInputRounds && isInputRequired(rep.Msg.Result) {
			// MRTR: the upstream's questions go to the task's owner (execution.AskAll), the
			// answers come back as the retry's inputResponses.
			answers, e := execution.AskAll(ctx, jsonrpc.Member(rep.Msg.Result, "inputRequests"))
			if e != nil {
				return nil, e
			}
			if body, err = retryBody(body, answers, jsonrpc.Member(rep.Msg.Result, "requestState")); err != nil {
				return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "UpstreamInvalid", "Could not build the retry: "+err.Error())
			}
			continue
		}
		return callOutcome(rep.Msg, nil)
	}
}
