package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

var followAnswers = map[string]string{
	MethodElicit: `{"action":"accept","content":{"ok":true}}`,
	MethodSample: `{"role":"assistant","content":{"type":"text","text":"fine"},"model":"m"}`,
}

func approved(t *testing.T, e *env, owner string) *Task {
	t.Helper()
	tk := e.create(t, owner)
	if _, err := e.m.Approve(context.Background(), tk.ID, "bob", ""); err != nil {
		t.Fatal(err)
	}
	return tk
}

// TestFollowRelaysQuestions: each question of the call is given to Ask once, in order, on
// Follow's goroutine (its answer reaches the call), the task counts as relayed meanwhile, and
// Follow returns what the call returned.
func TestFollowRelaysQuestions(t *testing.T) {
	e, _ := questionEnv(t, &askingExec{asks: []string{MethodElicit, MethodSample}})
	tk := approved(t, e, "alice")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var asked []string
	st, err := e.m.Follow(ctx, "alice", tk.ID, Relay{Ask: func(q *Question) Asked {
		asked = append(asked, q.ID+" "+q.Method)
		if !e.m.Relaying(tk.ID) {
			t.Error("Relaying is false while Follow relays")
		}
		if _, err := e.m.Answer(ctx, "alice", tk.ID, q.ID, json.RawMessage(followAnswers[q.Method]), nil); err != nil {
			t.Errorf("answer %s: %v", q.ID, err)
		}
		return Relayed
	}})
	if err != nil || !st.Done || st.Error != nil || st.Question != nil {
		t.Fatalf("Follow = %+v, %v", st, err)
	}
	want := followAnswers[MethodElicit] + " | " + followAnswers[MethodSample]
	if got := resultText(t, st.Result); got != want {
		t.Errorf("the call got %q, want %q", got, want)
	}
	if strings.Join(asked, ", ") != "q1 elicitation/create, q2 sampling/createMessage" {
		t.Errorf("asked %q", asked)
	}
	if e.m.Relaying(tk.ID) {
		t.Error("Relaying still true after Follow returned")
	}
}

// TestFollowRelayClosed: once Ask says the stream cannot carry questions it is asked no
// more; the owner answers another way and Follow still returns the outcome.
func TestFollowRelayClosed(t *testing.T) {
	e, asked := questionEnv(t, &askingExec{asks: []string{MethodElicit, MethodElicit}})
	tk := approved(t, e, "alice")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	relayed := make(chan struct{}, 2)
	go func() { // the owner answers both on another path (tollgate_answer_question)
		for i := range 2 {
			select {
			case q := <-asked:
				if i == 0 { // the first once Follow has put it to Ask (else Follow might never see it)
					select {
					case <-relayed:
					case <-ctx.Done():
						return
					}
				}
				_, _ = e.m.Answer(ctx, "alice", tk.ID, q.PendingQuestion().ID, json.RawMessage(`{"action":"decline"}`), nil)
			case <-ctx.Done():
				return
			}
		}
	}()
	n := 0
	st, err := e.m.Follow(ctx, "alice", tk.ID, Relay{Ask: func(*Question) Asked { n++; relayed <- struct{}{}; return RelayClosed }})
	if err != nil || !st.Done || st.Error != nil {
		t.Fatalf("Follow = %+v, %v", st, err)
	}
	if n != 1 {
		t.Errorf("Ask called %d times after it closed the relay, want 1", n)
	}
	if got := resultText(t, st.Result); got != `{"action":"decline"} | {"action":"decline"}` {
		t.Errorf("the call got %q", got)
	}
}

