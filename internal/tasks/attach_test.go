package tasks

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"
)

// TestCreateOrAttach: a plain call sent again by the same owner attaches to the task it already
// created — while pending, and after it finished until its TTL ends — and executes once.
func TestCreateOrAttach(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	req := CreateRequest{Owner: "alice", SessionID: "s1", Tool: "delete_file", Arguments: json.RawMessage(`{"path":"/tmp/x","force":true}`), Workflow: "default"}
	first, attached, err := e.m.CreateOrAttach(ctx, req)
	if err != nil || attached {
		t.Fatalf("first: %v %v", attached, err)
	}
	// Same call, keys in another order and other whitespace: same canonical hash → attached.
	again := req
	again.Arguments = json.RawMessage(`{ "force": true, "path": "/tmp/x" }`)
	again.SessionID = "s2"
	if tk, attached, err := e.m.CreateOrAttach(ctx, again); err != nil || !attached || tk.ID != first.ID {
		t.Fatalf("retry: %v %v %v; want attached to %s", tk, attached, err, first.ID)
	}
	// Another owner, other arguments, or a plain Create: new tasks.
	other := req
	other.Owner = "bob"
	if tk, attached, _ := e.m.CreateOrAttach(ctx, other); attached || tk.ID == first.ID {
		t.Errorf("another owner attached to alice's task")
	}
	diff := req
	diff.Arguments = json.RawMessage(`{"path":"/tmp/y","force":true}`)
	if tk, attached, _ := e.m.CreateOrAttach(ctx, diff); attached || tk.ID == first.ID {
		t.Errorf("other arguments attached")
	}
	if tk := e.create(t, "alice", func(r *CreateRequest) { *r = req }); tk.ID == first.ID {
		t.Errorf("Create attached")
	}

	if _, err := e.m.Approve(ctx, first.ID, "carol", "ok"); err != nil {
		t.Fatal(err)
	}
	if res, rpcErr := e.result(t, "alice", first.ID); rpcErr != nil || string(res) != okResult {
		t.Fatalf("result: %s %v", res, rpcErr)
	}
	tk, attached, err := e.m.CreateOrAttach(ctx, req)
	if err != nil || !attached || tk.ID != first.ID || tk.State != Completed {
		t.Fatalf("retry after completion: %+v %v %v", tk, attached, err)
	}
	if n := e.exec.callsFor(first.ID); n != 1 {
		t.Errorf("executions = %d, want 1", n)
	}
	// Past the TTL the call is new again.
	e.clock.Advance(11 * time.Minute)
	if tk, attached, _ := e.m.CreateOrAttach(ctx, req); attached || tk.ID == first.ID {
		t.Errorf("attached after the TTL ended")
	}
}

// TestCreateOrAttachParallel: parallel retries of one call make one task and one approval.
func TestCreateOrAttachParallel(t *testing.T) {
	e := newEnv(t, nil)
	req := CreateRequest{Owner: "alice", SessionID: "s1", Tool: "delete_file", Arguments: json.RawMessage(`{"path":"/tmp/x"}`), Workflow: "default"}
	var wg sync.WaitGroup
	ids := make(chan string, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk, _, err := e.m.CreateOrAttach(context.Background(), req)
			if err != nil {
				t.Error(err)
				return
			}
			ids <- tk.ID
		}()
	}
	wg.Wait()
	close(ids)
	seen := map[string]bool{}
	for id := range ids {
		seen[id] = true
	}
	all, _ := e.m.ListAll(context.Background(), Filter{IncludeFinished: true})
	if len(seen) != 1 || len(all) != 1 {
		t.Errorf("distinct tasks returned %d, stored %d; want 1", len(seen), len(all))
	}
}
