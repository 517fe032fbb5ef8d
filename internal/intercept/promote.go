package intercept

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// promotionHeader marks a task whose call is already in flight upstream (tasks.promote_after):
// its execution waits for that call's answer instead of calling again. It never leaves
// Tollgate (Execute does not replay headers for such tasks).
const promotionHeader = "X-Tollgate-Promotion"

// maxPendingPerTask bounds the server→client requests kept for one promoted call.
const maxPendingPerTask = 32

type promotedOutcome struct {
	result json.RawMessage
	err    *jsonrpc.Error
}

// promotions tracks calls handed over to tasks and the server→client requests that arrived
// for them afterwards (surfaced by tollgate_get_task / tollgate_await_activity).
type promotions struct {
	mu      sync.Mutex
	waiting map[string]chan promotedOutcome // token → the in-flight call's answer
	pending map[string][]json.RawMessage    // task id → server→client requests
}

func newPromotions() *promotions {
	return &promotions{waiting: map[string]chan promotedOutcome{}, pending: map[string][]json.RawMessage{}}
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// promotion builds the Promotion of a plain forwarded tools/call. After promotion the call may
// run for the task's TTL, but no longer than tasks.execution_timeout, as any task's call.
func (g *Gateway) promotion(after, ttl, execLimit time.Duration, p callParams) *Promotion {
	bound := ttl
	if execLimit > 0 {
		bound = min(ttl, execLimit)
	}
	return &Promotion{After: after, Bound: bound, Start: func(x *Exchange) ([]byte, PromotedSink) {
		token := newToken()
		ch := make(chan promotedOutcome, 1)
		g.prom.mu.Lock()
		g.prom.waiting[token] = ch
		g.prom.mu.Unlock()
		if x.Session == nil {
			g.prom.drop(token)
			return nil, nil
		}
		hdr := captureHeaders(x.HTTP.Header)
		if hdr == nil {
			hdr = http.Header{}
		}
		hdr.Set(promotionHeader, token)
		// The task owns the result from now on; it is created "accelerated" (no approval: the
		// rule already forwarded the call) and its execution waits for the in-flight answer.
		t, err := g.d.Tasks.Create(context.WithoutCancel(x.HTTP.Context()), tasks.CreateRequest{
			Owner: owner(x), SessionID: x.Session.ID, Tool: p.Name, Arguments: p.Arguments,
			Headers: hdr, TTL: ttl, Accelerated: true,
		})
		if err != nil {
			g.prom.drop(token)
			g.log.Warn("promotion failed; the call continues synchronously", "tool", p.Name, "error", err.Error())
			return nil, nil
		}
		g.log.Info("slow call promoted to a task", "tool", p.Name, "task_id", t.ID, "after", after.String())
		return jsonrpc.ResultResponse(x.Msg.ID, promotedSlowResult(t, after)), &promotedSink{g: g, token: token, taskID: t.ID, ch: ch}
	}}
}

func (p *promotions) drop(token string) {
	p.mu.Lock()
	delete(p.waiting, token)
	p.mu.Unlock()
}

// await is called from Execute for a promoted task.
func (p *promotions) await(ctx context.Context, token string) (json.RawMessage, *jsonrpc.Error) {
	p.mu.Lock()
	ch, ok := p.waiting[token]
	p.mu.Unlock()
	if !ok {
		return nil, jsonrpc.NewError(jsonrpc.CodeUpstreamUnreachable, "PromotionLost",
			"The promoted call's connection to the upstream is gone (Tollgate restarted?)")
	}
	defer p.drop(token)
	select {
	case o := <-ch:
		return o.result, o.err
	case <-ctx.Done():
		return nil, jsonrpc.NewError(jsonrpc.CodeUpstreamTimeout, "UpstreamTimeout",
			"The promoted call did not finish within the task's TTL or tasks.execution_timeout")
	}
}

type promotedSink struct {
	g      *Gateway
	token  string
	taskID string
	ch     chan promotedOutcome
}

func (s *promotedSink) Other(m *jsonrpc.Message) {
	if m.Kind != jsonrpc.KindRequest {
		return
	}
	s.g.prom.mu.Lock()
	defer s.g.prom.mu.Unlock()
	if q := s.g.prom.pending[s.taskID]; len(q) < maxPendingPerTask {
		s.g.prom.pending[s.taskID] = append(q, append(json.RawMessage(nil), m.Raw...))
	}
}

func (s *promotedSink) Done(resp *jsonrpc.Message, err *jsonrpc.Error) {
	o := promotedOutcome{err: err}
	if resp != nil {
		switch {
		case resp.Error != nil:
			o.err = jsonrpc.DecodeError(resp.Error)
		default:
			o.result = append(json.RawMessage(nil), resp.Result...)
		}
	}
	s.ch <- o // buffered: never blocks
	s.g.prom.mu.Lock()
	delete(s.g.prom.pending, s.taskID)
	s.g.prom.mu.Unlock()
}

// PendingFor implements gwtools.Pending: server→client requests that arrived for a promoted
// call of this session after it became a task.
func (g *Gateway) PendingFor(session, taskID string) (server, client []json.RawMessage) {
	g.prom.mu.Lock()
	defer g.prom.mu.Unlock()
	if taskID != "" {
		return nil, append([]json.RawMessage(nil), g.prom.pending[taskID]...)
	}
	for id, q := range g.prom.pending {
		if t, err := g.d.Tasks.Lookup(context.Background(), id); err == nil && t.SessionID == session {
			client = append(client, q...)
		}
	}
	return nil, client
}

func promotedSlowResult(t *tasks.Task, after time.Duration) []byte {
	text := fmt.Sprintf("The call to %s is taking longer than %s and continues as task %s. "+
		"Call tollgate_get_task_result with {\"task_id\":\"%s\"} (it can wait with timeout_ms) "+
		"or tollgate_await_activity to be told when it finishes.", t.Tool, after, t.ID, t.ID)
	sc := fmt.Sprintf(`{"taskId":%s,"status":"working","promoted":true,"next":["tollgate_get_task_result","tollgate_await_activity"]}`, rawString(t.ID))
	return handoffResult(t.ID, text, sc)
}