// TestFollowRelayReturn: RelayReturn hands the question to Follow's caller (the task runs
// on); a later Follow without Ask waits for the outcome only.
func TestFollowRelayReturn(t *testing.T) {
	e, _ := questionEnv(t, &askingExec{asks: []string{MethodElicit}})
	tk := approved(t, e, "alice")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := e.m.Follow(ctx, "alice", tk.ID, Relay{Ask: func(*Question) Asked { return RelayReturn }})
	if err != nil || st.Done || st.Question == nil || st.Question.Method != MethodElicit {
		t.Fatalf("Follow = %+v, %v; want the question", st, err)
	}
	if _, err := e.m.Follow(ctx, "bob", tk.ID, Relay{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("another owner's Follow: %v, want ErrNotFound", err)
	}
	if _, err := e.m.Answer(ctx, "alice", tk.ID, st.Question.ID, json.RawMessage(`{"action":"cancel"}`), nil); err != nil {
		t.Fatal(err)
	}
	st, err = e.m.Follow(ctx, "alice", tk.ID, Relay{})
	if err != nil || !st.Done || resultText(t, st.Result) != `{"action":"cancel"}` {
		t.Fatalf("Follow after the answer = %+v, %v", st, err)
	}
}

// TestFollowTicks: Tick runs while Follow waits until it returns false, then never again.
func TestFollowTicks(t *testing.T) {
	e := newEnv(t, nil)
	tk := e.create(t, "alice")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n := 0
	st, err := e.m.Follow(ctx, "alice", tk.ID, Relay{Every: time.Millisecond, Tick: func() bool {
		if n++; n < 3 {
			return true
		}
		if _, err := e.m.Approve(ctx, tk.ID, "bob", ""); err != nil {
			t.Error(err)
		}
		return false
	}})
	if err != nil || !st.Done || string(st.Result) != okResult {
		t.Fatalf("Follow = %+v, %v", st, err)
	}
	if n != 3 {
		t.Errorf("ticks = %d, want 3", n)
	}
	ctx, cancel = context.WithCancel(ctx)
	cancel()
	if _, err := e.m.Follow(ctx, "alice", e.create(t, "alice", func(r *CreateRequest) { r.Tool = "other" }).ID, Relay{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Follow with its context ended: %v", err)
	}
}

// TestFollowTaskDeletedRightAfterFinishing: with retention 0 the sweeper expires a task and
// deletes it in one pass; a Follow waiting on it still answers TaskExpired, not not-found.
func TestFollowTaskDeletedRightAfterFinishing(t *testing.T) {
	e := newEnv(t, nil)
	e.exec.block, e.exec.started = make(chan struct{}), make(chan string, 1)
	defer close(e.exec.block)
	tk := e.create(t, "alice", func(r *CreateRequest) { r.TTL = time.Minute })
	if _, err := e.m.Approve(bg, tk.ID, "bob", ""); err != nil {
		t.Fatal(err)
	}
	<-e.exec.started
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type answer struct {
		st  Step
		err error
	}
	done := make(chan answer, 1)
	go func() {
		st, err := e.m.Follow(ctx, "alice", tk.ID, Relay{Ask: func(*Question) Asked { return Relayed }})
		done <- answer{st, err}
	}()
	waitParked(t, ctx, "tasks.(*Manager).waitChange", 1)
	e.clock.Advance(time.Minute)
	e.m.Sweep(bg)
	if _, err := e.st.Get(bg, tk.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the task is still stored (%v): the test needs it deleted", err)
	}
	a := <-done
	if a.err != nil || !a.st.Done || a.st.Error == nil || a.st.Error.Code != jsonrpc.CodeTaskExpired {
		t.Fatalf("Follow = %+v, %v; want TaskExpired", a.st, a.err)
	}
}

// waitParked waits until n goroutines are blocked in fn (a frame of their stacks): a
// structural wait, there is no event to await when a goroutine parks.
func waitParked(t *testing.T, ctx context.Context, fn string, n int) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for {
		k := 0
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, fn+"(") {
				k++
			}
		}
		if k >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d goroutines in %s, want %d", k, fn, n)
		case <-time.After(time.Millisecond):
		}
	}
}
