package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
)

// askingExec is an Executor whose call asks the owner each of asks in turn (AskerFrom) and
// returns what it got, as a tool would.
type askingExec struct {
	asks []string // methods
	// failOnError: an error answer ends the call with an isError result, as a tool reports a
	// failed elicitation (the go-sdk fixture's confirm does)
	failOnError bool
}

func (a *askingExec) Execute(ctx context.Context, t *Task) (json.RawMessage, *jsonrpc.Error) {
	ask := AskerFrom(ctx)
	if ask == nil {
		return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "NoAsker", "no asker in the execution context")
	}
	var got []string
	for _, m := range a.asks {
		res, rpcErr := ask(ctx, m, json.RawMessage(`{"message":"sure?"}`))
		if rpcErr != nil && a.failOnError {
			return json.RawMessage(`{"content":[{"type":"text","text":"no answer: ` + rpcErr.Name() + `"}],"isError":true}`), nil
		}
		if rpcErr != nil {
			got = append(got, "error "+rpcErr.Name())
			continue
		}
		got = append(got, string(res))
	}
	b, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": strings.Join(got, " | ")}}})
	return b, nil
}

// questionEnv is newEnv with an asking executor; asked receives the task each time one of its
// questions becomes pending.
func questionEnv(t *testing.T, exec *askingExec, opts ...envOpt) (*env, <-chan *Task) {
	t.Helper()
	e := newEnv(t, nil, opts...)
	m := NewManager(e.st, exec, nil, e.m.opts)
	t.Cleanup(func() { _ = m.Close() })
	e.m = m
	asked := make(chan *Task, 16)
	m.Subscribe(func(tr Transition) {
		if tr.Event() == EventInput && tr.Task.PendingQuestion() != nil {
			asked <- tr.Task
		}
	})
	return e, asked
}

func waitAsked(t *testing.T, asked <-chan *Task) *Task {
	t.Helper()
	select {
	case tk := <-asked:
		return tk
	case <-time.After(5 * time.Second):
		t.Fatal("no question was asked")
		return nil
	}
}

func resultText(t *testing.T, res json.RawMessage) string {
	t.Helper()
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(res, &r); err != nil || len(r.Content) != 1 {
		t.Fatalf("result %s", res)
	}
	return r.Content[0].Text
}

// TestQuestionAnsweredByOwner: questions of several kinds during one execution reach the
// task (input_required, what is asked), the owner's answers go back to the call in order, the
// task returns to working after each, and the call runs once.
func TestQuestionAnsweredByOwner(t *testing.T) {
	exec := &askingExec{asks: []string{MethodElicit, MethodSample, MethodElicit}}
	e, asked := questionEnv(t, exec)
	tk := e.create(t, "alice")
	ctx := context.Background()
	if _, err := e.m.Approve(ctx, tk.ID, "bob", ""); err != nil {
		t.Fatal(err)
	}
	answers := []string{
		`{"action":"accept","content":{"ok":true}}`,
		`{"role":"assistant","content":{"type":"text","text":"fine"},"model":"m"}`,
		`{"action":"decline"}`,
	}
	for i, ans := range answers {
		q := waitAsked(t, asked)
		pq := q.PendingQuestion()
		if q.WireStatus() != "input_required" || pq.Method != exec.asks[i] || string(pq.Params) != `{"message":"sure?"}` {
			t.Fatalf("question %d: status %s, %+v", i, q.WireStatus(), pq)
		}
		got, err := e.m.Get(ctx, "alice", tk.ID)
		if err != nil || got.PendingQuestion() == nil || got.PendingQuestion().ID != pq.ID {
			t.Fatalf("Get while asked: %+v %v", got, err)
		}
		if _, err := e.m.Answer(ctx, "alice", tk.ID, pq.ID, json.RawMessage(ans), nil); err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		// Accepted once: the same question cannot be answered again.
		if _, err := e.m.Answer(ctx, "alice", tk.ID, pq.ID, json.RawMessage(ans), nil); !errors.Is(err, ErrNoQuestion) {
			t.Fatalf("second answer: %v, want ErrNoQuestion", err)
		}
	}
	res, rpcErr := e.result(t, "alice", tk.ID)
	if rpcErr != nil {
		t.Fatal(rpcErr)
	}
	want := `{"action":"accept","content":{"ok":true}} | {"role":"assistant","content":{"type":"text","text":"fine"},"model":"m"} | {"action":"decline"}`
	if got := resultText(t, res); got != want {
		t.Fatalf("the call got %q, want %q", got, want)
	}
	final, _ := e.m.Lookup(ctx, tk.ID)
	if final.State != Completed || final.Question != nil || final.Asked != 3 {
		t.Fatalf("final task: %s question %+v asked %d", final.State, final.Question, final.Asked)
	}
}

