package intercept

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/era"
	"github.com/tollgate-mcp/tollgate/internal/governance"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// approvalKey is the inputRequests key of the approval question Tollgate asks a requester
// (workflow destination elicitation). One question per task, never reused for another
// (tasks extension "Task Update Requests": keys unique over a task's lifetime).
const approvalKey = "tollgate-approval"

// modernToolsCall governs a modern tools/call: deny → -32003; forward → upstream (an upstream
// task it creates is bound to the caller); approve → a tg_ task returned as CreateTaskResult
// when the request declared the tasks extension, else -32021 or the tasks.sync_approval
// fallback (tasks extension "Capability Negotiation": MUST NOT return CreateTaskResult to a
// client that did not declare it).
func (g *Gateway) modernToolsCall(ctx context.Context, x *Exchange) Result {
	p, e := decodeCall(x.Msg.Params, "name", "arguments", "_meta", "inputResponses", "requestState")
	if e != nil {
		return modernError(x, e)
	}
	own := owner(x)
	if e := g.unknownOwnTool(p.Name); e != nil {
		return modernError(x, e)
	}
	if g.isOwnTool(p.Name) {
		return modernize(g.ownTool(x, p))
	}
	s := g.d.Snapshots.Load()
	if e := g.rates.allow(s.Config.Server.RateLimit, rateKey(x, own), time.Now()); e != nil {
		g.m.rateLimited()
		return modernError(x, e)
	}
	g.computeOnDemand(s, p.Name)
	hold, qe := g.pinCheck(s, p.Name)
	if qe != nil {
		return modernError(x, qe)
	}
	eff := holdQuarantined(s, s.Evaluate(ctx, g.log, caller(x), p.Name, g.ann.tool(p.Name).hints, p.Arguments), hold)
	g.m.decision(string(eff.Action))
	g.m.toolCall(p.Name, string(eff.Action))
	g.audited(x, s, p.Name, eff)
	switch {
	case eff.Action == config.ActionDeny:
		return modernError(x, governance.DeniedError(p.Name, eff))
	case eff.Action == config.ActionForward && !eff.Decision.ForceRequired:
		if !g.br.upstreamModern(ctx) {
			return g.bridge(x, nil)
		}
		return Result{Forward: &Forward{Timeout: s.Config.Server.SyncForwardTimeout.D(), Transform: g.bindUpstreamTask(own)}}
	case eff.Action == config.ActionForward:
		// force_required: Tollgate runs the call as its own task (accelerated).
		if !x.Modern.Tasks {
			g.m.validation("required")
			return modernError(x, forceRequiredError(p.Name))
		}
		return g.modernCreate(ctx, x, p, "", true)
	}
	// approve
	if x.Modern.Tasks {
		return g.modernCreate(ctx, x, p, eff.Decision.Workflow, false)
	}
	if eff.Decision.ForceRequired {
		// force_required means "only as a task" in both eras: a legacy client gets
		// TaskRequired for the same call, so no fallback here either.
		g.m.validation("required")
		return modernError(x, forceRequiredError(p.Name))
	}
	if s.Config.Tasks.SyncApproval != config.SyncApprovalError {
		// The configured fallback for clients without tasks, as in the legacy era (hold,
		// promote, block), its answers in the modern result shape.
		return modernize(g.syncApproval(ctx, s, x, p, eff.Decision.Workflow))
	}
	g.m.validation("required")
	return modernError(x, era.MissingTasksCapability(fmt.Sprintf(
		"Missing required client capability: calls to tool %q need human approval and run as a task; declare the %s extension (or set tasks.sync_approval)", p.Name, era.TasksExtension)))
}

// forceRequiredError refuses a call of a force_required tool from a client without the tasks
// extension (the legacy era's TaskRequired).
func forceRequiredError(tool string) *jsonrpc.Error {
	return era.MissingTasksCapability(fmt.Sprintf(
		"Missing required client capability: tool %q runs as a task (task_annotation_overrides.force_required); declare the %s extension", tool, era.TasksExtension))
}

