// Package gwtools serves Tollgate's own MCP tools (tollgate_*) and the tollgate://diagrams
// resource in-process. They give clients without MCP Tasks support the same governance view
// (docs/contract.md §3 sync_approval, §4; seed 000 "New Tools", seed 002 await_activity).
//
// The proxy hands Call the raw tools/call arguments and returns the raw CallToolResult. Tool
// definitions are built with mcp-go; results are encoded here so that raw upstream results
// (tollgate_get_task_result) pass through with their unknown fields intact.
package gwtools

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/tollgate-mcp/tollgate/internal/events"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// Tool names (docs/contract.md §4).
const (
	ToolListTasks     = "tollgate_list_tasks"
	ToolGetTask       = "tollgate_get_task"
	ToolGetTaskResult = "tollgate_get_task_result"
	ToolCancelTask    = "tollgate_cancel_task"
	ToolAwaitActivity = "tollgate_await_activity"
	// ToolAnswerQuestion answers the upstream's question during a task's call (seed 000
	// respond_to_elicitation, under Tollgate's prefix; elicitation, sampling and roots).
	ToolAnswerQuestion = "tollgate_answer_question"
)

// Defaults for Options.
const (
	DefaultMaxAwait     = 5 * time.Minute
	DefaultDefaultAwait = 30 * time.Second // seed 000 await_activity timeout_ms default
)

// Caller identifies who calls a tool: the task owner (docs/contract.md §3) and the MCP session the
// call arrived on (the event queue key).
type Caller struct {
	Owner, SessionID string
	// Delivered, if set, is told the id of a task whose outcome the answer carries
	// (tollgate_get_task_result), so the task can record it once the answer is written.
	Delivered func(taskID string)
}

// eventKey is the hub session events for this caller are queued under.
func (c Caller) eventKey() string {
	if c.SessionID != "" {
		return c.SessionID
	}
	return c.Owner
}

// Tasks is the part of *tasks.Manager the tools use.
type Tasks interface {
	Get(ctx context.Context, owner, id string) (*tasks.Task, error)
	List(ctx context.Context, owner string, f tasks.Filter) ([]*tasks.Task, error)
	Cancel(ctx context.Context, owner, id string) (*tasks.Task, error)
	Result(ctx context.Context, owner, id string) (json.RawMessage, *jsonrpc.Error, error)
	Answer(ctx context.Context, owner, id, questionID string, result json.RawMessage, rpcErr *jsonrpc.Error) (*tasks.Task, error)
}

var _ Tasks = (*tasks.Manager)(nil)

// Pending reports server→client requests held for a caller. server are items still waiting on
// the upstream; client are requests (elicitation/create, sampling/createMessage, …) waiting for
// the client to answer. taskID "" means all of the session's items.
type Pending interface {
	PendingFor(session string, taskID string) (server []json.RawMessage, client []json.RawMessage)
}

// Options configures Tools. Zero values take the defaults.
type Options struct {
	MaxAwait     time.Duration // cap for timeout_ms; default 5m
	DefaultAwait time.Duration // timeout_ms when absent; default 30s
	Logger       *slog.Logger
	// ConsoleURL is the approvals console the task manager names in status messages (its
	// tasks.Options.ConsoleURL), so a queued event rebuilds them instead of keeping them.
	ConsoleURL string
}

// Tools is the tollgate_* tool server. Safe for concurrent use.
type Tools struct {
	tasks   Tasks
	hub     *events.Hub
	pending Pending
	opts    Options
	log     *slog.Logger

	names []string
	defs  []json.RawMessage
	calls map[string]func(ctx context.Context, c Caller, a args) result
}

