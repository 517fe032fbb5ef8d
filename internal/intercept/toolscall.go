package intercept

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/execution"
	"github.com/tollgate-mcp/tollgate/internal/governance"
	"github.com/tollgate-mcp/tollgate/internal/gwtools"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/logcap"
	"github.com/tollgate-mcp/tollgate/internal/rules"
	"github.com/tollgate-mcp/tollgate/internal/source"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

type callParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Task      json.RawMessage `json:"task"`
}

// taskTTL validates params.task (REQ-CORE-007 F-004, EC-SEP-001…003). present=false when the
// call is not task-augmented.
func (g *Gateway) taskTTL(s *governance.Snapshot, raw json.RawMessage, tool string) (ttl time.Duration, present bool, e *jsonrpc.Error) {
	if raw == nil || string(raw) == "null" {
		return 0, false, nil
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return 0, true, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "InvalidTaskMetadata",
			"Invalid params: task must be an object like {\"ttl\": 60000}", "tool", tool)
	}
	var t struct {
		TTL json.RawMessage `json:"ttl"`
	}
	if err := json.Unmarshal(trimmed, &t); err != nil {
		return 0, true, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "InvalidTaskMetadata",
			"Invalid params: malformed task metadata: "+err.Error(), "tool", tool)
	}
	maxTTL, defTTL := s.Config.Tasks.MaxTTL.D(), s.Config.Tasks.DefaultTTL.D()
	if t.TTL == nil || string(t.TTL) == "null" {
		return defTTL, true, nil
	}
	// Only a JSON integer literal is a TTL: "60000" (a string), 1.5 and 6e4 are refused.
	lit := string(t.TTL)
	ms, err := strconv.ParseInt(lit, 10, 64)
	var numErr *strconv.NumError
	switch {
	case err == nil && ms > 0:
	case errors.As(err, &numErr) && numErr.Err == strconv.ErrRange && lit[0] != '-':
		ms = math.MaxInt64 // an integer too large for int64 is above any max: clamp below
	default:
		return 0, true, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "InvalidTaskMetadata",
			"Invalid params: task.ttl must be a positive integer number of milliseconds", "tool", tool, "ttl", lit)
	}
	if ms > maxTTL.Milliseconds() {
		if ok, held := g.warnTTL.Allow(); ok {
			g.log.Warn("task ttl above maximum; clamped", "tool", tool, "requested_ms", logcap.Clip(lit, 32), "max_ms", maxTTL.Milliseconds(), "suppressed", held)
		}
		return maxTTL, true, nil
	}
	return time.Duration(ms) * time.Millisecond, true, nil
}

// unknownOwnTool refuses a tollgate_* name that is not one of Tollgate's tools. The prefix is
// reserved: such a call is never forwarded, so a client cannot reach an upstream tool that
// Tollgate hides from tools/list.
func (g *Gateway) unknownOwnTool(name string) *jsonrpc.Error {
	if strings.HasPrefix(name, gwtools.Prefix) && !g.isOwnTool(name) {
		return gwtools.UnknownTool(name)
	}
	return nil
}

// decodeCall reads tools/call params after refusing what decoders would read differently
// (jsonrpc.CheckParams; known are the members whose case variants are refused). The arguments
// must be an object (or absent/null, spec 2025-11-25 tools): a string or array would reach
// rules and Cedar as something no policy expects.
func decodeCall(params []byte, known ...string) (callParams, *jsonrpc.Error) {
	var p callParams
	if err := jsonrpc.CheckParams(params, known...); err != nil {
		return p, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "InvalidParams", "Invalid params: "+err.Error())
	}
	err := json.Unmarshal(params, &p)
	if a := bytes.TrimSpace(p.Arguments); err != nil || p.Name == "" || (len(a) > 0 && a[0] != '{' && string(a) != "null") {
		return p, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "InvalidParams",
			"Invalid params: tools/call needs {\"name\": string, \"arguments\"?: object}")
	}
	if len(p.Name) > MaxToolNameBytes {
		return p, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "InvalidParams", fmt.Sprintf(
			"Invalid params: the tool name is %d bytes; tool names are at most %d (MCP tools: 1 to 128 characters of A-Z a-z 0-9 _ - .)",
			len(p.Name), MaxToolNameBytes))
	}
	return p, nil
}

// MaxToolNameBytes bounds the tool name of a tools/call in both eras (spec 2025-11-25 and
// 2026-07-28 tools: names SHOULD be 1 to 128 characters, all ASCII). The name is chosen by the
// caller and read by rules, Cedar, logs and stored tasks before any upstream sees it: one
// 200 KB name cost seconds of CPU in rule matching (issue 27). It equals logcap.NameBytes, so
// a name that passes is logged whole.
const MaxToolNameBytes = logcap.NameBytes

