package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

func heldReq(owner string) CreateRequest {
	return CreateRequest{Owner: owner, SessionID: "s1", Tool: "write_file", Arguments: json.RawMessage(`{"path":"/tmp/x","content":"a"}`), Workflow: "default"}
}

// TestDeliveredEndsReplay: retries before delivery attach to the one task (one execution); once
// the outcome has been delivered to the owner, the same call is a new call with its own
// approval and its own execution (issue 29). Run on every backend.
func TestDeliveredEndsReplay(t *testing.T) {
	for name, st := range map[string]func(t *testing.T) store.Store{
		"memory": func(*testing.T) store.Store { return store.NewMemory() },
		"file": func(t *testing.T) store.Store {
			f, err := store.OpenFile(t.TempDir() + "/tasks.db")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = f.Close() })
			return f
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnvOn(t, st(t), nil)
			ctx := context.Background()
			first, _, err := e.m.CreateOrAttach(ctx, heldReq("alice"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.m.Approve(ctx, first.ID, "carol", "ok"); err != nil {
				t.Fatal(err)
			}
			if res, rpcErr := e.result(t, "alice", first.ID); rpcErr != nil || string(res) != okResult {
				t.Fatalf("result: %s %v", res, rpcErr)
			}
			// Finished, not delivered (the held call had settled "awaiting approval"): the
			// retry attaches and collects the one result.
			retry, attached, err := e.m.CreateOrAttach(ctx, heldReq("alice"))
			if err != nil || !attached || retry.ID != first.ID {
				t.Fatalf("retry before delivery: %v %v %v; want attached to %s", retry, attached, err, first.ID)
			}
			// Another owner cannot mark alice's task delivered.
			if err := e.m.Delivered(ctx, "bob", first.ID); !errors.Is(err, ErrNotFound) {
				t.Errorf("Delivered by another owner: err = %v, want ErrNotFound", err)
			}
			if err := e.m.Delivered(ctx, "alice", first.ID); err != nil {
				t.Fatalf("Delivered: %v", err)
			}
			got, _ := e.m.Lookup(ctx, first.ID)
			if got.DeliveredAt.IsZero() || got.State != Completed {
				t.Errorf("after Delivered: state %s, delivered at %v", got.State, got.DeliveredAt)
			}
			again := got.DeliveredAt
			if err := e.m.Delivered(ctx, "alice", first.ID); err != nil {
				t.Fatalf("second Delivered: %v", err)
			}
			if got, _ := e.m.Lookup(ctx, first.ID); !got.DeliveredAt.Equal(again) {
				t.Errorf("a second delivery moved DeliveredAt")
			}
			// Delivered: the same call is new, awaits its own approval, and runs again.
			third, attached, err := e.m.CreateOrAttach(ctx, heldReq("alice"))
			if err != nil || attached || third.ID == first.ID || third.State != AwaitingApproval {
				t.Fatalf("call after delivery: %+v %v %v; want a new pending task", third, attached, err)
			}
			if third.PreviousRejection != nil {
				t.Errorf("a completed call is no rejection: %+v", third.PreviousRejection)
			}
			if _, err := e.m.Approve(ctx, third.ID, "carol", "ok"); err != nil {
				t.Fatal(err)
			}
			e.result(t, "alice", third.ID)
			if n := e.exec.calls.Load(); n != 2 {
				t.Errorf("executions = %d, want 2 (one per delivered call)", n)
			}
			// The new task's retries attach to it, not to the old one.
			if tk, attached, _ := e.m.CreateOrAttach(ctx, heldReq("alice")); !attached || tk.ID != third.ID {
				t.Errorf("retry of the new call: %v %v; want attached to %s", tk.ID, attached, third.ID)
			}
		})
	}
}

