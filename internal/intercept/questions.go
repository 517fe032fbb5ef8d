package intercept

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// questionIDPrefix starts the ids of the requests that carry a task's pending question (the
// upstream's, kept on the task; tasks.Manager.Follow hands it on) to its owner; the id names the
// task and the question, so the answer may reach any replica sharing the store.
const questionIDPrefix = ElicitIDPrefix + "q-"

func questionRequestID(taskID, qid string) string { return questionIDPrefix + qid + "-" + taskID }

func parseQuestionRequestID(id string) (taskID, qid string, ok bool) {
	rest, ok := strings.CutPrefix(id, questionIDPrefix)
	if !ok {
		return "", "", false
	}
	qid, taskID, ok = strings.Cut(rest, "-")
	return taskID, qid, ok && qid != "" && taskID != ""
}

// questionRequest is the JSON-RPC request that puts q of task id to its owner, with the
// related-task _meta (spec 2025-11-25 tasks: requests about a task carry it).
func questionRequest(id string, q *tasks.Question) []byte {
	params := q.Params
	if len(params) == 0 || params[0] != '{' {
		params = json.RawMessage(`{}`)
	}
	meta := jsonrpc.Member(params, "_meta")
	if meta == nil || string(meta) == "null" || meta[0] != '{' {
		meta = []byte(`{}`)
	}
	rel := []byte(`{"taskId":` + string(rawString(id)) + `}`)
	if nm, err := jsonrpc.Replace(meta, tasks.RelatedTaskKey, rel); err == nil {
		if np, err := jsonrpc.Replace(params, "_meta", nm); err == nil {
			params = np
		}
	}
	return jsonrpc.Request(rawString(questionRequestID(id, q.ID)), q.Method, params)
}

// onStream is the tasks.Relay Ask that puts each question of task id to its owner on this
// stream (emit): the tasks/result stream of a task, a held plain call's own stream (spec
// 2025-11-25 tasks: input_required → the question travels on tasks/result). When emit fails
// (a JSON answer, the client went away) the question stays on the task for the tollgate_*
// tools and tasks/get.
func onStream(id string, emit func([]byte) bool) func(*tasks.Question) tasks.Asked {
	return func(q *tasks.Question) tasks.Asked {
		if !emit(questionRequest(id, q)) {
			return tasks.RelayClosed
		}
		return tasks.Relayed
	}
}

// questionResponse takes a client's answer to a question sent by onStream. The
// owner check is the task's: anyone else's answer is ignored like an unknown id.
func (g *Gateway) questionResponse(ctx context.Context, x *Exchange, id string) Result {
	taskID, qid, ok := parseQuestionRequestID(id)
	if !ok {
		return Result{Accepted: true}
	}
	var rpcErr *jsonrpc.Error
	if x.Msg.Error != nil {
		rpcErr = jsonrpc.DecodeError(x.Msg.Error)
	}
	_, err := g.d.Tasks.Answer(ctx, owner(x), taskID, qid, x.Msg.Result, rpcErr)
	if err != nil && !errors.Is(err, tasks.ErrNotFound) && !errors.Is(err, tasks.ErrNoQuestion) {
		// an invalid or oversized answer: the question stays pending until answered or timed out
		g.log.Info("a task's owner answered a question unusably", "task_id", taskID, "question", qid, "error", err.Error())
	}
	return Result{Accepted: true}
}

