package gwtools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/events"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// taskView is what the tools show of a task: never its arguments, headers or stored result.
type taskView struct {
	TaskID           string         `json:"taskId"`
	ToolName         string         `json:"toolName"`
	Status           string         `json:"status"` // spec status
	State            string         `json:"state"`  // Tollgate state (docs/contract.md §3)
	StatusMessage    string         `json:"statusMessage,omitempty"`
	Workflow         string         `json:"workflow,omitempty"`
	CreatedAt        time.Time      `json:"createdAt"`
	LastUpdatedAt    time.Time      `json:"lastUpdatedAt"`
	TTL              int64          `json:"ttl"`          // ms, as in the spec Task
	PollInterval     int64          `json:"pollInterval"` // ms
	ApprovalDeadline *time.Time     `json:"approvalDeadline,omitempty"`
	Decision         *decisionView  `json:"decision,omitempty"`
	Error            *jsonrpc.Error `json:"error,omitempty"`
}

type decisionView struct {
	Approved bool      `json:"approved"`
	By       string    `json:"by"`
	Reason   string    `json:"reason,omitempty"`
	At       time.Time `json:"at"`
}

func viewOf(t *tasks.Task) taskView {
	v := taskView{
		TaskID:        t.ID,
		ToolName:      t.Tool,
		Status:        t.WireStatus(),
		State:         string(t.State),
		StatusMessage: t.StatusMessage,
		Workflow:      t.Workflow,
		CreatedAt:     t.CreatedAt.UTC(),
		LastUpdatedAt: t.UpdatedAt.UTC(),
		TTL:           t.TTL.Milliseconds(),
		PollInterval:  t.PollInterval.Milliseconds(),
		Error:         t.Error,
	}
	if !t.ApprovalDeadline.IsZero() && t.State == tasks.AwaitingApproval {
		d := t.ApprovalDeadline.UTC()
		v.ApprovalDeadline = &d
	}
	if d := t.Decision; d != nil {
		v.Decision = &decisionView{Approved: d.Approved, By: d.By, Reason: d.Reason, At: d.At.UTC()}
	}
	return v
}

func describe(t *tasks.Task) string {
	s := fmt.Sprintf("%s (%s): %s", t.ID, t.Tool, t.State.Wire())
	if t.StatusMessage != "" {
		s += " - " + t.StatusMessage
	} else if string(t.State) != t.State.Wire() {
		s += " - " + strings.ReplaceAll(string(t.State), "_", " ")
	}
	return s
}

func notFound(id string) result {
	return errorResult(fmt.Sprintf("Task %s not found (unknown, expired, or not yours).", id))
}

// --- tollgate_list_tasks ---

func (g *Tools) listTasks(ctx context.Context, c Caller, a args) result {
	if err := a.only("status", "include_finished", "limit"); err != nil {
		return errorResult(err.Error())
	}
	var f tasks.Filter
	var err error
	if f.IncludeFinished, err = a.bool("include_finished"); err != nil {
		return errorResult(err.Error())
	}
	status, ok, err := a.str("status")
	if err != nil {
		return errorResult(err.Error())
	}
	if ok {
		if f.States = statesFor(status); f.States == nil {
			return errorResult(fmt.Sprintf("unknown status %q; use one of %s", status, strings.Join(statusNames(), ", ")))
		}
		// Asking for a finished status implies wanting finished tasks.
		if f.States[0].Terminal() {
			f.IncludeFinished = true
		}
	}
	limit, ok, err := a.int("limit")
	if err != nil || (ok && limit < 0) {
		return errorResult("limit must be an integer, 0 or more")
	}
	f.Limit = int(limit)

	list, err := g.tasks.List(ctx, c.Owner, f)
	if err != nil {
		return g.internalError(ToolListTasks, "", err)
	}
	views := make([]taskView, 0, len(list))
	lines := make([]string, 0, len(list)+1)
	for _, t := range list {
		views = append(views, viewOf(t))
		lines = append(lines, "- "+describe(t))
	}
	summary := fmt.Sprintf("%d task(s).", len(list))
	if len(list) > 0 {
		summary += "\n" + strings.Join(lines, "\n")
	}
	return okResult(summary, map[string]any{"tasks": views})
}

// statesFor maps a spec status or a Tollgate state to the states it covers (nil if unknown).
// All states of one status share Terminal(), so the caller may look at the first.
func statesFor(status string) []tasks.State {
	var out []tasks.State
	for _, s := range allStates {
		if string(s) == status || s.Wire() == status {
			out = append(out, s)
		}
	}
	return out
}

