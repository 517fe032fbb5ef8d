package execution

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"sync"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

// Relay puts the upstream's server→client requests during one task execution to the task's
// owner (tasks.AskerFrom: the question is kept on the task, in the store) and posts each
// answer back to the upstream. Each question waits on a goroutine of its own, so the call's
// stream keeps being read; Close ends the waits (the call is over) and waits for them.
type Relay struct {
	up     *upstream.Client
	ask    tasks.AskFunc
	note   tasks.NoteFunc
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewRelay returns a Relay for the execution whose context is ctx; it refuses every request
// (NotBridged) when ctx carries no asker.
func NewRelay(ctx context.Context, up *upstream.Client) *Relay {
	r := &Relay{up: up, ask: tasks.AskerFrom(ctx), note: tasks.NoteFrom(ctx)}
	r.ctx, r.cancel = context.WithCancel(ctx)
	return r
}

// Handle answers m, a request of the upstream's received with session headers hdr: a ping at
// once, a question Tollgate relays once its owner answered (or tasks.input_timeout passed),
// anything else with NotBridged. A notification of the call's (progress, log message) goes to
// whoever follows the task (tasks.NoteFrom). answered, if set, runs once the answer is posted
// (an upstream.Asker's callback).
func (r *Relay) Handle(hdr http.Header, m *jsonrpc.Message, answered func()) {
	if answered == nil {
		answered = func() {}
	}
	if m.Kind != jsonrpc.KindRequest {
		if m.Kind == jsonrpc.KindNotification {
			Note(r.note, m)
		}
		answered()
		return
	}
	switch {
	case m.Method == "ping":
		Answer(r.up, hdr, jsonrpc.ResultResponse(m.ID, []byte(`{}`)))
		answered()
	case r.ask != nil && tasks.Relayable(m.Method):
		id, method, params := m.ID, m.Method, json.RawMessage(m.Params)
		r.wg.Go(func() {
			defer answered()
			res, rpcErr := r.ask(r.ctx, method, params)
			if rpcErr != nil {
				Answer(r.up, hdr, jsonrpc.ErrorResponse(id, rpcErr))
				return
			}
			Answer(r.up, hdr, jsonrpc.ResultResponse(id, res))
		})
	default:
		// No one can answer it: refuse at once, so the tool decides instead of waiting for an
		// answer nobody sends.
		Answer(r.up, hdr, jsonrpc.ErrorResponse(m.ID, noClientToAsk(m.Method)))
		answered()
	}
}

// Close ends the questions still waiting and waits for their goroutines.
func (r *Relay) Close() {
	r.cancel()
	r.wg.Wait()
}

// AskAll puts each entry of a 2026-07-28 InputRequiredResult's inputRequests (key → {method,
// params}) to the task's owner in turn (tasks.AskerFrom) and returns the answers by key: the
// inputResponses of the retry (spec 2026-07-28 basic/patterns/mrtr). An owner's error answer,
// a question Tollgate does not relay, or no asker in ctx end the call with that error.
func AskAll(ctx context.Context, inputRequests json.RawMessage) (map[string]json.RawMessage, *jsonrpc.Error) {
	var reqs map[string]struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(inputRequests, &reqs); err != nil || len(reqs) == 0 {
		return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "UnsupportedResult", "The upstream asked for input without usable inputRequests")
	}
	ask := tasks.AskerFrom(ctx)
	if ask == nil {
		return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "UnsupportedResult", "The upstream asked for input, and this call has no owner to ask")
	}
	keys := slices.Sorted(maps.Keys(reqs))
	answers := make(map[string]json.RawMessage, len(reqs))
	for _, k := range keys {
		res, rpcErr := ask(ctx, reqs[k].Method, reqs[k].Params)
		if rpcErr != nil {
			return nil, rpcErr
		}
		answers[k] = res
	}
	return answers, nil
}

// Note publishes m, a notification of the upstream's during a task's call, with pub (a nil
// pub, outside an execution, drops it); only progress and log messages are the caller's.
func Note(pub tasks.NoteFunc, m *jsonrpc.Message) {
	if pub != nil && m.Kind == jsonrpc.KindNotification && (m.Method == tasks.MethodProgress || m.Method == tasks.MethodLog) {
		pub(tasks.Note{Method: m.Method, Params: slices.Clone(json.RawMessage(m.Params))})
	}
}