// New returns the tool server. hub may be nil (a private hub is used: no events then);
// pending may be nil.
func New(t Tasks, hub *events.Hub, pending Pending, opts Options) *Tools {
	if opts.MaxAwait <= 0 {
		opts.MaxAwait = DefaultMaxAwait
	}
	if opts.DefaultAwait <= 0 {
		opts.DefaultAwait = DefaultDefaultAwait
	}
	if opts.DefaultAwait > opts.MaxAwait {
		opts.DefaultAwait = opts.MaxAwait
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if hub == nil {
		hub = events.NewHub(events.Options{Logger: opts.Logger})
	}
	g := &Tools{tasks: t, hub: hub, pending: pending, opts: opts, log: opts.Logger}
	g.calls = map[string]func(context.Context, Caller, args) result{
		ToolListTasks:      g.listTasks,
		ToolGetTask:        g.getTask,
		ToolGetTaskResult:  g.getTaskResult,
		ToolCancelTask:     g.cancelTask,
		ToolAwaitActivity:  g.awaitActivity,
		ToolAnswerQuestion: g.answerQuestion,
	}
	for _, def := range definitions(opts.DefaultAwait) {
		raw, err := json.Marshal(def)
		if err != nil {
			panic("gwtools: tool definition " + def.Name + ": " + err.Error()) // static data
		}
		g.names = append(g.names, def.Name)
		g.defs = append(g.defs, raw)
	}
	return g
}

// Names lists the tool names in definition order.
func (g *Tools) Names() []string { return slices.Clone(g.names) }

// Has reports whether name is one of Tollgate's own tools.
func (g *Tools) Has(name string) bool {
	_, ok := g.calls[name]
	return ok
}

// Definitions returns the MCP Tool objects to append to tools/list.
func (g *Tools) Definitions() []json.RawMessage {
	out := make([]json.RawMessage, len(g.defs))
	for i, d := range g.defs {
		out[i] = slices.Clone(d)
	}
	return out
}

// Prefix starts every tool name Tollgate reserves for itself: a call to a name with it is
// answered by Tollgate, never forwarded.
const Prefix = "tollgate_"

// UnknownTool is the error for a tollgate_* name that is not one of Tollgate's tools (spec
// 2025-11-25 tools: unknown tool → -32602).
func UnknownTool(name string) *jsonrpc.Error {
	return jsonrpc.NewError(jsonrpc.CodeInvalidParams, "UnknownTool", "Unknown tool: "+name, "tool", name)
}

// Call runs tool name. Bad arguments, unknown or foreign task ids and failed tasks are tool
// results with isError (MCP convention: the model can read and correct them); an unknown tool
// name is JSON-RPC -32602 (spec 2025-11-25 tools: "Unknown tool").
func (g *Tools) Call(ctx context.Context, c Caller, name string, arguments json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	fn, ok := g.calls[name]
	if !ok {
		return nil, UnknownTool(name)
	}
	var r result
	if a, err := parseArgs(arguments); err != nil {
		r = errorResult(err.Error())
	} else {
		r = fn(ctx, c, a)
	}
	if r.rpcErr != nil {
		return nil, r.rpcErr
	}
	if name != ToolAwaitActivity {
		// Seed 002: any tool response delivers the session's undelivered events.
		r.appendEvents(g.hub.Take(c.eventKey()))
	}
	raw, err := r.encode()
	if err != nil {
		g.log.Error("encoding tool result failed", "tool", name, "err", err)
		return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "InternalError", "Internal error")
	}
	return raw, nil
}

// awaitTimeout turns timeout_ms into a wait: absent → DefaultAwait, capped by MaxAwait.
func (g *Tools) awaitTimeout(a args) (time.Duration, error) {
	ms, ok, err := a.int("timeout_ms")
	switch {
	case err != nil:
		return 0, err
	case !ok:
		return g.opts.DefaultAwait, nil
	case ms < 0:
		return 0, errors.New("timeout_ms must be 0 or more (milliseconds)")
	}
	d := time.Duration(min(ms, int64(g.opts.MaxAwait/time.Millisecond))) * time.Millisecond
	return d, nil
}

// internalError is the JSON-RPC error for store/manager failures; the cause is logged, not
// shown.
func (g *Tools) internalError(tool, taskID string, err error) result {
	g.log.Error("tollgate tool failed", "tool", tool, "task_id", taskID, "err", err)
	return result{rpcErr: jsonrpc.NewError(jsonrpc.CodeInternalError, "InternalError", "Internal error in "+tool)}
}