// --- tollgate_get_task ---

func (g *Tools) getTask(ctx context.Context, c Caller, a args) result {
	if err := a.only("task_id"); err != nil {
		return errorResult(err.Error())
	}
	id, err := a.requiredStr("task_id")
	if err != nil {
		return errorResult(err.Error())
	}
	t, err := g.tasks.Get(ctx, c.Owner, id)
	if errors.Is(err, tasks.ErrNotFound) {
		return notFound(id)
	}
	if err != nil {
		return g.internalError(ToolGetTask, id, err)
	}
	server, client := g.pendingFor(c, id)
	client.addQuestion(t)
	return okResult(describe(t), map[string]any{
		"task":           viewOf(t),
		"pending_server": server,
		"pending_client": client,
	})
}

// --- tollgate_get_task_result ---

func (g *Tools) getTaskResult(ctx context.Context, c Caller, a args) result {
	if err := a.only("task_id", "timeout_ms"); err != nil {
		return errorResult(err.Error())
	}
	id, err := a.requiredStr("task_id")
	if err != nil {
		return errorResult(err.Error())
	}
	wait, err := g.awaitTimeout(a)
	if err != nil {
		return errorResult(err.Error())
	}
	t, err := g.tasks.Get(ctx, c.Owner, id)
	if errors.Is(err, tasks.ErrNotFound) {
		return notFound(id)
	}
	if err != nil {
		return g.internalError(ToolGetTaskResult, id, err)
	}
	if !t.State.Terminal() {
		if wait == 0 {
			return stillRunning(t)
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		_, _, err := g.tasks.Result(wctx, c.Owner, id)
		cancel()
		switch {
		case errors.Is(err, tasks.ErrNotFound):
			return notFound(id)
		case err != nil && ctx.Err() != nil:
			// The caller went away; nobody reads this answer.
			return result{rpcErr: jsonrpc.NewError(jsonrpc.CodeInternalError, "RequestCancelled", "Request cancelled")}
		case err != nil && wctx.Err() == nil:
			return g.internalError(ToolGetTaskResult, id, err)
		}
		// Finished, or our wait ended first: look again. A task still running is reported
		// by status, not as an error (seed 000 get_task_result).
		if t, err = g.tasks.Get(ctx, c.Owner, id); errors.Is(err, tasks.ErrNotFound) {
			return notFound(id)
		} else if err != nil {
			return g.internalError(ToolGetTaskResult, id, err)
		}
		if !t.State.Terminal() {
			return stillRunning(t)
		}
	}
	// Terminal: Result answers at once.
	raw, rpcErr, err := g.tasks.Result(ctx, c.Owner, id)
	switch {
	case errors.Is(err, tasks.ErrNotFound):
		return notFound(id)
	case err != nil:
		return g.internalError(ToolGetTaskResult, id, err)
	}

	if c.Delivered != nil {
		c.Delivered(id) // the outcome goes to its owner in this answer
	}
	meta := map[string]any{tasks.RelatedTaskKey: map[string]string{"taskId": id}}
	if rpcErr != nil {
		// The governed call failed (rejected, timed out, expired, cancelled, upstream error):
		// that is the outcome of the task, shown as a tool error the model can read.
		r := errorResult(fmt.Sprintf("Task %s ended without a result: %s (%d): %s", id, nameOr(rpcErr), rpcErr.Code, rpcErr.Message))
		r.structured = map[string]any{"taskId": id, "error": rpcErr}
		r.meta = meta
		return r
	}
	if len(raw) == 0 {
		raw = json.RawMessage(`{"content":[]}`)
	}
	return result{raw: raw, meta: meta}
}

func nameOr(e *jsonrpc.Error) string {
	if n := e.Name(); n != "" {
		return n
	}
	return "Error"
}

func stillRunning(t *tasks.Task) result {
	summary := fmt.Sprintf("Task %s has no result yet: %s. Call %s again, or %s to wait for any change.",
		t.ID, strings.TrimPrefix(describe(t), t.ID+" "), ToolGetTaskResult, ToolAwaitActivity)
	return okResult(summary, map[string]any{"task": viewOf(t), "done": false})
}

// --- tollgate_cancel_task ---

func (g *Tools) cancelTask(ctx context.Context, c Caller, a args) result {
	if err := a.only("task_id"); err != nil {
		return errorResult(err.Error())
	}
	id, err := a.requiredStr("task_id")
	if err != nil {
		return errorResult(err.Error())
	}
	t, err := g.tasks.Cancel(ctx, c.Owner, id)
	switch {
	case errors.Is(err, tasks.ErrNotFound):
		return notFound(id)
	case errors.Is(err, tasks.ErrTerminal):
		msg := fmt.Sprintf("Task %s has already finished; nothing to cancel.", id)
		if t != nil { // the manager returns the task as it stands
			msg = fmt.Sprintf("Task %s has already finished (%s); nothing to cancel.", id, t.State)
		}
		return errorResult(msg)
	case err != nil:
		return g.internalError(ToolCancelTask, id, err)
	}
	msg := fmt.Sprintf("Task %s cancelled.", id)
	return okResult(msg, map[string]any{"success": true, "message": msg, "task": viewOf(t)})
}

// --- tollgate_await_activity ---

// trigger says why tollgate_await_activity returned (seed 000 §4 triggers).
type trigger struct {
	Type      string `json:"type"` // immediate | event | timeout | session_closed
	EventType string `json:"eventType,omitempty"`
	TaskID    string `json:"taskId,omitempty"`
}

func (g *Tools) awaitActivity(ctx context.Context, c Caller, a args) result {
	if err := a.only("timeout_ms"); err != nil {
		return errorResult(err.Error())
	}
	wait, err := g.awaitTimeout(a)
	if err != nil {
		return errorResult(err.Error())
	}
	b, err := g.hub.Await(ctx, c.eventKey(), wait)
	var triggers []trigger
	switch {
	case errors.Is(err, events.ErrSessionClosed):
		triggers = []trigger{{Type: "session_closed"}}
	case err != nil:
		return result{rpcErr: jsonrpc.NewError(jsonrpc.CodeInternalError, "RequestCancelled", "Request cancelled")}
	case b.Immediate:
		triggers = []trigger{{Type: "immediate"}}
	case len(b.Events) == 0:
		triggers = []trigger{{Type: "timeout"}}
	default:
		seen := map[trigger]bool{}
		for _, e := range b.Events {
			tr := trigger{Type: "event", EventType: e.Type, TaskID: e.TaskID}
			if !seen[tr] {
				seen[tr] = true
				triggers = append(triggers, tr)
			}
		}
	}

	// Category 3 (seed 002): what is still pending on the server side.
	working, lerr := g.tasks.List(ctx, c.Owner, tasks.Filter{})
	if lerr != nil {
		// The events are already taken: still deliver them, without the task snapshot.
		g.log.Error("listing pending tasks failed", "tool", ToolAwaitActivity, "err", lerr)
		working = nil
	}
	server, client := g.pendingFor(c, "")
	if len(working) > 0 {
		wt := make([]pendingTask, 0, len(working))
		for _, t := range working {
			client.addQuestion(t)
			wt = append(wt, pendingTask{TaskID: t.ID, ToolName: t.Tool, Status: t.WireStatus(), State: string(t.State), StatusMessage: t.StatusMessage})
		}
		server = append([]pendingServer{{Server: "tollgate", WorkingTasks: wt}}, server...)
	}

	out := map[string]any{
		"triggers":       triggers,
		"events":         nonNilEvents(b.Events),
		"pending_server": server,
		"pending_client": client,
	}
	if b.Evicted > 0 {
		out["events_evicted"] = b.Evicted
	}
	if n := len(b.Events); n > 0 {
		out["lastEventId"] = b.Events[n-1].ID
	}
	return okResult(activitySummary(triggers, b, working, client), out)
}

func activitySummary(triggers []trigger, b events.Batch, working []*tasks.Task, client pendingClient) string {
	var sb strings.Builder
	switch triggers[0].Type {
	case "timeout":
		sb.WriteString("No new activity before the timeout.")
	case "session_closed":
		sb.WriteString("Session closed.")
	default:
		fmt.Fprintf(&sb, "%d new event(s):", len(b.Events))
		for _, e := range b.Events {
			sb.WriteString("\n- " + e.Type)
			if e.TaskID != "" {
				sb.WriteString(" " + e.TaskID)
			}
		}
	}
	if b.Evicted > 0 {
		fmt.Fprintf(&sb, "\n%d older event(s) were dropped because the queue was full.", b.Evicted)
	}
	fmt.Fprintf(&sb, "\n%d task(s) pending.", len(working))
	for _, t := range working {
		sb.WriteString("\n- " + describe(t))
	}
	if n := len(client.Elicitations) + len(client.SamplingRequests) + len(client.Other); n > 0 {
		fmt.Fprintf(&sb, "\n%d request(s) waiting for your answer.", n)
	}
	return sb.String()
}

// --- pending items ---

type pendingTask struct {
	TaskID        string `json:"taskId"`
	ToolName      string `json:"toolName"`
	Status        string `json:"status"`
	State         string `json:"state"`
	StatusMessage string `json:"statusMessage,omitempty"`
}

// pendingServer is one entry of pending_server (seed 000: grouped by server). Tollgate fronts
// one upstream, so there are at most two: "tollgate" (its own tasks) and "upstream".
type pendingServer struct {
	Server       string            `json:"server"`
	WorkingTasks []pendingTask     `json:"working_tasks,omitempty"`
	Requests     []json.RawMessage `json:"requests,omitempty"`
}

// pendingClient is pending_client (seed 000 Category 4), sorted by request method.
type pendingClient struct {
	Elicitations     []json.RawMessage `json:"elicitations"`
	SamplingRequests []json.RawMessage `json:"sampling_requests"`
	Other            []json.RawMessage `json:"other,omitempty"`
}

func (g *Tools) pendingFor(c Caller, taskID string) ([]pendingServer, pendingClient) {
	server := []pendingServer{}
	client := pendingClient{Elicitations: []json.RawMessage{}, SamplingRequests: []json.RawMessage{}}
	if g.pending == nil {
		return server, client
	}
	srv, cli := g.pending.PendingFor(c.SessionID, taskID)
	if len(srv) > 0 {
		server = append(server, pendingServer{Server: "upstream", Requests: srv})
	}
	for _, item := range cli {
		var m struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(item, &m)
		switch m.Method {
		case "elicitation/create":
			client.Elicitations = append(client.Elicitations, item)
		case "sampling/createMessage":
			client.SamplingRequests = append(client.SamplingRequests, item)
		default:
			client.Other = append(client.Other, item)
		}
	}
	return server, client
}

// taskQuestion is a pending_client entry for the upstream's question during a task's call:
// what is asked (method, params: the message and, for an elicitation, requestedSchema) and
// how to answer it (tollgate_answer_question with taskId and questionId).
type taskQuestion struct {
	TaskID     string          `json:"taskId"`
	QuestionID string          `json:"questionId"`
	Method     string          `json:"method"`
	Params     json.RawMessage `json:"params,omitempty"`
	Deadline   time.Time       `json:"deadline"`
}

// addQuestion adds t's pending question, if any, to the category of its kind.
func (c *pendingClient) addQuestion(t *tasks.Task) {
	q := t.PendingQuestion()
	if q == nil {
		return
	}
	item, err := json.Marshal(taskQuestion{TaskID: t.ID, QuestionID: q.ID, Method: q.Method, Params: q.Params, Deadline: q.Deadline.UTC()})
	if err != nil {
		return
	}
	switch q.Method {
	case tasks.MethodElicit:
		c.Elicitations = append(c.Elicitations, item)
	case tasks.MethodSample:
		c.SamplingRequests = append(c.SamplingRequests, item)
	default:
		c.Other = append(c.Other, item)
	}
}

// --- tollgate_answer_question ---

func (g *Tools) answerQuestion(ctx context.Context, c Caller, a args) result {
	if err := a.only("task_id", "question_id", "answer"); err != nil {
		return errorResult(err.Error())
	}
	id, err := a.requiredStr("task_id")
	if err != nil {
		return errorResult(err.Error())
	}
	qid, err := a.requiredStr("question_id")
	if err != nil {
		return errorResult(err.Error())
	}
	answer := a["answer"]
	var asText string
	if json.Unmarshal(answer, &asText) == nil {
		answer = json.RawMessage(asText) // a client that sent the object as a JSON string
	}
	if len(answer) == 0 {
		return errorResult("answer is required: an object, the result of the question's kind")
	}
	t, err := g.tasks.Answer(ctx, c.Owner, id, qid, answer, nil)
	var tooLarge *tasks.AnswerTooLargeError
	switch {
	case errors.Is(err, tasks.ErrNotFound):
		return notFound(id)
	case errors.Is(err, tasks.ErrNoQuestion):
		return errorResult(fmt.Sprintf("Task %s has no pending question %s (answered already, timed out, or never asked).", id, qid))
	case errors.Is(err, tasks.ErrInvalidAnswer), errors.As(err, &tooLarge):
		return errorResult(err.Error())
	case err != nil:
		return g.internalError(ToolAnswerQuestion, id, err)
	}
	return okResult(fmt.Sprintf("Answer to question %s of task %s delivered to the tool.", qid, id), map[string]any{"task": viewOf(t)})
}