// toolsCall validates and routes a tool call (REQ-CORE-007 F-004, F-005).
func (g *Gateway) toolsCall(ctx context.Context, x *Exchange) Result {
	p, e := decodeCall(x.Msg.Params, "name", "arguments", "task", "_meta")
	if e != nil {
		return ReplyError(x, e)
	}
	if e := g.unknownOwnTool(p.Name); e != nil {
		return ReplyError(x, e)
	}
	if g.isOwnTool(p.Name) {
		if p.Task != nil && string(p.Task) != "null" {
			// Tollgate's tools advertise taskSupport forbidden (spec 2025-11-25 tasks:
			// tool-level negotiation → -32601).
			g.m.validation("forbidden")
			return ReplyError(x, jsonrpc.NewError(jsonrpc.CodeMethodNotFound, "TaskForbidden",
				fmt.Sprintf("TaskForbidden: tool %q does not support task-augmented execution", p.Name),
				"tool", p.Name, "reason", "Tollgate's own tools answer synchronously"))
		}
		return g.ownTool(x, p)
	}
	s := g.d.Snapshots.Load()
	if e := g.rates.allow(s.Config.Server.RateLimit, owner(x), time.Now()); e != nil {
		g.m.rateLimited()
		return ReplyError(x, e)
	}
	g.computeOnDemand(s, p.Name)
	hold, qe := g.pinCheck(s, p.Name)
	if qe != nil {
		return ReplyError(x, qe)
	}
	d, ann := g.annotation(s, p.Name, s.Rules.ViewOf(caller(x).Who()))
	ttl, hasTask, terr := g.taskTTL(s, p.Task, p.Name)
	if terr != nil {
		g.m.validation("malformed")
		return ReplyError(x, terr)
	}
	if d.Action == config.ActionDeny && !d.Audit {
		g.m.decision("deny")
		g.m.toolCall(p.Name, "deny")
		eff := governance.Effective{Decision: d, Action: config.ActionDeny}
		g.audited(x, s, p.Name, eff)
		return ReplyError(x, governance.DeniedError(p.Name, eff))
	}
	switch {
	case hasTask && ann == rules.Forbidden:
		g.m.validation("forbidden")
		return ReplyError(x, jsonrpc.NewError(jsonrpc.CodeMethodNotFound, "TaskForbidden",
			fmt.Sprintf("TaskForbidden: tool %q does not support task-augmented execution", p.Name),
			"tool", p.Name, "reason", forbiddenReason(d, g.ann.upstreamTasks.Load())))
	case !hasTask && ann == rules.Required:
		g.m.validation("required")
		return ReplyError(x, jsonrpc.NewError(jsonrpc.CodeMethodNotFound, "TaskRequired",
			fmt.Sprintf("TaskRequired: tool %q requires task-augmented execution", p.Name),
			"tool", p.Name, "reason", requiredReason(d),
			"hint", `Call again with params.task, e.g. {"task":{"ttl":600000}}, then poll tasks/get and fetch tasks/result`))
	}

	eff := holdQuarantined(s, s.Evaluate(ctx, g.log, caller(x), p.Name, g.ann.tool(p.Name).hints, p.Arguments), hold)
	g.m.decision(string(eff.Action))
	g.m.toolCall(p.Name, string(eff.Action))
	g.audited(x, s, p.Name, eff)
	switch eff.Action {
	case config.ActionDeny:
		return ReplyError(x, governance.DeniedError(p.Name, eff))
	case config.ActionForward:
		if !hasTask {
			f := &Forward{Timeout: s.Config.Server.SyncForwardTimeout.D()}
			if after := s.Config.Tasks.PromoteAfter.D(); after > 0 && x.Session != nil {
				f.Promote = g.promotion(after, s.Config.Tasks.DefaultTTL.D(), s.Config.Tasks.ExecutionTimeout.D(), p)
			}
			return Result{Forward: f}
		}
		own := g.ann.tool(p.Name).own
		if g.ann.upstreamTasks.Load() && (own == rules.Optional || own == rules.Required) {
			return g.forwardWithTask(x)
		}
		// F-005.6: forward + task + upstream cannot take the task → Tollgate runs it at once.
		return g.createTask(ctx, x, p, ttl, "", true)
	default: // approve
		if hasTask {
			return g.createTask(ctx, x, p, ttl, eff.Decision.Workflow, false)
		}
		return g.syncApproval(ctx, s, x, p, eff.Decision.Workflow)
	}
}