// modernize gives a legacy-shaped answer the modern shape: resultType "complete" on results,
// the modern HTTP status on errors answered at once.
func modernize(r Result) Result {
	fix := func(b []byte) []byte {
		m, err := jsonrpc.Parse(b)
		if err != nil || m.Kind != jsonrpc.KindResponse || m.Result == nil {
			return b
		}
		return m.WithResult(withResultType(m.Result))
	}
	if r.Reply != nil {
		if m, err := jsonrpc.Parse(r.Reply); err == nil && m.Error != nil {
			var e jsonrpc.Error
			if json.Unmarshal(m.Error, &e) == nil {
				r.Status = era.HTTPStatus(e.Code)
			}
		}
		r.Reply = fix(r.Reply)
	}
	if w := r.Wait; w != nil {
		r.Wait = func(ctx context.Context, emit func([]byte) bool) []byte {
			if b := w(ctx, emit); b != nil {
				return fix(b)
			}
			return nil
		}
	}
	return r
}

// modernCreate creates a Tollgate task and answers with the flat CreateTaskResult; the task is
// durably stored before the answer (tasks extension "Task Creation": MUST NOT return it
// earlier).
func (g *Gateway) modernCreate(ctx context.Context, x *Exchange, p callParams, workflow string, accelerated bool) Result {
	t, _, e := g.newTask(ctx, x, p, 0, workflow, accelerated, false)
	if e != nil {
		return modernError(x, e)
	}
	r := ReplyResult(x, t.CreateTaskResult())
	if accelerated {
		id := t.ID
		r.After = func() { g.d.Tasks.Start(id) }
	}
	return r
}

// executionMeta is the _meta an approved call is executed with: the caller's, less the tasks
// extension (Tollgate waits for the result itself, so the upstream must answer the call, not
// turn it into a task of its own).
func executionMeta(meta json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(meta, &m) != nil || m == nil {
		return json.RawMessage(ownMeta)
	}
	var caps map[string]json.RawMessage
	if json.Unmarshal(m[era.MetaClientCapabilities], &caps) == nil && caps != nil {
		var ext map[string]json.RawMessage
		if json.Unmarshal(caps["extensions"], &ext) == nil && ext != nil {
			delete(ext, era.TasksExtension)
			caps["extensions"], _ = jsonrpc.Marshal(ext)
		}
		m[era.MetaClientCapabilities], _ = jsonrpc.Marshal(caps)
	}
	b, err := jsonrpc.Marshal(m)
	if err != nil {
		return json.RawMessage(ownMeta)
	}
	return b
}

// modernTaskID reads params.taskId of a modern tasks/* request and routes it: a Tollgate task
// id is returned; for any other id the answer (forwarded upstream, or an error) comes back.
// Tasks methods need the extension declared (tasks extension "Error Handling": -32021 for
// non-declaring clients).
func (g *Gateway) modernTaskID(ctx context.Context, x *Exchange, own string) (string, *Result) {
	if !x.Modern.Tasks {
		r := modernError(x, era.MissingTasksCapability(fmt.Sprintf(
			"Missing required client capability: %s needs the %s extension declared in _meta", x.Msg.Method, era.TasksExtension)))
		return "", &r
	}
	id, e := taskIDParam(x)
	if e != nil {
		r := modernError(x, e)
		return "", &r
	}
	if boundTo, ok := g.upstreamTaskOwner(ctx, id); ok {
		// An upstream task (even one whose id happens to start with tg_).
		if boundTo != own {
			r := modernError(x, notFound(id))
			return "", &r
		}
		r := g.modernOther(ctx, x)
		return "", &r
	}
	if strings.HasPrefix(id, tasks.IDPrefix) {
		return id, nil
	}
	if own != tasks.Anonymous {
		// Upstream task ids are bound to the caller that created them; an unknown one is not
		// this caller's.
		r := modernError(x, notFound(id))
		return "", &r
	}
	// Anonymous callers: the id is the capability, the upstream decides.
	r := g.modernOther(ctx, x)
	return "", &r
}

