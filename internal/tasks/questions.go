package tasks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
)

// Questions: a request the upstream sends the client while Tollgate executes a task's call
// (spec 2025-11-25 client features: elicitation/create, sampling/createMessage, roots/list)
// belongs to the task, hence to its owner. It is kept on the task in the store, so every
// replica sharing the store shows it and takes the owner's answer; the replica that holds the
// upstream call (Ask) reads the answer from the store. One question per task is pending at a
// time; the wire status is input_required while it is (Task.WireStatus).

// The server→client requests Tollgate relays to a task's owner.
const (
	MethodElicit = "elicitation/create"
	MethodSample = "sampling/createMessage"
	MethodRoots  = "roots/list"
)

// Relayable reports whether method is a question Tollgate puts to a task's owner.
func Relayable(method string) bool {
	return method == MethodElicit || method == MethodSample || method == MethodRoots
}

const (
	// MaxQuestionBytes bounds the params of one question kept on a task (docs/eras.md).
	MaxQuestionBytes = 256 << 10
	// MaxAnswerBytes bounds the owner's answer to one question (AnswerTooLargeError: a
	// tollgate_answer_question error result, -32602 InvalidParams in 2026-07-28).
	MaxAnswerBytes = 256 << 10
	// DefaultInputTimeout is tasks.input_timeout's default (config.DefaultInputTimeout).
	DefaultInputTimeout = 2 * time.Minute
)

// Question is one request of the upstream's, pending for the task's owner. Its params and
// answer are never logged.
type Question struct {
	ID       string          `json:"id"` // "q1", "q2", … within the task
	Method   string          `json:"method"`
	Params   json.RawMessage `json:"params,omitempty"`
	AskedAt  time.Time       `json:"asked_at"`
	Deadline time.Time       `json:"deadline"` // tasks.input_timeout after AskedAt
	// Answered is set once, by the owner's answer (the claim): Answer, or AnswerError when
	// the owner's client answered with a JSON-RPC error.
	Answered    bool            `json:"answered,omitempty"`
	Answer      json.RawMessage `json:"answer,omitempty"`
	AnswerError *jsonrpc.Error  `json:"answer_error,omitempty"`
}

func (q *Question) clone() *Question {
	if q == nil {
		return nil
	}
	c := *q
	c.Params = slices.Clone(q.Params)
	c.Answer = slices.Clone(q.Answer)
	if q.AnswerError != nil {
		e := *q.AnswerError
		e.RawData = slices.Clone(q.AnswerError.RawData)
		c.AnswerError = &e
	}
	return &c
}

// PendingQuestion is the task's question awaiting the owner's answer, nil when none is.
func (t *Task) PendingQuestion() *Question {
	if t.State != Executing || t.Question == nil || t.Question.Answered {
		return nil
	}
	return t.Question.clone()
}

// Errors of Answer.
var (
	// ErrNoQuestion: the task has no pending question with that id (answered already, timed
	// out, or never asked). Callers answer it like ErrNotFound.
	ErrNoQuestion = errors.New("no such pending question")
	// ErrInvalidAnswer: the answer is not a result of the question's kind.
	ErrInvalidAnswer = errors.New("invalid answer")
)

// AnswerTooLargeError: the answer exceeds MaxAnswerBytes.
type AnswerTooLargeError struct{ Size int }

func (e *AnswerTooLargeError) Error() string {
	return fmt.Sprintf("answer of %d bytes exceeds the limit of %d bytes", e.Size, MaxAnswerBytes)
}

// ParseAnswer checks that raw is a result of the question kind method and returns it
// compacted: an ElicitResult (action accept, decline or cancel; content, if any, an object),
// a CreateMessageResult (role, content, model), a ListRootsResult (roots, an array of objects
// with a uri). Unknown members are kept. The error wraps ErrInvalidAnswer or is an
// *AnswerTooLargeError.
func ParseAnswer(method string, raw []byte) (json.RawMessage, error) {
	if len(raw) > MaxAnswerBytes {
		return nil, &AnswerTooLargeError{Size: len(raw)}
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' || !json.Valid(raw) {
		return nil, fmt.Errorf("%w: not a JSON object", ErrInvalidAnswer)
	}
	switch method {
	case MethodElicit:
		var r struct {
			Action  string          `json:"action"`
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("%w: %s", ErrInvalidAnswer, shortJSONError(err))
		}
		switch r.Action {
		case "accept", "decline", "cancel":
		default:
			// the value itself is the owner's and is never echoed or logged
			return nil, fmt.Errorf("%w: action must be accept, decline or cancel", ErrInvalidAnswer)
		}
		if c := bytes.TrimSpace(r.Content); len(c) > 0 && string(c) != "null" && c[0] != '{' {
			return nil, fmt.Errorf("%w: content must be an object", ErrInvalidAnswer)
		}
	case MethodSample:
		var r struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
			Model   *string         `json:"model"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("%w: %s", ErrInvalidAnswer, shortJSONError(err))
		}
		if r.Role != "assistant" && r.Role != "user" {
			return nil, fmt.Errorf("%w: role must be assistant or user", ErrInvalidAnswer)
		}
		if c := bytes.TrimSpace(r.Content); len(c) == 0 || (c[0] != '{' && c[0] != '[') {
			return nil, fmt.Errorf("%w: content must be a content block or an array of them", ErrInvalidAnswer)
		}
		if r.Model == nil {
			return nil, fmt.Errorf("%w: model is required", ErrInvalidAnswer)
		}
	case MethodRoots:
		var r struct {
			Roots []struct {
				URI *string `json:"uri"`
			} `json:"roots"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("%w: %s", ErrInvalidAnswer, shortJSONError(err))
		}
		if r.Roots == nil {
			return nil, fmt.Errorf("%w: roots is required", ErrInvalidAnswer)
		}
		for _, root := range r.Roots {
			if root.URI == nil {
				return nil, fmt.Errorf("%w: every root needs a uri", ErrInvalidAnswer)
			}
		}
	default:
		return nil, fmt.Errorf("%w: no question of kind %q", ErrInvalidAnswer, clip(method))
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, fmt.Errorf("%w: not JSON", ErrInvalidAnswer)
	}
	return buf.Bytes(), nil
}

