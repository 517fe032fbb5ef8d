package intercept

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/governance"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// holdProgressEvery is how often a held call with a progressToken gets notifications/progress.
// It is well below common client timeouts so clients that reset their timeout on progress
// (the TypeScript SDK with resetTimeoutOnProgress) keep waiting.
const holdProgressEvery = 10 * time.Second

// maxProgressTokenLen bounds the progressToken echoed back to the client.
const maxProgressTokenLen = 256

// ErrShuttingDown is the cause the proxy cancels a Wait's context with when Tollgate shuts
// down (Result.Settles).
var ErrShuttingDown = errors.New("tollgate is shutting down")

// settleTimeout bounds the store read that settles a held call at shutdown.
const settleTimeout = 2 * time.Second

// approvalMetaKey names Tollgate's own _meta member on a settled held call.
const approvalMetaKey = "io.tollgate/approval"

// hold answers a plain call that needs approval (tasks.sync_approval: hold): it waits for the
// decision up to tasks.hold_budget and then returns the real outcome, or — still undecided —
// settles with a normal tool result that names the task and how to collect the outcome, so a
// client without task support and with a ~60 s request timeout gets an answer in time.
func (g *Gateway) hold(s *governance.Snapshot, x *Exchange, p callParams, t *tasks.Task, attached bool) Result {
	budget := s.Config.Tasks.HoldBudget.D()
	own, id := owner(x), t.ID
	// The wait keeps what it needs of t and p, not them: a held call is an open connection,
	// and the task (arguments, headers) is in the store.
	tool, wf, status := p.Name, t.Workflow, t.StatusMessage
	return Result{Settles: true, Wait: func(ctx context.Context, emit func([]byte) bool) []byte {
		outcome := holdAnswered
		defer func(end func(string)) { end(outcome) }(g.m.holdStarted(attached))
		hctx, cancel := context.WithTimeout(ctx, budget)
		defer cancel()
		// One loop on this goroutine waits, relays the upstream's questions during the
		// approved call (outcomeOrQuestion) and sends the progress notifications.
		// The upstream's progress and log messages once the call runs come on this stream too.
		pr := newHeldProgress(x, emit, status, budget, progressMeta(id, g.d.ConsoleURL))
		r := tasks.Relay{Note: pr.note}
		if pr.tick() {
			r.Tick, r.Every = pr.tick, holdProgressEvery
		}
		answer := g.outcomeOrQuestion(hctx, x, own, id, emit, r)
		switch {
		case answer != nil:
			return answer
		case errors.Is(context.Cause(ctx), ErrShuttingDown):
			// Tollgate stops: settle now as if the budget ran out, so the client has the
			// documented "call again" answer instead of a cut connection. The task lives on
			// in the store; the retry attaches to it (on this replica once restarted, or
			// another one sharing the store).
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
			defer cancel()
		case ctx.Err() != nil || hctx.Err() == nil:
			outcome = holdClientGone
			return nil // the client went away; the task goes on and a retry attaches to it
		}
		cur, err := g.d.Tasks.Get(ctx, own, id)
		if err != nil {
			return jsonrpc.ErrorResponse(x.Msg.ID, g.taskError(x, id, err).WithCorrelation(x.CorrID))
		}
		if cur.State.Terminal() { // decided (or timed out) just now
			return g.outcomeResponse(ctx, x, own, id)
		}
		outcome = holdSettled
		g.log.Info("held call settled undecided", "task_id", id, "tool", tool, "workflow", wf, "budget", budget.String())
		return jsonrpc.ResultResponse(x.Msg.ID, heldResult(cur, g.d.ConsoleURL, g.ann.tool(tool).outputSchema))
	}}
}

// progressToken returns params._meta.progressToken as sent (a JSON string or integer), or nil
// when the client asked for no progress (spec 2025-11-25 basic/utilities/progress).
func progressToken(params json.RawMessage) json.RawMessage {
	tok := jsonrpc.Member(jsonrpc.Member(params, "_meta"), "progressToken")
	if len(tok) == 0 || len(tok) > maxProgressTokenLen {
		return nil
	}
	if tok[0] == '"' {
		var s string
		if json.Unmarshal(tok, &s) != nil {
			return nil
		}
		return tok
	}
	if _, err := strconv.ParseInt(string(tok), 10, 64); err != nil {
		return nil
	}
	return tok
}

// progressMeta is the _meta of a held call's progress notifications: the task it waits on
// (spec 2025-11-25 tasks: messages about a task carry related-task) and where to approve it,
// so a client can say so at once rather than when the budget runs out.
func progressMeta(id, consoleURL string) string {
	return `{"` + tasks.RelatedTaskKey + `":{"taskId":` + string(rawString(id)) + `},"` + approvalMetaKey +
		`":{"taskId":` + string(rawString(id)) + `,"consoleUrl":` + string(rawString(consoleURL)) + `}}`
}

// heldResult is the tool result of a held call still undecided when tasks.hold_budget ran out:
// what happened, and how to get the outcome. It is a normal result (isError false) — the call
// did not fail — except for a tool with an outputSchema, whose non-error results clients
// validate against that schema: there isError true keeps them from rejecting the answer.
func heldResult(t *tasks.Task, consoleURL string, outputSchema bool) []byte {
	where := "in the approvals console or API"
	if consoleURL != "" {
		where = "at " + consoleURL
	}
	what := "is waiting for a human approval"
	if t.State == tasks.Approved || t.State == tasks.Executing {
		what = "was approved and is still running"
	}
	decide := "Approvers decide " + where + ". "
	if consoleURL != "" && strings.Contains(t.StatusMessage, consoleURL) {
		decide = "" // the status message already says where (tasks: Awaiting approval by a human …)
	}
	text := fmt.Sprintf("The call to %s %s (task %s: %s); nothing has been returned yet. "+
		"%sTo get the outcome, call %s again with exactly the same arguments: "+
		"the call attaches to this same approval (no second request is made) and returns the tool's result "+
		"once it is approved and executed, or the rejection. Alternatively call tollgate_await_activity to wait, "+
		`then tollgate_get_task_result with {"task_id":"%s"}.`,
		t.Tool, what, t.ID, t.StatusMessage, decide, t.Tool, t.ID)
	meta := fmt.Sprintf(`{"taskId":%s,"status":%s,"state":%s,"statusMessage":%s,"workflow":%s,"consoleUrl":%s,"retry":"same_call","next":["tollgate_await_activity","tollgate_get_task_result"]}`,
		rawString(t.ID), rawString(t.WireStatus()), rawString(string(t.State)), rawString(t.StatusMessage),
		rawString(t.Workflow), rawString(consoleURL))
	isError := "false"
	if outputSchema {
		isError = "true"
	}
	return []byte(`{"content":[{"type":"text","text":` + string(rawString(text)) + `}],"isError":` + isError +
		`,"_meta":{"` + tasks.RelatedTaskKey + `":{"taskId":` + string(rawString(t.ID)) + `},"` + approvalMetaKey + `":` + meta + `}}`)
}
