package execution

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
)

// maxPendingPerTask bounds the server→client requests kept for one promoted call.
const maxPendingPerTask = 32

type outcome struct {
	result json.RawMessage
	err    *jsonrpc.Error
}

type promoted struct {
	session string
	ch      chan outcome          // the in-flight call's answer (buffered, one)
	asks    chan *jsonrpc.Message // server→client requests for the task's execution to relay (bounded)
	pending []json.RawMessage     // requests that found asks full: shown, never answered
}

// Promotions is the registry of plain calls handed over to tasks while in flight
// (tasks.promote_after), keyed by task id: the task's execution waits here for the call's
// answer, and server→client requests that arrive meanwhile are kept for
// tollgate_get_task / tollgate_await_activity (gwtools.Pending).
type Promotions struct {
	mu    sync.Mutex
	calls map[string]*promoted
}

// NewPromotions returns an empty registry.
func NewPromotions() *Promotions { return &Promotions{calls: map[string]*promoted{}} }

// Begin registers the promoted call of task id (created with Promoted, not yet started) and
// returns the sink the relay feeds with the rest of the exchange.
func (p *Promotions) Begin(taskID, session string) *Sink {
	c := &promoted{session: session, ch: make(chan outcome, 1), asks: make(chan *jsonrpc.Message, maxPendingPerTask)}
	p.mu.Lock()
	p.calls[taskID] = c
	p.mu.Unlock()
	return &Sink{p: p, taskID: taskID, call: c}
}

// Drop forgets task id's promoted call.
func (p *Promotions) Drop(taskID string) {
	p.mu.Lock()
	delete(p.calls, taskID)
	p.mu.Unlock()
}

// await is the execution of a promoted task: the in-flight call's answer, or PromotionLost
// when this process never saw the call (it restarted). The upstream's requests on the call's
// stream after the promotion go to ask (the task's Relay: its owner answers them).
func (p *Promotions) await(ctx context.Context, taskID string, ask func(*jsonrpc.Message)) (json.RawMessage, *jsonrpc.Error) {
	p.mu.Lock()
	c, ok := p.calls[taskID]
	p.mu.Unlock()
	if !ok {
		return nil, jsonrpc.NewError(jsonrpc.CodeUpstreamUnreachable, "PromotionLost",
			"The promoted call's connection to the upstream is gone (Tollgate restarted?)")
	}
	defer p.Drop(taskID)
	for {
		select {
		case o := <-c.ch:
			return o.result, o.err
		case m := <-c.asks:
			ask(m)
		case <-ctx.Done():
			return nil, jsonrpc.NewError(jsonrpc.CodeUpstreamTimeout, "UpstreamTimeout",
				"The promoted call did not finish within the task's TTL or tasks.execution_timeout")
		}
	}
}

// PendingFor implements gwtools.Pending: server→client requests that arrived for a promoted
// call of this session after it became a task (of taskID only, when given).
func (p *Promotions) PendingFor(session, taskID string) (server, client []json.RawMessage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if taskID != "" {
		if c := p.calls[taskID]; c != nil {
			client = append(client, c.pending...)
		}
		return nil, client
	}
	for _, c := range p.calls {
		if c.session == session {
			client = append(client, c.pending...)
		}
	}
	return nil, client
}

// Sink receives the rest of a promoted exchange (intercept.PromotedSink).
type Sink struct {
	p      *Promotions
	taskID string
	call   *promoted
}

// Other hands a server→client request the upstream sent for the call after promotion to the
// task's execution, which relays it to the task's owner; beyond maxPendingPerTask waiting it
// is only kept for display.
func (s *Sink) Other(m *jsonrpc.Message) {
	if m.Kind != jsonrpc.KindRequest {
		return
	}
	// The event's bytes may be reused by the reader: the execution gets a copy.
	if cp, err := jsonrpc.Parse(append(json.RawMessage(nil), m.Raw...)); err == nil {
		select {
		case s.call.asks <- cp:
			return
		default:
		}
	}
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if len(s.call.pending) < maxPendingPerTask {
		s.call.pending = append(s.call.pending, append(json.RawMessage(nil), m.Raw...))
	}
}

// Done delivers the upstream's answer (or the failure to get one) to the task's execution.
func (s *Sink) Done(resp *jsonrpc.Message, err *jsonrpc.Error) {
	o := outcome{err: err}
	if resp != nil {
		switch {
		case resp.Error != nil:
			o.err = jsonrpc.DecodeError(resp.Error)
		default:
			o.result = append(json.RawMessage(nil), resp.Result...)
		}
	}
	s.call.ch <- o // buffered: never blocks
	s.p.mu.Lock()
	s.call.pending = nil
	s.p.mu.Unlock()
}