func definitions(defaultAwait time.Duration) []mcp.Tool {
	readOnly := mcp.ToolAnnotation{
		ReadOnlyHint:    mcp.ToBoolPtr(true),
		DestructiveHint: mcp.ToBoolPtr(false),
		IdempotentHint:  mcp.ToBoolPtr(true),
		OpenWorldHint:   mcp.ToBoolPtr(false),
	}
	consuming := readOnly
	consuming.IdempotentHint = mcp.ToBoolPtr(false)
	taskID := mcp.WithString("task_id", mcp.Required(),
		mcp.Description("Task id as returned when the call was held for approval (tg_...)."))
	timeout := func(what string) mcp.ToolOption {
		return mcp.WithInteger("timeout_ms", mcp.Min(0), mcp.DefaultNumber(int(defaultAwait/time.Millisecond)),
			mcp.Description("How long to wait for "+what+", in milliseconds. 0 checks without waiting; large values are capped by the gateway."))
	}
	forbidden := mcp.WithTaskSupport(mcp.TaskSupportForbidden)
	withAnn := func(a mcp.ToolAnnotation, title string) mcp.ToolOption {
		a.Title = title
		return mcp.WithToolAnnotation(a)
	}
	return []mcp.Tool{
		mcp.NewTool(ToolListTasks,
			mcp.WithDescription("List your tool calls that Tollgate holds or ran as tasks (for example calls awaiting human approval). By default only unfinished tasks are listed."),
			mcp.WithString("status", mcp.Enum(statusNames()...),
				mcp.Description("Only tasks with this status: a spec status (working, completed, failed, cancelled) or a Tollgate state (awaiting_approval, approved, executing, rejected, expired, timed_out).")),
			mcp.WithBoolean("include_finished", mcp.DefaultBool(false),
				mcp.Description("Also list finished tasks (completed, failed, cancelled) whose results are still kept.")),
			mcp.WithInteger("limit", mcp.Min(0), mcp.Description("At most this many tasks (0 = no limit).")),
			withAnn(readOnly, "List Tollgate tasks"), forbidden),
		mcp.NewTool(ToolGetTask,
			mcp.WithDescription("Show one task: its status, approval decision and any requests pending for it."),
			taskID, withAnn(readOnly, "Get a Tollgate task"), forbidden),
		mcp.NewTool(ToolGetTaskResult,
			mcp.WithDescription("Wait up to timeout_ms for a task to finish, then return the original tool result. If it is still running or awaiting approval, returns its current status instead; call again later or use tollgate_await_activity."),
			taskID, timeout("the task to finish"), withAnn(readOnly, "Get a Tollgate task result"), forbidden),
		mcp.NewTool(ToolCancelTask,
			mcp.WithDescription("Cancel a task that has not finished yet (for example a call still awaiting approval)."),
			taskID,
			withAnn(mcp.ToolAnnotation{
				ReadOnlyHint:    mcp.ToBoolPtr(false),
				DestructiveHint: mcp.ToBoolPtr(true),
				IdempotentHint:  mcp.ToBoolPtr(false),
				OpenWorldHint:   mcp.ToBoolPtr(false),
			}, "Cancel a Tollgate task"), forbidden),
		mcp.NewTool(ToolAwaitActivity,
			mcp.WithDescription("Wait until something happens in this session (a task is approved, rejected, finishes or fails; a notification arrives) or timeout_ms passes. Returns at once if there are undelivered events. Reports what woke it (triggers), the new events (each delivered once), tasks still pending and requests waiting for you."),
			// Not idempotent: each call consumes the events it returns.
			timeout("activity"), withAnn(consuming, "Await Tollgate activity"), forbidden),
		mcp.NewTool(ToolAnswerQuestion,
			mcp.WithDescription("Answer a question a tool asks you while Tollgate runs your task (shown as pending_client by tollgate_get_task and tollgate_await_activity, with its task_id and question_id). For an elicitation the answer is {\"action\":\"accept\",\"content\":{...}} (content as the requestedSchema says), {\"action\":\"decline\"} or {\"action\":\"cancel\"}; for sampling it is a CreateMessageResult {\"role\":\"assistant\",\"content\":{\"type\":\"text\",\"text\":...},\"model\":...}; for roots {\"roots\":[{\"uri\":...}]}. A question is answered once."),
			taskID,
			mcp.WithString("question_id", mcp.Required(), mcp.Description("The question's id (q1, q2, ...) as shown with the pending question.")),
			mcp.WithObject("answer", mcp.Required(), mcp.Description("The answer, a result of the question's kind (see the description).")),
			withAnn(mcp.ToolAnnotation{
				ReadOnlyHint:    mcp.ToBoolPtr(false),
				DestructiveHint: mcp.ToBoolPtr(false),
				IdempotentHint:  mcp.ToBoolPtr(false),
				OpenWorldHint:   mcp.ToBoolPtr(false),
			}, "Answer a tool's question"), forbidden),
	}
}

// statusNames are the accepted values of tollgate_list_tasks status.
func statusNames() []string {
	names := []string{"working", "completed", "failed", "cancelled"}
	for _, s := range allStates {
		if !slices.Contains(names, string(s)) {
			names = append(names, string(s))
		}
	}
	return names
}

// allStates lists every internal task state (docs/contract.md §3).
var allStates = tasks.States()
