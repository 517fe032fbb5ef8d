package intercept

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/session"
)

// TestRequesterWaiting: while a held call waits for its task, RequesterWaiting says so; when
// its client goes away, or its hold settles undecided, StoppedWaiting names the task and
// RequesterWaiting is false; a call answered with its outcome is not reported.
func TestRequesterWaiting(t *testing.T) {
	var mu sync.Mutex
	var stopped []string
	stoppedOf := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), stopped...) }

	h := newHarness(t, holdConfig("30s", ""))
	h.gw.d.StoppedWaiting = func(id string) { mu.Lock(); stopped = append(stopped, id); mu.Unlock() }
	res := h.route(t, &session.Session{ID: "s1"}, callRequest(`{"name":"delete_x","arguments":{"id":1}}`))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan []byte, 1)
	go func() { done <- res.Wait(ctx, func([]byte) bool { return true }) }()
	var id string
	for deadline := time.Now().Add(5 * time.Second); id == "" || !h.gw.RequesterWaiting(id); time.Sleep(5 * time.Millisecond) {
		if ts, _ := h.mgr.ListAll(context.Background(), tasksAll); len(ts) == 1 {
			id = ts[0].ID
		}
		if time.Now().After(deadline) {
			t.Fatalf("the held call of task %q is not reported waiting", id)
		}
	}
	if s := stoppedOf(); len(s) != 0 {
		t.Fatalf("StoppedWaiting %v while the call waits", s)
	}
	cancel() // the client went away
	select {
	case b := <-done:
		if b != nil {
			t.Fatalf("answer after the client went away: %s", b)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the held call did not end with its client")
	}
	if h.gw.RequesterWaiting(id) {
		t.Error("still reported waiting after the client went away")
	}
	if s := stoppedOf(); len(s) != 1 || s[0] != id {
		t.Errorf("StoppedWaiting %v, want [%s]", s, id)
	}

	// Settled undecided at the end of hold_budget: nobody waits any more either.
	h2 := newHarness(t, holdConfig("50ms", ""))
	var got []string
	h2.gw.d.StoppedWaiting = func(id string) { mu.Lock(); got = append(got, id); mu.Unlock() }
	out, _ := waitOut(t, h2.route(t, &session.Session{ID: "s2"}, callRequest(`{"name":"delete_x","arguments":{"id":2}}`)))
	if decodeHeld(t, out).Result == nil {
		t.Fatalf("settled answer: %s", out)
	}
	ts, _ := h2.mgr.ListAll(context.Background(), tasksAll)
	mu.Lock()
	defer mu.Unlock()
	if len(ts) != 1 || len(got) != 1 || got[0] != ts[0].ID || h2.gw.RequesterWaiting(ts[0].ID) {
		t.Errorf("after the hold settled: StoppedWaiting %v, tasks %d", got, len(ts))
	}
}
