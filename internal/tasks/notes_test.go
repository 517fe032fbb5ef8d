package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
)

// noteExec publishes n progress notes once release is closed, then returns a result.
type noteExec struct {
	n       int
	release chan struct{}
}

func (x *noteExec) Execute(ctx context.Context, t *Task) (json.RawMessage, *jsonrpc.Error) {
	pub := NoteFrom(ctx)
	if pub == nil {
		return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "NoNotes", "no note publisher in the execution context")
	}
	<-x.release
	for i := 1; i <= x.n; i++ {
		pub(Note{Method: MethodProgress, Params: json.RawMessage(fmt.Sprintf(`{"progressToken":"up","progress":%d}`, i))})
	}
	pub(Note{Method: "notifications/resources/updated", Params: json.RawMessage(`{}`)}) // not the caller's
	return json.RawMessage(okResult), nil
}

// noteEnv is newEnv with exec as the executor and unfollowed as Options.Unfollowed.
func noteEnv(t *testing.T, exec Executor, unfollowed func(*Task, Note)) *env {
	t.Helper()
	e := newEnv(t, nil)
	o := e.m.opts
	o.Unfollowed = unfollowed
	m := NewManager(e.st, exec, nil, o)
	t.Cleanup(func() { _ = m.Close() })
	e.m = m
	return e
}

// following waits (bounded) until n streams follow task id's notes.
func following(t *testing.T, m *Manager, id string, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		m.notes.mu.Lock()
		got := len(m.notes.subs[id])
		m.notes.mu.Unlock()
		if got == n {
			return
		}
	}
	t.Fatalf("%d streams do not follow %s", n, id)
}

// TestFollowTakesNotes: the upstream's progress during the call reaches a following stream in
// order and before the outcome; notifications that are not the caller's are not relayed, and
// nothing goes to Unfollowed while a stream follows.
func TestFollowTakesNotes(t *testing.T) {
	x := &noteExec{n: 5, release: make(chan struct{})}
	var unfollowed sync.Map
	e := noteEnv(t, x, func(tk *Task, n Note) { unfollowed.Store(tk.ID, n) })
	tk := approved(t, e, "alice")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []string
	done := make(chan Step, 1)
	go func() {
		st, _ := e.m.Follow(ctx, "alice", tk.ID, Relay{Note: func(n Note) bool {
			got = append(got, n.Method+" "+string(jsonrpc.Member(n.Params, "progress")))
			return true
		}})
		done <- st
	}()
	following(t, e.m, tk.ID, 1)
	close(x.release)
	st := <-done
	if !st.Done || st.Error != nil {
		t.Fatalf("Follow = %+v", st)
	}
	want := "notifications/progress 1, notifications/progress 2, notifications/progress 3, notifications/progress 4, notifications/progress 5"
	if strings.Join(got, ", ") != want {
		t.Errorf("notes %q, want %q", got, want)
	}
	if _, ok := unfollowed.Load(tk.ID); ok {
		t.Error("a followed task's note went to Unfollowed")
	}
	following(t, e.m, tk.ID, 0)
}

// TestNotesNeverBlockExecution: a stream that does not take its notes (a slow client) never
// holds up the call: the execution publishes far more than the buffer, completes, and the
// stream gets at most a buffer's worth, then the outcome. A task nobody follows hands its
// notes to Unfollowed.
func TestNotesNeverBlockExecution(t *testing.T) {
	x := &noteExec{n: 10 * noteQueue, release: make(chan struct{})}
	var mu sync.Mutex
	var unfollowed []string
	e := noteEnv(t, x, func(tk *Task, n Note) {
		mu.Lock()
		defer mu.Unlock()
		unfollowed = append(unfollowed, tk.ID)
	})
	tk := approved(t, e, "alice")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stuck := make(chan struct{})
	taken := 0
	done := make(chan Step, 1)
	go func() {
		st, _ := e.m.Follow(ctx, "alice", tk.ID, Relay{Note: func(Note) bool {
			if taken == 0 {
				<-stuck // the client does not read
			}
			taken++
			return true
		}})
		done <- st
	}()
	following(t, e.m, tk.ID, 1)
	close(x.release)
	// The execution completes while the stream is stuck on its first note.
	for deadline := time.Now().Add(5 * time.Second); e.state(t, tk.ID) != Completed; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the execution did not complete while a stream was stuck: %s", e.state(t, tk.ID))
		}
	}
	close(stuck)
	if st := <-done; !st.Done {
		t.Fatalf("Follow = %+v", st)
	}
	if taken == 0 || taken > noteQueue+1 {
		t.Errorf("the stuck stream took %d notes, want 1..%d (the rest dropped)", taken, noteQueue+1)
	}
	mu.Lock()
	n := len(unfollowed)
	mu.Unlock()
	if n != 0 {
		t.Errorf("%d notes of a followed task went to Unfollowed", n)
	}

	// Nobody follows: Unfollowed gets the caller's notes, and only those.
	x2 := &noteExec{n: 3, release: make(chan struct{})}
	close(x2.release)
	var got []string
	e2 := noteEnv(t, x2, func(tk *Task, n Note) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, tk.ID+" "+n.Method)
	})
	tk2 := approved(t, e2, "alice")
	if res, rpcErr := e2.result(t, "alice", tk2.ID); rpcErr != nil || res == nil {
		t.Fatalf("result: %s %v", res, rpcErr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 || got[0] != tk2.ID+" "+MethodProgress {
		t.Errorf("Unfollowed got %q, want the 3 progress notes of %s", got, tk2.ID)
	}
}

// tokenExec publishes a progress note under another task's Tollgate token, then one under
// its own.
type tokenExec struct{ release chan struct{} }

func (x *tokenExec) Execute(ctx context.Context, t *Task) (json.RawMessage, *jsonrpc.Error) {
	<-x.release
	pub := NoteFrom(ctx)
	for _, id := range []string{"tg_other", t.ID} {
		pub(Note{Method: MethodProgress, Params: json.RawMessage(`{"progressToken":"` + ProgressToken(id) + `","progress":1}`)})
	}
	return json.RawMessage(okResult), nil
}

// TestNotesOfAnotherCallDropped: progress under another call's Tollgate token (a stream that
// names no call carries every call's) is not this task's.
func TestNotesOfAnotherCallDropped(t *testing.T) {
	x := &tokenExec{release: make(chan struct{})}
	e := noteEnv(t, x, nil)
	tk := approved(t, e, "alice")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = e.m.Follow(ctx, "alice", tk.ID, Relay{Note: func(n Note) bool {
			got = append(got, string(jsonrpc.Member(n.Params, "progressToken")))
			return true
		}})
	}()
	following(t, e.m, tk.ID, 1)
	close(x.release)
	<-done
	if len(got) != 1 || got[0] != `"`+ProgressToken(tk.ID)+`"` {
		t.Errorf("notes %q, want only the task's own", got)
	}
	if id, ok := ProgressTask(json.RawMessage(`"` + ProgressToken(tk.ID) + `"`)); !ok || id != tk.ID {
		t.Errorf("ProgressTask = %q, %v", id, ok)
	}
	if _, ok := ProgressTask(json.RawMessage(`7`)); ok {
		t.Error("a client's integer token read as Tollgate's")
	}
}