func forbiddenReason(d rules.Decision, upstreamTasks bool) string {
	if !upstreamTasks {
		return "the upstream server does not support tasks and this tool needs no approval"
	}
	return fmt.Sprintf("governance action %q does not use tasks for this tool", d.Action)
}

func requiredReason(d rules.Decision) string {
	if d.Action == config.ActionForward && !d.ForceRequired {
		return "the upstream server requires task-augmented execution for this tool"
	}
	if d.ForceRequired {
		return "the tool is listed in task_annotation_overrides.force_required"
	}
	if d.Action == config.ActionPolicy {
		return "calls to this tool are decided by a Cedar policy and may need human approval"
	}
	return fmt.Sprintf("calls to this tool need human approval (workflow %q)", d.Workflow)
}

// forwardWithTask passes a task-augmented call to a task-capable upstream tool and binds the
// returned upstream task id to the caller's session (F-005.5).
func (g *Gateway) forwardWithTask(x *Exchange) Result {
	return Result{Forward: &Forward{Transform: func(x *Exchange, resp *jsonrpc.Message) []byte {
		if x.Session == nil || resp.Result == nil {
			return nil
		}
		var r struct {
			Task struct {
				TaskID string `json:"taskId"`
			} `json:"task"`
		}
		if json.Unmarshal(resp.Result, &r) == nil && r.Task.TaskID != "" {
			x.Session.BindUpstreamTask(r.Task.TaskID)
		}
		return nil
	}}}
}

// createTask makes a Tollgate task and answers with CreateTaskResult (spec: nested "task").
func (g *Gateway) createTask(ctx context.Context, x *Exchange, p callParams, ttl time.Duration, workflow string, accelerated bool) Result {
	t, _, err := g.newTask(ctx, x, p, ttl, workflow, accelerated, false)
	if err != nil {
		return ReplyError(x, err)
	}
	r := ReplyResult(x, createTaskResult(t))
	if accelerated {
		// Run it once the client has the task id, so no status notification precedes it.
		id := t.ID
		r.After = func() { g.d.Tasks.Start(id) }
	}
	return r
}

// newTask creates the task of a held or accelerated call. retry=true (a plain call a client
// may send again) attaches to the task the same call already made, when there is one.
func (g *Gateway) newTask(ctx context.Context, x *Exchange, p callParams, ttl time.Duration, workflow string, accelerated, retry bool) (*tasks.Task, bool, *jsonrpc.Error) {
	if x.Session == nil && x.Modern == nil {
		return nil, false, jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "SessionRequired",
			"Task-augmented calls need an MCP session (send Mcp-Session-Id from initialize)")
	}
	ask := false
	if wf, ok := g.d.Snapshots.Workflow(workflow); ok && !accelerated {
		ask = wf.Destination.Type == config.DestinationElicitation
	}
	if ask && owner(x) == tasks.Anonymous {
		// The requester's answer decides the call: with no identity and no credential, the
		// task id alone would be the approval, and anyone holding it could give it.
		return nil, false, jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "IdentityRequired", fmt.Sprintf(
			"Calls to tool %q are approved by the caller itself (workflow %q, destination elicitation), which needs an identified caller: send an Authorization credential or the configured identity header", p.Name, workflow),
			"tool", p.Name, "workflow", workflow)
	}
	req := tasks.CreateRequest{
		Owner: owner(x), Source: source.Of(x.HTTP, x.Subject), RequestedBy: x.Subject, Caller: x.Caller, Tool: p.Name, Arguments: p.Arguments,
		Headers: execution.CaptureHeaders(x.HTTP.Header), TTL: ttl, Workflow: workflow,
		Accelerated: accelerated, DeferStart: accelerated, AskRequester: ask,
	}
	if k := g.ann.pins; k != nil {
		req.ToolDigest, _, _ = k.Accepted(p.Name) // the approval binds the accepted definition
		if d := k.Awaiting(p.Name); d != "" && k.Blocked(p.Name) {
			req.ToolDigest = d // on_change: hold: the approver approves the call of the new definition
		}
	}
	if x.Modern != nil {
		// No session: executed as a 2026-07-28 request with the caller's _meta.
		req.Era, req.Meta = tasks.EraModern, executionMeta(jsonrpc.Member(x.Msg.Params, "_meta"))
	} else {
		req.SessionID = x.Session.ID
		if !retry {
			// spec 2025-11-25 tasks: the task-augmented request's token stays valid for the
			// task's lifetime; the upstream's progress during the call comes under it.
			req.ProgressToken = progressToken(x.Msg.Params)
		}
	}
	var t *tasks.Task
	var attached bool
	var err error
	if retry {
		t, attached, err = g.d.Tasks.CreateOrAttach(ctx, req)
	} else {
		t, err = g.d.Tasks.Create(ctx, req)
	}
	if err != nil {
		var je *jsonrpc.Error
		if errors.As(err, &je) {
			return nil, false, je
		}
		// The store's error names its address or file: it goes to the log, the client gets
		// the correlation id that finds it there.
		g.log.Error("task store: creating a task failed", "tool", p.Name, "correlation_id", x.CorrID, "error", err.Error())
		return nil, false, jsonrpc.NewError(jsonrpc.CodeInternalError, "TaskCreateFailed",
			"Could not create the task: Tollgate's task store did not accept it; retry shortly (the log has the details under this correlation_id)")
	}
	return t, attached, nil
}

