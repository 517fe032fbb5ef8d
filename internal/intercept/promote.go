package intercept

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/execution"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/source"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// promotion builds the Promotion of a plain forwarded tools/call. After promotion the call may
// run for the task's TTL, but no longer than tasks.execution_timeout, as any task's call.
func (g *Gateway) promotion(after, ttl, execLimit time.Duration, p callParams) *Promotion {
	bound := ttl
	if execLimit > 0 {
		bound = min(ttl, execLimit)
	}
	return &Promotion{After: after, Bound: bound, Start: func(x *Exchange) ([]byte, PromotedSink) {
		if x.Session == nil {
			return nil, nil
		}
		// The task owns the result from now on; it is created accelerated (no approval: the
		// rule already forwarded the call) and promoted: its execution waits for the
		// in-flight answer, registered before the task starts.
		t, err := g.d.Tasks.Create(context.WithoutCancel(x.HTTP.Context()), tasks.CreateRequest{
			Owner: owner(x), Source: source.Of(x.HTTP, x.Subject), SessionID: x.Session.ID, Tool: p.Name, Arguments: p.Arguments,
			Headers: execution.CaptureHeaders(x.HTTP.Header), TTL: ttl, Accelerated: true, Promoted: true, DeferStart: true,
		})
		if err != nil {
			g.log.Warn("promotion failed; the call continues synchronously", "tool", p.Name, "error", err.Error())
			return nil, nil
		}
		sink := g.d.Promotions.Begin(t.ID, x.Session.ID)
		g.d.Tasks.Start(t.ID)
		g.log.Info("slow call promoted to a task", "tool", p.Name, "task_id", t.ID, "after", after.String())
		return jsonrpc.ResultResponse(x.Msg.ID, promotedSlowResult(t, after)), sink
	}}
}

func promotedSlowResult(t *tasks.Task, after time.Duration) []byte {
	text := fmt.Sprintf("The call to %s is taking longer than %s and continues as task %s. "+
		"Call tollgate_get_task_result with {\"task_id\":\"%s\"} (it can wait with timeout_ms) "+
		"or tollgate_await_activity to be told when it finishes.", t.Tool, after, t.ID, t.ID)
	sc := fmt.Sprintf(`{"taskId":%s,"status":"working","promoted":true,"next":["tollgate_get_task_result","tollgate_await_activity"]}`, rawString(t.ID))
	return handoffResult(t.ID, text, sc)
}