// modernTasksGet answers tasks/get with the DetailedTask (tasks extension "Task Polling").
func (g *Gateway) modernTasksGet(ctx context.Context, x *Exchange) Result {
	own := owner(x)
	id, other := g.modernTaskID(ctx, x, own)
	if other != nil {
		return *other
	}
	t, err := g.d.Tasks.Get(ctx, own, id)
	if err != nil {
		return g.modernTaskError(x, id, err)
	}
	if t.State.Terminal() && t.IdemKey != "" && t.DeliveredAt.IsZero() {
		g.deliversOutcome(x, id) // the DetailedTask inlines the result or error
	}
	return ReplyResult(x, t.DetailedJSON(g.inputRequests(t)))
}

// questionKeyPrefix starts the inputRequests key of the upstream's question during a task's
// call; the rest is the question's id.
const questionKeyPrefix = "tollgate-question-"

// inputRequests are the outstanding requests of a task: the approval question while it awaits
// its requester's approval, the upstream's question while one waits for the owner.
func (g *Gateway) inputRequests(t *tasks.Task) json.RawMessage {
	if q := t.PendingQuestion(); q != nil {
		params := q.Params
		if len(params) == 0 {
			params = json.RawMessage(`{}`)
		}
		b, err := jsonrpc.Marshal(map[string]any{questionKeyPrefix + q.ID: map[string]any{"method": q.Method, "params": params}})
		if err != nil {
			return nil
		}
		return b
	}
	if !t.AskRequester || t.State != tasks.AwaitingApproval {
		return nil
	}
	params := g.approvalQuestion(t)
	params["mode"] = "form"
	b, err := jsonrpc.Marshal(map[string]any{approvalKey: map[string]any{"method": "elicitation/create", "params": params}})
	if err != nil {
		return nil
	}
	return b
}

// modernTasksUpdate takes inputResponses (tasks extension "Task Update Requests"): the answer
// to the approval question decides the task; unknown or already answered keys are ignored.
func (g *Gateway) modernTasksUpdate(ctx context.Context, x *Exchange) Result {
	own := owner(x)
	id, other := g.modernTaskID(ctx, x, own)
	if other != nil {
		return *other
	}
	var p struct {
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
	}
	if err := json.Unmarshal(x.Msg.Params, &p); err != nil {
		return modernError(x, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "InvalidParams", "Invalid params: inputResponses must be an object"))
	}
	t, err := g.d.Tasks.Get(ctx, own, id)
	if err != nil {
		return g.modernTaskError(x, id, err)
	}
	if ans, ok := p.InputResponses[approvalKey]; ok && t.AskRequester && t.State == tasks.AwaitingApproval {
		g.recordAnswer(ctx, id, ans, true)
	}
	// the owner's answers to the upstream's questions: each taken once, checked by the manager
	if e := g.answerQuestions(ctx, own, id, p.InputResponses); e != nil {
		return modernError(x, e)
	}
	return modernReply(x, []byte(`{}`))
}

// modernTasksCancel acknowledges tasks/cancel (tasks extension "Task Cancellation": an empty
// result; cancelling a finished task changes nothing).
func (g *Gateway) modernTasksCancel(ctx context.Context, x *Exchange) Result {
	own := owner(x)
	id, other := g.modernTaskID(ctx, x, own)
	if other != nil {
		return *other
	}
	if _, err := g.d.Tasks.Cancel(ctx, own, id); err != nil && !errors.Is(err, tasks.ErrTerminal) {
		return g.modernTaskError(x, id, err)
	}
	return modernReply(x, []byte(`{}`))
}