// TestDeliveredOnlyTerminalKeyed: a task still pending, or one no call can attach to (created
// without a key), is not marked; delivery of a task-augmented call writes nothing.
func TestDeliveredOnlyTerminalKeyed(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	pending, _, err := e.m.CreateOrAttach(ctx, heldReq("alice"))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.m.Delivered(ctx, "alice", pending.ID); err != nil {
		t.Fatal(err)
	}
	if tk, attached, _ := e.m.CreateOrAttach(ctx, heldReq("alice")); !attached || tk.ID != pending.ID {
		t.Errorf("a pending task counted as delivered: retry got %s attached=%v", tk.ID, attached)
	}
	plain := e.create(t, "alice")
	if _, err := e.m.Reject(ctx, plain.ID, "carol", "no"); err != nil {
		t.Fatal(err)
	}
	v := plain.Version
	if err := e.m.Delivered(ctx, "alice", plain.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.m.Lookup(ctx, plain.ID); !got.DeliveredAt.IsZero() || got.Version != v+1 {
		t.Errorf("unkeyed task written on delivery: delivered %v, version %d (want %d)", got.DeliveredAt, got.Version, v+1)
	}
}

// TestReRequestAfterRejection: a rejected call whose rejection reached the requester can be
// asked again; the new task names the rejection (who, why, when, which task) for its
// approvers. Before delivery the retry still gets the rejection (no second approval).
func TestReRequestAfterRejection(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	first, _, err := e.m.CreateOrAttach(ctx, heldReq("alice"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Reject(ctx, first.ID, "carol", "wrong file"); err != nil {
		t.Fatal(err)
	}
	retry, attached, err := e.m.CreateOrAttach(ctx, heldReq("alice"))
	if err != nil || !attached || retry.ID != first.ID || retry.State != Rejected {
		t.Fatalf("retry before delivery: %+v %v %v; want the rejected task", retry, attached, err)
	}
	if err := e.m.Delivered(ctx, "alice", first.ID); err != nil {
		t.Fatal(err)
	}
	again, attached, err := e.m.CreateOrAttach(ctx, heldReq("alice"))
	if err != nil || attached || again.ID == first.ID || again.State != AwaitingApproval {
		t.Fatalf("re-request after the rejection was delivered: %+v %v %v; want a new pending task", again, attached, err)
	}
	pr := again.PreviousRejection
	if pr == nil || pr.TaskID != first.ID || pr.By != "carol" || pr.Reason != "wrong file" || pr.At.IsZero() {
		t.Fatalf("PreviousRejection = %+v; want task %s rejected by carol: wrong file", pr, first.ID)
	}
	// Stored with the task: the approvers' view (Lookup) shows it.
	if got, _ := e.m.Lookup(ctx, again.ID); got.PreviousRejection == nil || got.PreviousRejection.TaskID != first.ID {
		t.Errorf("stored task lost PreviousRejection: %+v", got.PreviousRejection)
	}
	// Another owner's identical call is not a re-request of alice's.
	if bob, _, _ := e.m.CreateOrAttach(ctx, heldReq("bob")); bob.PreviousRejection != nil {
		t.Errorf("bob's call names alice's rejection: %+v", bob.PreviousRejection)
	}
	if n := e.exec.calls.Load(); n != 0 {
		t.Errorf("executions = %d, want 0", n)
	}
}

// TestDeliveredParallelRetries: after delivery, parallel retries of the same call make one new
// task (and one approval) between them, not one each; the first task ran once.
func TestDeliveredParallelRetries(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	first, _, err := e.m.CreateOrAttach(ctx, heldReq("alice"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Approve(ctx, first.ID, "carol", "ok"); err != nil {
		t.Fatal(err)
	}
	e.result(t, "alice", first.ID)
	if err := e.m.Delivered(ctx, "alice", first.ID); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	ids := make(chan string, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk, _, err := e.m.CreateOrAttach(ctx, heldReq("alice"))
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
	all, _ := e.m.ListAll(ctx, Filter{IncludeFinished: true})
	if len(seen) != 1 || seen[first.ID] || len(all) != 2 {
		t.Errorf("parallel calls after delivery got %v, stored %d tasks; want one new task shared by all", seen, len(all))
	}
	if n := e.exec.callsFor(first.ID); n != 1 {
		t.Errorf("executions of the first task = %d, want 1", n)
	}
}