// outcomeOrQuestion waits for the outcome of a plain call's task (a held or blocked call),
// with r's ticks, and puts the upstream's questions during its call to the caller: a
// 2025-11-25 caller gets them on the call's own stream, as a direct proxy would relay them; a
// 2026-07-28 caller, which takes no requests on a stream, gets an InputRequiredResult naming
// the question, and its retry with inputResponses (answerFromRetry) continues the call (spec
// 2026-07-28 basic/patterns/mrtr). nil: the client went away.
func (g *Gateway) outcomeOrQuestion(ctx context.Context, x *Exchange, own, id string, emit func([]byte) bool, r tasks.Relay) (answer []byte) {
	leave := g.waiting.enter(id)
	defer func() {
		if last := leave(); last && answer == nil && g.d.StoppedWaiting != nil {
			g.d.StoppedWaiting(id)
		}
	}()
	if r.Note == nil {
		// the upstream's progress and log messages during the call come on this stream
		r.Note = newHeldProgress(x, emit, "", 0, "").note
	}
	switch {
	case x.Modern == nil:
		r.Ask = onStream(id, emit)
	case own != tasks.Anonymous:
		// Only what the request's clientCapabilities declare may be asked (the others wait
		// for the tollgate_* tools or time out).
		r.Ask = func(q *tasks.Question) tasks.Asked {
			if c, known := inputCapability[q.Method]; known && jsonrpc.Member(x.Modern.Capabilities, c) != nil {
				return tasks.RelayReturn
			}
			return tasks.Relayed
		}
		// An anonymous caller's retry makes a task of its own (no one to attach it to), so it
		// could not continue this one: its question waits for the tollgate_* tools.
	}
	for {
		st, err := g.d.Tasks.Follow(ctx, own, id, r)
		if err != nil || st.Done {
			return g.outcomeReply(x, id, st.Result, st.Error, err)
		}
		t, err := g.d.Tasks.Get(ctx, own, id)
		if err != nil {
			return g.outcomeReply(x, id, nil, nil, err)
		}
		if reqs := g.inputRequests(t); reqs != nil {
			b, _ := jsonrpc.Marshal(map[string]any{"resultType": "input_required", "inputRequests": reqs, "requestState": id})
			return jsonrpc.ResultResponse(x.Msg.ID, b)
		}
		// answered meanwhile: the outcome, or the next question, is still to come
	}
}

// answerFromRetry gives the inputResponses of a 2026-07-28 retry of a held call to the question
// of its task they answer (answerQuestions).
func (g *Gateway) answerFromRetry(ctx context.Context, x *Exchange, own, id string) *jsonrpc.Error {
	var p struct {
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
	}
	if json.Unmarshal(x.Msg.Params, &p) != nil {
		return nil
	}
	return g.answerQuestions(ctx, own, id, p.InputResponses)
}

// answerQuestions gives 2026-07-28 inputResponses (a held call's retry, tasks/update) to the
// upstream's question of task id they answer (keys from inputRequests, questionKeyPrefix);
// other keys, and answers to a question no longer pending, are ignored; an answer the manager
// refuses (malformed, too large) is -32602. The owner check is the task's.
func (g *Gateway) answerQuestions(ctx context.Context, own, id string, responses map[string]json.RawMessage) *jsonrpc.Error {
	for key, ans := range responses {
		qid, ok := strings.CutPrefix(key, questionKeyPrefix)
		if !ok {
			continue
		}
		if _, err := g.d.Tasks.Answer(ctx, own, id, qid, ans, nil); err != nil && !errors.Is(err, tasks.ErrNoQuestion) && !errors.Is(err, tasks.ErrNotFound) {
			return jsonrpc.NewError(jsonrpc.CodeInvalidParams, "InvalidParams", "Invalid params: inputResponses["+strconv.Quote(key)+"]: "+err.Error())
		}
	}
	return nil
}

// OnTaskQuestion is a tasks.Manager subscriber: a question of the upstream's that becomes
// pending on a 2025-11-25 task while no tasks/result (or held call) of this replica carries
// its questions goes to the owning session's GET stream (spec 2025-11-25 tasks: a request
// about a task goes on the tasks/result stream, else on the session's stream), with the
// related-task _meta. A tasks/result opened right after may ask it again; the first answer
// counts. It never blocks (session.Push drops the message when the stream is full).
func (g *Gateway) OnTaskQuestion(tr tasks.Transition) {
	t := tr.Task
	if tr.Event() != tasks.EventInput || t.Era == tasks.EraModern || t.SessionID == "" || g.d.Tasks.Relaying(t.ID) {
		return
	}
	q := t.PendingQuestion()
	if q == nil || g.d.Sessions == nil {
		return
	}
	if ss := g.d.Sessions.Get(t.SessionID); ss != nil {
		ss.Push(questionRequest(t.ID, q))
	}
}