// shortJSONError names what was wrong without quoting the answer (it is never logged or echoed).
func shortJSONError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return te.Field + " has the wrong type"
	}
	return "malformed"
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// declined is what the upstream gets for a question its owner did not answer in time: an
// elicitation is declined; sampling and roots get an error.
func declined(method string, why string) (json.RawMessage, *jsonrpc.Error) {
	if method == MethodElicit {
		return json.RawMessage(`{"action":"decline"}`), nil
	}
	return nil, jsonrpc.NewError(jsonrpc.CodeUpstreamTimeout, "InputTimeout", why)
}

// unanswered is what the upstream gets for a question whose wait ended because the task's
// execution did (cancelled, timed out, lease lost, this replica stopping): an error, never a
// decline, which the tool could act on as though the owner had given it.
func unanswered(why string) (json.RawMessage, *jsonrpc.Error) {
	return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "ExecutionEnded", why)
}

// askKey is the context key under which the Manager hands an execution its Ask function.
type askKey struct{}

// AskFunc puts one question of the upstream's to the task's owner and returns the answer to
// send the upstream: a result, or a JSON-RPC error.
type AskFunc func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error)

// AskerFrom returns the function that asks the owner of the task whose execution ctx belongs
// to, nil outside an execution the Manager started.
func AskerFrom(ctx context.Context) AskFunc {
	f, _ := ctx.Value(askKey{}).(AskFunc)
	return f
}

func (m *Manager) withAsker(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, askKey{}, AskFunc(func(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
		return m.ask(ctx, id, method, params)
	}))
}

// questionStatus is the statusMessage while a question is pending.
func questionStatus(q *Question, era string) string {
	how := "answer it on tasks/result or with tollgate_answer_question"
	if era == EraModern {
		how = "answer inputRequests with tasks/update"
	}
	return fmt.Sprintf("The tool asks you something (%s, question %s): %s", q.Method, q.ID, how)
}

// ask stores the question on task id, waits for the owner's answer (or tasks.input_timeout,
// or ctx) and returns what the upstream is to get. It runs on the replica executing the task.
func (m *Manager) ask(ctx context.Context, id, method string, params json.RawMessage) (json.RawMessage, *jsonrpc.Error) {
	if !Relayable(method) {
		return nil, jsonrpc.NewError(jsonrpc.CodeMethodNotFound, "NotBridged", "Tollgate does not relay "+clip(method)+" to the task's owner")
	}
	if len(params) > MaxQuestionBytes {
		return nil, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "QuestionTooLarge",
			fmt.Sprintf("Tollgate relays questions of at most %d bytes to the task's owner", MaxQuestionBytes))
	}
	timeout := m.opts.InputTimeout
	if timeout <= 0 {
		timeout = DefaultInputTimeout
	}
	var qid string
	_, err := m.update(ctx, id, func(t *Task) error {
		if t.State != Executing {
			return errNoop
		}
		if t.Question != nil { // pending, or answered and not yet taken by its asker
			return ErrQuestionPending
		}
		t.Asked++
		now := m.now()
		t.Question = &Question{ID: "q" + strconv.Itoa(t.Asked), Method: method, Params: slices.Clone(params), AskedAt: now, Deadline: now.Add(timeout)}
		qid = t.Question.ID
		t.StatusMessage = questionStatus(t.Question, t.Era)
		return nil
	})
	switch {
	case errors.Is(err, ErrQuestionPending):
		return nil, jsonrpc.NewError(jsonrpc.CodeMethodNotFound, "NotBridged",
			"Tollgate relays one question of a task at a time to its owner; another is pending")
	case err != nil:
		return unanswered("The task is no longer executing")
	}
	m.met.asked()
	m.log.Info("task: the upstream asks the owner", "task_id", id, "method", method, "question", qid)
	// This replica holds the call, so it alone enforces the deadline (a timer of its own: the
	// stored Deadline tells the owner).
	expire := time.NewTimer(timeout)
	defer expire.Stop()
	expired := false
	for {
		w := m.acquireWaiter(id) // before reading, so no answer is missed
		t, err := m.load1(ctx, id)
		if err != nil || t.State != Executing || t.Question == nil || t.Question.ID != qid {
			m.releaseWaiter(id, w)
			return unanswered("The task is no longer executing")
		}
		if q := t.Question; q.Answered {
			m.releaseWaiter(id, w)
			m.finishQuestion(id, qid, "Executing (answer received)")
			if q.AnswerError != nil {
				return nil, q.AnswerError
			}
			return q.Answer, nil
		}
		if expired {
			m.releaseWaiter(id, w)
			// Take the question back unless the answer wins the race.
			if ans, rpcErr, answered := m.expireQuestion(id, qid); answered {
				return ans, rpcErr
			}
			m.met.inputTimedOut()
			m.log.Info("task: the owner did not answer in time", "task_id", id, "question", qid)
			return declined(method, "The task's owner did not answer within tasks.input_timeout")
		}
		// Another replica may record the answer (docs/operations.md): waitChange re-reads.
		if _, fired := m.waitChange(ctx, id, w, expire.C, nil); fired {
			expired = true
		}
		if ctx.Err() != nil {
			m.finishQuestion(id, qid, "Executing")
			return unanswered("The task's execution ended")
		}
	}
}