func createTaskResult(t *tasks.Task) []byte {
	return []byte(`{"task":` + string(t.WireJSON()) + `}`)
}

// syncApproval handles an approval-gated call without task metadata (docs/contract.md §3
// tasks.sync_approval). With "error" the TaskRequired check above already answered. The same
// call sent again by the same owner attaches to the task it made (no second approval): a
// finished one answers with its outcome at once.
func (g *Gateway) syncApproval(ctx context.Context, s *governance.Snapshot, x *Exchange, p callParams, workflow string) Result {
	t, attached, err := g.newTask(ctx, x, p, heldTTL(s, workflow), workflow, false, true)
	if err != nil {
		return ReplyError(x, err)
	}
	id, own := t.ID, owner(x)
	if attached && x.Modern != nil {
		// MRTR: a retry carries the answers to the question its InputRequiredResult asked.
		if e := g.answerFromRetry(ctx, x, own, id); e != nil {
			return ReplyError(x, e)
		}
	}
	if attached && t.State.Terminal() {
		g.m.holdReplayed()
		return Result{Wait: func(ctx context.Context, _ func([]byte) bool) []byte {
			return g.outcomeResponse(ctx, x, own, id)
		}}
	}
	switch s.Config.Tasks.SyncApproval {
	case config.SyncApprovalBlock:
		return Result{Wait: func(ctx context.Context, emit func([]byte) bool) []byte {
			return g.outcomeOrQuestion(ctx, x, own, id, emit, tasks.Relay{})
		}}
	case config.SyncApprovalHold:
		return g.hold(s, x, p, t, attached)
	}
	return ReplyResult(x, promotedResult(t))
}

// outcomeResponse waits for the task's outcome and answers x with what the call returned
// (its result, or the JSON-RPC error that ended it: rejected, timed out, cancelled, expired —
// never dressed as a tool error), naming the task like tasks/result does; nil when the client
// went away (the task continues).
func (g *Gateway) outcomeResponse(ctx context.Context, x *Exchange, own, id string) []byte {
	res, rpcErr, err := g.d.Tasks.Result(ctx, own, id)
	return g.outcomeReply(x, id, res, rpcErr, err)
}

// outcomeReply answers x with the outcome of task id as tasks.Manager.Result (or Follow)
// returned it; nil when the wait ended with its context. A store failure is StoreUnavailable.
func (g *Gateway) outcomeReply(x *Exchange, id string, res json.RawMessage, rpcErr *jsonrpc.Error, err error) []byte {
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return nil // the client went away (or a held call's budget ended); the task goes on
	case err != nil:
		return jsonrpc.ErrorResponse(x.Msg.ID, g.taskError(x, id, err).WithCorrelation(x.CorrID))
	case rpcErr != nil:
		g.deliversOutcome(x, id)
		e := rpcErr.WithCorrelation(x.CorrID)
		if e.RawData == nil { // data that is not an object is relayed as the upstream sent it
			if e.Data == nil {
				e.Data = map[string]any{}
			}
			e.Data["taskId"] = id
		}
		return jsonrpc.ErrorResponse(x.Msg.ID, e)
	}
	if res != nil {
		g.deliversOutcome(x, id)
	}
	return jsonrpc.ResultResponse(x.Msg.ID, withRelatedTask(res, id))
}