// TestQuestionForeignOwner: another caller cannot see or answer the question (not found,
// as for every task); a malformed or oversized answer is refused and the question stays.
func TestQuestionForeignOwner(t *testing.T) {
	e, asked := questionEnv(t, &askingExec{asks: []string{MethodElicit}})
	tk := e.create(t, "alice")
	ctx := context.Background()
	if _, err := e.m.Approve(ctx, tk.ID, "bob", ""); err != nil {
		t.Fatal(err)
	}
	q := waitAsked(t, asked).PendingQuestion()
	if _, err := e.m.Answer(ctx, "mallory", tk.ID, q.ID, json.RawMessage(`{"action":"accept","content":{"ok":true}}`), nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("foreign answer: %v, want ErrNotFound", err)
	}
	if _, err := e.m.Answer(ctx, "alice", tk.ID, q.ID, json.RawMessage(`{"action":"maybe"}`), nil); !errors.Is(err, ErrInvalidAnswer) {
		t.Fatalf("invalid answer: %v", err)
	}
	big := `{"action":"accept","content":{"x":"` + strings.Repeat("a", MaxAnswerBytes) + `"}}`
	var tooLarge *AnswerTooLargeError
	if _, err := e.m.Answer(ctx, "alice", tk.ID, q.ID, json.RawMessage(big), nil); !errors.As(err, &tooLarge) {
		t.Fatalf("oversized answer: %v", err)
	}
	if _, err := e.m.Answer(ctx, "alice", tk.ID, "q9", json.RawMessage(`{"action":"decline"}`), nil); !errors.Is(err, ErrNoQuestion) {
		t.Fatalf("unknown question: %v", err)
	}
	// The owner's client may answer with a JSON-RPC error; the call gets it.
	if _, err := e.m.Answer(ctx, "alice", tk.ID, q.ID, nil, jsonrpc.NewError(-1, "UserRejected", "no")); err != nil {
		t.Fatal(err)
	}
	res, _ := e.result(t, "alice", tk.ID)
	if got := resultText(t, res); got != "error UserRejected" {
		t.Fatalf("the call got %q", got)
	}
}

// TestQuestionTimeout: a question nobody answers within tasks.input_timeout is declined for
// an elicitation and an InputTimeout error for sampling; the call goes on and the task ends
// with what it returns.
func TestQuestionTimeout(t *testing.T) {
	e, asked := questionEnv(t, &askingExec{asks: []string{MethodElicit, MethodRoots}}, func(o *Options, _ *fakeExec) {
		o.InputTimeout = 20 * time.Millisecond
	})
	tk := e.create(t, "alice")
	if _, err := e.m.Approve(context.Background(), tk.ID, "bob", ""); err != nil {
		t.Fatal(err)
	}
	waitAsked(t, asked)
	res, rpcErr := e.result(t, "alice", tk.ID)
	if rpcErr != nil {
		t.Fatal(rpcErr)
	}
	if got := resultText(t, res); got != `{"action":"decline"} | error InputTimeout` {
		t.Fatalf("the call got %q", got)
	}
}