// ErrQuestionPending: the upstream asked while another question of the task is pending.
var ErrQuestionPending = errors.New("a question is already pending")

// finishQuestion clears question qid off the task once its answer was taken (or its wait ended).
func (m *Manager) finishQuestion(id, qid, status string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(m.ctx), commitTimeout)
	defer cancel()
	_, err := m.update(ctx, id, func(t *Task) error {
		if t.State != Executing || t.Question == nil || t.Question.ID != qid {
			return errNoop
		}
		t.Question = nil
		t.StatusMessage = status
		return nil
	})
	if err != nil && !errors.Is(err, errNoop) {
		m.log.Warn("task: clearing a question failed", "task_id", id, "error", err.Error())
	}
}

// expireQuestion takes question qid back after its deadline, unless the owner's answer was
// recorded first (then that answer is returned with answered=true).
func (m *Manager) expireQuestion(id, qid string) (json.RawMessage, *jsonrpc.Error, bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(m.ctx), commitTimeout)
	defer cancel()
	var ans json.RawMessage
	var rpcErr *jsonrpc.Error
	answered := false
	_, err := m.update(ctx, id, func(t *Task) error {
		if t.State != Executing || t.Question == nil || t.Question.ID != qid {
			return errNoop
		}
		if q := t.Question; q.Answered {
			ans, rpcErr, answered = q.Answer, q.AnswerError, true
		}
		t.Question = nil
		t.StatusMessage = "Executing (the question was not answered in time)"
		if answered {
			t.StatusMessage = "Executing (answer received)"
		}
		return nil
	})
	if err != nil && !errors.Is(err, errNoop) {
		m.log.Warn("task: clearing a question failed", "task_id", id, "error", err.Error())
	}
	return ans, rpcErr, answered
}

// Answer records the owner's answer to the task's pending question qid, once: the first
// answer claims the question (compare-and-swap in the store), a later one gets ErrNoQuestion.
// Exactly one of result and rpcErr is set (rpcErr: the owner's client answered with a
// JSON-RPC error). A foreign owner gets ErrNotFound, as for every task operation. The answer
// is checked with ParseAnswer and never logged.
func (m *Manager) Answer(ctx context.Context, owner, id, qid string, result json.RawMessage, rpcErr *jsonrpc.Error) (*Task, error) {
	cur, err := m.getOwned(ctx, owner, id, true)
	if err != nil {
		return nil, err
	}
	q := cur.PendingQuestion()
	if q == nil || q.ID != qid {
		return cur, ErrNoQuestion
	}
	if rpcErr == nil {
		if result, err = ParseAnswer(q.Method, result); err != nil {
			return cur, err
		}
	} else if len(rpcErr.RawData) > MaxAnswerBytes {
		return cur, &AnswerTooLargeError{Size: len(rpcErr.RawData)}
	}
	t, err := m.update(ctx, id, func(t *Task) error {
		if p := t.PendingQuestion(); p == nil || p.ID != qid || !MayAccess(owner, t.Owner) {
			return ErrNoQuestion
		}
		t.Question.Answered = true
		t.Question.Answer, t.Question.AnswerError = result, rpcErr
		t.StatusMessage = "Executing (answer received)"
		return nil
	})
	if err != nil {
		return t, err
	}
	m.log.Info("task: the owner answered", "task_id", id, "question", qid)
	return t, nil
}