// deliversOutcome records, once the answer to x has been written, that it carried the outcome
// of the caller's task id (tasks.Manager.Delivered): a plain call's replay ends there, the
// same call made again is a new call (docs/contract.md §3). Every delivery point calls it:
// a held or blocked call's answer, a retry's, tasks/result, a 2026-07-28 tasks/get with the
// outcome inlined, tollgate_get_task_result.
func (g *Gateway) deliversOutcome(x *Exchange, id string) {
	own := owner(x)
	x.onWritten(func() {
		// The answer is out; its request may be ending: a short context of its own.
		ctx, cancel := context.WithTimeout(context.Background(), deliveredTimeout)
		defer cancel()
		if err := g.d.Tasks.Delivered(ctx, own, id); err != nil && !errors.Is(err, tasks.ErrNotFound) {
			// Not recorded: the next identical call still attaches and gets this outcome again.
			g.log.Warn("task: recording the delivered outcome failed", "task_id", id, "correlation_id", x.CorrID, "error", err.Error())
		}
	})
}

// deliveredTimeout bounds the store write that records a delivered outcome.
const deliveredTimeout = 5 * time.Second

// heldTTL is the TTL of a held plain call's task: long enough that the outcome is still there
// tasks.replay_window after the approval timeout, so a retry of the call can collect it.
func heldTTL(s *governance.Snapshot, workflow string) time.Duration {
	ttl := s.Config.Tasks.DefaultTTL.D()
	if wf, ok := s.Config.WorkflowFor(workflow); ok {
		ttl = max(ttl, wf.Timeout.D()+s.Config.Tasks.ReplayWindow.D())
	}
	return ttl // the manager clamps it to tasks.max_ttl
}

// ownTool serves a tollgate_* tool in-process; they may block (await_activity).
func (g *Gateway) ownTool(x *Exchange, p callParams) Result {
	c := gwtools.Caller{Owner: owner(x), Delivered: func(id string) { g.deliversOutcome(x, id) }}
	if x.Session != nil {
		c.SessionID = x.Session.ID
	}
	return Result{Wait: func(ctx context.Context, _ func([]byte) bool) []byte {
		res, rpcErr := g.d.Tools.Call(ctx, c, p.Name, p.Arguments)
		if rpcErr != nil {
			return jsonrpc.ErrorResponse(x.Msg.ID, rpcErr.WithCorrelation(x.CorrID))
		}
		return jsonrpc.ResultResponse(x.Msg.ID, res)
	}}
}

// pinCheck answers a call of a quarantined tool (pins): refused with -32003 ToolQuarantined,
// or with governance.pins.on_change: hold, held for approval (hold=true).
//
// With governance.pins.new_tools: quarantine, a tool no listing has shown Tollgate (a client
// calling a name before Tollgate's next tools/list sees it) is treated as a new tool: nothing
// of it was accepted, so it is refused (or held) like one, until a listing pins or quarantines
// it. With new_tools: accept it passes, as a new tool would be accepted on sight.
func (g *Gateway) pinCheck(s *governance.Snapshot, tool string) (hold bool, e *jsonrpc.Error) {
	k := g.ann.pins
	if k == nil {
		return false, nil
	}
	unseen := k.QuarantinesNew() && !k.Known(tool) && !g.isOwnTool(tool)
	if !unseen && !k.Blocked(tool) {
		return false, nil
	}
	if s.Config.Governance.Pins.OnChange == config.PinsHold {
		return true, nil
	}
	g.m.decision("deny")
	g.m.toolCall(tool, "deny")
	what := "changed its definition (description, schema or annotations) and is quarantined until an approver accepts the new one"
	if unseen {
		what = "is not in any listing Tollgate has checked (governance.pins.new_tools: quarantine); it is quarantined as a new tool once a listing shows it, until an approver accepts it"
	} else if _, _, accepted := k.Accepted(tool); !accepted {
		// governance.pins.new_tools: quarantine, or a definition over the bounds: nothing of it
		// was ever accepted, so it did not change.
		what = "is new (no definition of it was accepted) and is quarantined until an approver accepts it"
	}
	return false, jsonrpc.NewError(jsonrpc.CodePolicyDenied, "ToolQuarantined", fmt.Sprintf("ToolQuarantined: tool %q %s", tool, what),
		"tool", tool)
}

// holdQuarantined makes a quarantined tool's call (on_change: hold) await approval unless it
// is denied anyway.
func holdQuarantined(s *governance.Snapshot, eff governance.Effective, hold bool) governance.Effective {
	if !hold || eff.Action == config.ActionDeny {
		return eff
	}
	eff.Action = config.ActionApprove
	if eff.Decision.Workflow == "" {
		eff.Decision.Workflow = s.Config.Governance.Defaults.Approval
	}
	return eff
}
