package intercept

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tollgate-mcp/tollgate/internal/disclose"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// ElicitIDPrefix starts the ids of the elicitation/create requests Tollgate sends; clients'
// responses carrying them are Tollgate's to handle, never the upstream's.
const ElicitIDPrefix = "tollgate-elicit-"

// Requester is the approver name recorded when the requester answers the question itself.
const Requester = "requester"

// maxQuestions bounds the elicitation questions awaiting an answer.
const maxQuestions = 10000

// question is one elicitation/create Tollgate sent for a task awaiting the requester's approval.
type question struct {
	taskID string
	owner  string
}

// questions tracks the open elicitation/create requests by id.
type questions struct {
	mu   sync.Mutex
	open map[string]question
	seq  atomic.Uint64
}

func (q *questions) add(qs question) string {
	id := ElicitIDPrefix + strconv.FormatUint(q.seq.Add(1), 10) + "-" + qs.taskID
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.open == nil {
		q.open = map[string]question{}
	}
	if len(q.open) >= maxQuestions {
		for k := range q.open { // the oldest are likely abandoned; any will do
			delete(q.open, k)
			break
		}
	}
	q.open[id] = qs
	return id
}

func (q *questions) take(id string) (question, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	qs, ok := q.open[id]
	delete(q.open, id)
	return qs, ok
}

// askRequester sends the approval question for t as elicitation/create on the requester's
// tasks/result stream (spec 2025-11-25 tasks: input_required → the requestor calls
// tasks/result; the request carries the related-task _meta). Arguments are redacted as for
// approvers.
func (g *Gateway) askRequester(t *tasks.Task, owner string, emit func([]byte) bool) {
	id := g.questions.add(question{taskID: t.ID, owner: owner})
	q := g.approvalQuestion(t)
	q["_meta"] = map[string]any{tasks.RelatedTaskKey: map[string]string{"taskId": t.ID}}
	params, _ := jsonrpc.Marshal(q)
	if !emit(jsonrpc.Request(rawString(id), "elicitation/create", params)) {
		g.questions.take(id) // no stream to ask on; approvers can still decide
	}
}

// approvalQuestion is the elicitation/create params (message and requestedSchema) asking the
// requester to approve t. Arguments are redacted as for approvers.
func (g *Gateway) approvalQuestion(t *tasks.Task) map[string]any {
	args := string(disclose.Arguments(t.Arguments, t.Workflow, g.d.Snapshots.Workflow))
	if len(args) > 2000 {
		args = args[:2000] + "…"
	}
	return map[string]any{
		"message": fmt.Sprintf("Tollgate holds the call to %q for your approval.\nArguments: %s\nApprove it?", t.Tool, args),
		"requestedSchema": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"approve": map[string]any{"type": "boolean", "title": "Approve", "description": "Run the call as shown"},
				"reason":  map[string]any{"type": "string", "title": "Reason", "description": "Why (recorded in the audit log)"},
			},
			"required": []string{"approve"},
		},
	}
}

// elicitResponse handles a client's answer to one of Tollgate's elicitation/create requests.
func (g *Gateway) elicitResponse(ctx context.Context, x *Exchange) Result {
	var id string
	_ = json.Unmarshal(x.Msg.ID, &id)
	if strings.HasPrefix(id, mrtrAskPrefix) {
		g.modern.asks.deliver(id, owner(x), x.Msg) // an answer for a modern-only upstream (MRTR)
		return Result{Accepted: true}
	}
	if strings.HasPrefix(id, questionIDPrefix) {
		return g.questionResponse(ctx, x, id) // an answer to the upstream's question during a task
	}
	q, ok := g.questions.take(id)
	if !ok || q.owner != owner(x) {
		return Result{Accepted: true} // unknown, answered already, or not the requester's: ignore
	}
	if x.Msg.Error != nil {
		g.log.Info("requester could not answer the approval question", "task_id", q.taskID)
		return Result{Accepted: true}
	}
	g.recordAnswer(ctx, q.taskID, x.Msg.Result, false)
	return Result{Accepted: true}
}

// recordAnswer applies the requester's ElicitResult to task id: accept with approve: true
// approves, accept otherwise or decline rejects. cancel (no answer) leaves the task waiting in
// the legacy era (the next tasks/result asks again); in the modern era it rejects, since the
// question's key may not be asked again (tasks extension "Task Update Requests").
func (g *Gateway) recordAnswer(ctx context.Context, id string, result json.RawMessage, cancelRejects bool) {
	var ans struct {
		Action  string `json:"action"`
		Content struct {
			Approve *bool  `json:"approve"`
			Reason  string `json:"reason"`
		} `json:"content"`
	}
	_ = json.Unmarshal(result, &ans)
	reason := strings.TrimSpace(ans.Content.Reason)
	var err error
	switch {
	case ans.Action == "accept" && ans.Content.Approve != nil && *ans.Content.Approve:
		_, err = g.d.Tasks.Approve(ctx, id, Requester, reason)
	case ans.Action == "accept" || ans.Action == "decline" || cancelRejects:
		if reason == "" {
			reason = "declined by the requester"
		}
		_, err = g.d.Tasks.Reject(ctx, id, Requester, reason)
	default: // cancel: no answer
	}
	var ce *tasks.ConflictError
	if err != nil && !errors.As(err, &ce) {
		g.log.Warn("recording the requester's answer failed", "task_id", id, "error", err.Error())
	}
}