// TestQuestionCancelled: cancelling the task while a question waits ends the wait (the call
// is stopped) and the task stays cancelled.
func TestQuestionCancelled(t *testing.T) {
	e, asked := questionEnv(t, &askingExec{asks: []string{MethodElicit}})
	tk := e.create(t, "alice")
	ctx := context.Background()
	if _, err := e.m.Approve(ctx, tk.ID, "bob", ""); err != nil {
		t.Fatal(err)
	}
	q := waitAsked(t, asked).PendingQuestion()
	if _, err := e.m.Cancel(ctx, "alice", tk.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Answer(ctx, "alice", tk.ID, q.ID, json.RawMessage(`{"action":"decline"}`), nil); !errors.Is(err, ErrNoQuestion) {
		t.Fatalf("answer after cancel: %v", err)
	}
	if _, rpcErr := e.result(t, "alice", tk.ID); rpcErr == nil || rpcErr.Name() != "TaskCancelled" {
		t.Fatalf("outcome %v", rpcErr)
	}
}

// TestQuestionReplicaStopping: a replica that stops while a question waits for the owner fails
// the task with ExecutionInterrupted. The upstream is told the execution ended (an error), never
// a decline the owner did not give: a tool that took the decline and finished would have left
// the task completed with an answer nobody chose (seen as a flaky TestQuestionsAcrossReplicas).
func TestQuestionReplicaStopping(t *testing.T) {
	e, asked := questionEnv(t, &askingExec{asks: []string{MethodElicit}, failOnError: true})
	tk := e.create(t, "alice")
	ctx := context.Background()
	if _, err := e.m.Approve(ctx, tk.ID, "bob", ""); err != nil {
		t.Fatal(err)
	}
	waitAsked(t, asked)
	if err := e.m.Close(); err != nil {
		t.Fatal(err)
	}
	final, err := e.m.Lookup(ctx, tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if final.State != Failed || final.Error == nil || final.Error.Name() != "ExecutionInterrupted" {
		t.Fatalf("task after the replica stopped: %s error %v result %s, want failed ExecutionInterrupted", final.State, final.Error, final.Result)
	}
}

func TestParseAnswer(t *testing.T) {
	for _, tc := range []struct {
		method, raw string
		ok          bool
	}{
		{MethodElicit, `{"action":"accept","content":{"a":1}}`, true},
		{MethodElicit, ` {"action":"cancel"} `, true},
		{MethodElicit, `{"action":"accept","content":[1]}`, false},
		{MethodElicit, `{"action":"later"}`, false},
		{MethodElicit, `[]`, false},
		{MethodElicit, `{"action":"accept"`, false},
		{MethodSample, `{"role":"assistant","content":{"type":"text","text":"x"},"model":"m"}`, true},
		{MethodSample, `{"role":"assistant","content":[{"type":"text","text":"x"}],"model":"m"}`, true},
		{MethodSample, `{"role":"assistant","content":{"type":"text","text":"x"}}`, false},
		{MethodSample, `{"role":"robot","content":{},"model":"m"}`, false},
		{MethodRoots, `{"roots":[{"uri":"file:///a","name":"a"}]}`, true},
		{MethodRoots, `{"roots":[]}`, true},
		{MethodRoots, `{"roots":[{"name":"a"}]}`, false},
		{MethodRoots, `{}`, false},
		{"tools/call", `{}`, false},
	} {
		got, err := ParseAnswer(tc.method, []byte(tc.raw))
		if (err == nil) != tc.ok {
			t.Errorf("%s %s: err %v", tc.method, tc.raw, err)
		}
		if err != nil && !errors.Is(err, ErrInvalidAnswer) {
			t.Errorf("%s %s: %v does not wrap ErrInvalidAnswer", tc.method, tc.raw, err)
		}
		if err == nil && !json.Valid(got) {
			t.Errorf("%s %s: returned invalid JSON %s", tc.method, tc.raw, got)
		}
	}
}

// FuzzParseAnswer: whatever an owner sends, ParseAnswer either refuses it with a typed error
// or returns valid compact JSON of bounded size that parses again the same way.
func FuzzParseAnswer(f *testing.F) {
	for _, s := range []string{`{"action":"accept","content":{"ok":true}}`, `{"action":"decline"}`,
		`{"role":"assistant","content":{"type":"text","text":"x"},"model":"m"}`, `{"roots":[{"uri":"file:///"}]}`,
		`{"action":"accept","content":"x"}`, `{"roots":null}`, `nul`, `{"action":"\u0000"}`} {
		for _, m := range []string{MethodElicit, MethodSample, MethodRoots} {
			f.Add(m, []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, method string, raw []byte) {
		got, err := ParseAnswer(method, raw)
		if err != nil {
			var tl *AnswerTooLargeError
			if !errors.Is(err, ErrInvalidAnswer) && !errors.As(err, &tl) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if !json.Valid(got) || len(got) > MaxAnswerBytes {
			t.Fatalf("accepted %q as %q", raw, got)
		}
		again, err := ParseAnswer(method, got)
		if err != nil || string(again) != string(got) {
			t.Fatalf("not stable: %q → %q (%v)", got, again, err)
		}
	})
}

// concurrentExec asks a second question while its first is pending (pending is signalled by
// the test once the first shows on the task), as a tool with parallel requests would.
type concurrentExec struct{ pending, secondDone chan struct{} }

func (c concurrentExec) Execute(ctx context.Context, t *Task) (json.RawMessage, *jsonrpc.Error) {
	ask := AskerFrom(ctx)
	text := func(res json.RawMessage, rpcErr *jsonrpc.Error) string {
		if rpcErr != nil {
			return "error " + rpcErr.Name()
		}
		return string(res)
	}
	first := make(chan string, 1)
	go func() { first <- text(ask(ctx, MethodElicit, json.RawMessage(`{"message":"sure?"}`))) }()
	<-c.pending
	second := text(ask(ctx, MethodElicit, json.RawMessage(`{"message":"really?"}`)))
	close(c.secondDone)
	raw, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": <-first + " | " + second}}})
	return raw, nil
}

// TestQuestionOneAtATime: a task has one pending question; a second asked meanwhile is
// refused with NotBridged (the tool decides), the first is answered as usual.
func TestQuestionOneAtATime(t *testing.T) {
	e := newEnv(t, nil)
	exec := concurrentExec{pending: make(chan struct{}), secondDone: make(chan struct{})}
	m := NewManager(e.st, exec, nil, e.m.opts)
	t.Cleanup(func() { _ = m.Close() })
	asked := make(chan *Task, 4)
	m.Subscribe(func(tr Transition) {
		if tr.Event() == EventInput && tr.Task.PendingQuestion() != nil {
			asked <- tr.Task
		}
	})
	e.m = m
	tk := e.create(t, "alice")
	ctx := context.Background()
	if _, err := m.Approve(ctx, tk.ID, "bob", ""); err != nil {
		t.Fatal(err)
	}
	q := waitAsked(t, asked).PendingQuestion()
	close(exec.pending) // the second question is asked now, and refused at once
	<-exec.secondDone
	if _, err := m.Answer(ctx, "alice", tk.ID, q.ID, json.RawMessage(`{"action":"decline"}`), nil); err != nil {
		t.Fatal(err)
	}
	res, rpcErr := e.result(t, "alice", tk.ID)
	if rpcErr != nil {
		t.Fatal(rpcErr)
	}
	if got := resultText(t, res); got != `{"action":"decline"} | error NotBridged` {
		t.Fatalf("the call got %q", got)
	}
}
