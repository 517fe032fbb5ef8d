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
	"github.com/tollgate-mcp/tollgate/internal/gwtools"
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
	if err := jsonrpc.CheckParams(x.Msg.Params, "name", "arguments", "_meta", "inputResponses", "requestState"); err != nil {
		return modernError(x, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "InvalidParams", "Invalid params: "+err.Error()))
	}
	var p callParams
	if err := json.Unmarshal(x.Msg.Params, &p); err != nil || p.Name == "" {
		return modernError(x, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "InvalidParams",
			"Invalid params: tools/call needs {\"name\": string, \"arguments\"?: object}"))
	}
	own := g.modernOwner(x)
	if e := g.unknownOwnTool(p.Name); e != nil {
		return modernError(x, e)
	}
	if g.isOwnTool(p.Name) {
		return g.modernOwnTool(x, p, own)
	}
	s := g.d.Snapshots.Load()
	if e := g.rates.allow(s.Config.Server.RateLimit, rateKey(x, own), time.Now()); e != nil {
		g.m.rateLimited()
		return modernError(x, e)
	}
	g.computeOnDemand(s, p.Name)
	eff := s.Evaluate(ctx, g.log, governance.Caller{Subject: x.Subject}, p.Name, g.tool(p.Name).hints, p.Arguments)
	g.m.decision(string(eff.Action))
	g.m.toolCall(p.Name, string(eff.Action))
	switch {
	case eff.Action == config.ActionDeny:
		return modernError(x, governance.DeniedError(p.Name, eff))
	case eff.Action == config.ActionForward && !eff.Decision.ForceRequired:
		if !g.upstreamModern(ctx) {
			return g.bridge(x, nil)
		}
		return Result{Forward: &Forward{Timeout: s.Config.Server.SyncForwardTimeout.D(), Transform: g.bindUpstreamTask(own)}}
	case eff.Action == config.ActionForward:
		// force_required: Tollgate runs the call as its own task (accelerated).
		if !x.Modern.Tasks {
			g.m.validation("required")
			return modernError(x, era.MissingTasksCapability(fmt.Sprintf(
				"Missing required client capability: tool %q runs as a task (task_annotation_overrides.force_required); declare the %s extension", p.Name, era.TasksExtension)))
		}
		return g.modernCreate(ctx, x, p, own, "", true)
	}
	// approve
	if x.Modern.Tasks {
		return g.modernCreate(ctx, x, p, own, eff.Decision.Workflow, false)
	}
	switch s.Config.Tasks.SyncApproval {
	case config.SyncApprovalPromote, config.SyncApprovalBlock:
		t, e := g.modernTask(ctx, x, p, own, eff.Decision.Workflow, false)
		if e != nil {
			return modernError(x, e)
		}
		if s.Config.Tasks.SyncApproval == config.SyncApprovalPromote {
			return modernReply(x, promotedResult(t))
		}
		id := t.ID
		return Result{Wait: func(ctx context.Context, _ func([]byte) bool) []byte {
			res, rpcErr, err := g.d.Tasks.Result(ctx, own, id)
			if err != nil {
				return nil // client went away; the task continues
			}
			if rpcErr != nil {
				return jsonrpc.ErrorResponse(x.Msg.ID, rpcErr.WithCorrelation(x.CorrID))
			}
			return jsonrpc.ResultResponse(x.Msg.ID, withResultType(res))
		}}
	}
	g.m.validation("required")
	return modernError(x, era.MissingTasksCapability(fmt.Sprintf(
		"Missing required client capability: calls to tool %q need human approval and run as a task; declare the %s extension (or set tasks.sync_approval)", p.Name, era.TasksExtension)))
}

// modernCreate creates a Tollgate task and answers with the flat CreateTaskResult; the task is
// durably stored before the answer (tasks extension "Task Creation": MUST NOT return it
// earlier).
func (g *Gateway) modernCreate(ctx context.Context, x *Exchange, p callParams, own, workflow string, accelerated bool) Result {
	t, e := g.modernTask(ctx, x, p, own, workflow, accelerated)
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

func (g *Gateway) modernTask(ctx context.Context, x *Exchange, p callParams, own, workflow string, accelerated bool) (*tasks.Task, *jsonrpc.Error) {
	ask := false
	if wf, ok := g.d.Snapshots.Workflow(workflow); ok && !accelerated {
		ask = wf.Destination.Type == config.DestinationElicitation
	}
	t, err := g.d.Tasks.Create(ctx, tasks.CreateRequest{
		Owner: own, RequestedBy: x.Subject, Tool: p.Name, Arguments: p.Arguments,
		Headers: captureHeaders(x.HTTP.Header), Workflow: workflow,
		Accelerated: accelerated, DeferStart: accelerated, AskRequester: ask,
		Era: tasks.EraModern, Meta: executionMeta(jsonrpc.Member(x.Msg.Params, "_meta")),
	})
	if err != nil {
		var je *jsonrpc.Error
		if errors.As(err, &je) {
			return nil, je
		}
		return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "TaskCreateFailed", "Could not create task: "+err.Error())
	}
	return t, nil
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

// modernOwnTool serves a tollgate_* tool; results carry resultType "complete".
func (g *Gateway) modernOwnTool(x *Exchange, p callParams, own string) Result {
	c := gwtools.Caller{Owner: own}
	return Result{Wait: func(ctx context.Context, _ func([]byte) bool) []byte {
		res, rpcErr := g.d.Tools.Call(ctx, c, p.Name, p.Arguments)
		if rpcErr != nil {
			return jsonrpc.ErrorResponse(x.Msg.ID, rpcErr.WithCorrelation(x.CorrID))
		}
		return jsonrpc.ResultResponse(x.Msg.ID, withResultType(res))
	}}
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
	if boundTo, ok := g.modern.upTasks.lookup(id); ok {
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
	if own != anonymousOwner {
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
	own := g.modernOwner(x)
	id, other := g.modernTaskID(ctx, x, own)
	if other != nil {
		return *other
	}
	t, err := g.d.Tasks.Get(ctx, own, id)
	if err != nil {
		return modernError(x, notFound(id))
	}
	return ReplyResult(x, t.DetailedJSON(g.inputRequests(t)))
}

// inputRequests are the outstanding requests of a task awaiting its requester's approval.
func (g *Gateway) inputRequests(t *tasks.Task) json.RawMessage {
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
	own := g.modernOwner(x)
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
		return modernError(x, notFound(id))
	}
	if ans, ok := p.InputResponses[approvalKey]; ok && t.AskRequester && t.State == tasks.AwaitingApproval {
		g.recordAnswer(ctx, id, ans, true)
	}
	return modernReply(x, []byte(`{}`))
}

// modernTasksCancel acknowledges tasks/cancel (tasks extension "Task Cancellation": an empty
// result; cancelling a finished task changes nothing).
func (g *Gateway) modernTasksCancel(ctx context.Context, x *Exchange) Result {
	own := g.modernOwner(x)
	id, other := g.modernTaskID(ctx, x, own)
	if other != nil {
		return *other
	}
	if _, err := g.d.Tasks.Cancel(ctx, own, id); err != nil && !errors.Is(err, tasks.ErrTerminal) {
		return modernError(x, notFound(id))
	}
	return modernReply(x, []byte(`{}`))
}
