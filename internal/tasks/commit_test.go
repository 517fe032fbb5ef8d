package tasks

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store/storetest"
)

// TestResultSurvivesStoreOutage (issue 30): the store goes away just as an approved call
// returns; the commit of its result fails, is retried while the result is in memory, and
// lands once the store is back: the owner gets the tool's result, not ExecutionInterrupted.
// Old code: one commit attempt, the result dropped, the task left executing.
func TestResultSurvivesStoreOutage(t *testing.T) {
	st := storetest.NewFailing(store.NewMemory())
	e := newEnvOn(t, st, nil)
	e.exec.block = make(chan struct{})
	e.exec.started = make(chan string, 1)
	tk := e.create(t, "alice")
	if _, err := e.m.Approve(context.Background(), tk.ID, "bob", ""); err != nil {
		t.Fatal(err)
	}
	<-e.exec.started
	st.SetDown(true)
	close(e.exec.block) // the call returns while the store is away
	// The outage lasts 2 s, as a Redis restart does, and until the commit has failed three
	// times (bounded: the old code tries once).
	for start := time.Now(); time.Since(start) < 2*time.Second || st.Failures() < 3 && time.Since(start) < 5*time.Second; {
		time.Sleep(10 * time.Millisecond)
	}
	st.SetDown(false)
	res, rpcErr := e.result(t, "alice", tk.ID)
	if rpcErr != nil || string(res) != okResult {
		t.Fatalf("result after the outage: %s %v, want the tool's result", res, rpcErr)
	}
	if n := e.exec.calls.Load(); n != 1 {
		t.Errorf("executed %d times, want once", n)
	}
}
