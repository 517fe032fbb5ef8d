package tasks

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
)

// liveWorkflows is a workflow table a test changes as a reload would.
type liveWorkflows struct {
	mu  sync.Mutex
	wfs map[string]config.Workflow
}

func (l *liveWorkflows) get(name string) (config.Workflow, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.wfs[name]
	return w, ok
}

func (l *liveWorkflows) set(name string, w config.Workflow) {
	l.mu.Lock()
	l.wfs[name] = w
	l.mu.Unlock()
}

func twoPersonEnv(t *testing.T, wf config.Workflow) (*env, *liveWorkflows) {
	t.Helper()
	live := &liveWorkflows{wfs: map[string]config.Workflow{"default": wf}}
	e := newEnv(t, nil, func(o *Options, _ *fakeExec) {
		o.Workflow = live.get
		o.ConsoleURL = "http://127.0.0.1:7469/approvals"
	})
	return e, live
}

func requester(name string) func(*CreateRequest) {
	return func(r *CreateRequest) { r.RequestedBy = name }
}

// TestTwoPersonRule: with min_approvals 2 the call runs only after two distinct approvers
// approved; the first vote leaves it awaiting approval with "1 of 2" in its statusMessage.
func TestTwoPersonRule(t *testing.T) {
	e, _ := twoPersonEnv(t, config.Workflow{MinApprovals: 2})
	tk := e.create(t, "o", requester("carol"))
	if tk.RequiredApprovals != 2 || !strings.Contains(tk.StatusMessage, "(workflow default, 0 of 2 approvals)") {
		t.Fatalf("created: required %d, message %q", tk.RequiredApprovals, tk.StatusMessage)
	}

	got, err := e.m.Approve(bg, tk.ID, "alice", "ok by me")
	if err != nil {
		t.Fatal(err)
	}
	want := "Awaiting approval by a human (workflow default, 1 of 2 approvals): approve in the console at http://127.0.0.1:7469/approvals or with `tollgate approvals approve " + tk.ID + "`"
	if got.State != AwaitingApproval || got.StatusMessage != want || got.Decision != nil ||
		len(got.Approvals) != 1 || got.Approvals[0].By != "alice" || got.Approvals[0].Reason != "ok by me" {
		t.Fatalf("after alice: %+v", got)
	}
	if got.WireStatus() != "working" {
		t.Errorf("wire status %s", got.WireStatus())
	}
	if n := e.exec.calls.Load(); n != 0 {
		t.Fatalf("executed after one of two approvals (%d calls)", n)
	}

	// the same approver again, or under a look-alike name, does not count twice
	for _, again := range []string{"alice", "Alice", "alıce"} {
		_, err := e.m.Approve(bg, tk.ID, again, "")
		var dv *DuplicateVoteError
		if !errors.As(err, &dv) || len(dv.Task.Approvals) != 1 || dv.Required != 2 {
			t.Errorf("second approve by %q: err = %v", again, err)
		}
	}
	// the requester never counts
	if _, err := e.m.Approve(bg, tk.ID, "Carol", ""); !errors.Is(err, ErrSelfApproval) {
		t.Errorf("requester's approve: err = %v", err)
	}
	if s := e.state(t, tk.ID); s != AwaitingApproval {
		t.Fatalf("state %s after refused votes", s)
	}

	got, err = e.m.Approve(bg, tk.ID, "bob", "")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != Approved || got.Decision == nil || got.Decision.By != "bob" || len(got.Approvals) != 2 ||
		got.StatusMessage != "Approved by alice, bob (2 of 2 approvals)" {
		t.Errorf("after bob: %+v", got)
	}
	res, rpcErr := e.result(t, "o", tk.ID)
	if rpcErr != nil || string(res) != okResult {
		t.Errorf("Result = %s, %v", res, rpcErr)
	}
	if n := e.exec.calls.Load(); n != 1 {
		t.Errorf("executed %d times, want once", n)
	}
	if _, err := e.m.Approve(bg, tk.ID, "dave", ""); !errors.As(err, new(*ConflictError)) {
		t.Errorf("third approve: err = %v", err)
	}
}

// TestOneRejectRejects: a reject by either approver ends the task at once, before or after
// the other's approval; it never runs.
func TestOneRejectRejects(t *testing.T) {
	for _, approveFirst := range []bool{false, true} {
		t.Run(fmt.Sprint("approved first ", approveFirst), func(t *testing.T) {
			e, _ := twoPersonEnv(t, config.Workflow{MinApprovals: 2})
			tk := e.create(t, "o")
			if approveFirst {
				if _, err := e.m.Approve(bg, tk.ID, "alice", ""); err != nil {
					t.Fatal(err)
				}
			}
			got, err := e.m.Reject(bg, tk.ID, "bob", "no")
			if err != nil {
				t.Fatal(err)
			}
			if got.State != Rejected || got.Decision.By != "bob" || got.Decision.Approved {
				t.Errorf("after reject: %+v", got)
			}
			_, rpcErr := e.result(t, "o", tk.ID)
			if rpcErr == nil || rpcErr.Code != jsonrpc.CodeApprovalRejected {
				t.Errorf("Result error %v", rpcErr)
			}
			if _, err := e.m.Approve(bg, tk.ID, "carol", ""); !errors.As(err, new(*ConflictError)) {
				t.Errorf("approve after reject: err = %v", err)
			}
			if n := e.exec.calls.Load(); n != 0 {
				t.Errorf("rejected task executed %d times", n)
			}
		})
	}
}

// TestVotesConcurrent: many approvers vote at once on a task needing three approvals; exactly
// the third counted vote approves it, every counted vote is distinct, and it runs once.
func TestVotesConcurrent(t *testing.T) {
	e, _ := twoPersonEnv(t, config.Workflow{MinApprovals: 3})
	tk := e.create(t, "o", requester("req"))
	var (
		wg                     sync.WaitGroup
		votes, approved, other atomic.Int32
	)
	start := make(chan struct{})
	for g := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			name := fmt.Sprint("approver", g%20) // each approver three times
			if g%15 == 0 {
				name = "req" // the requester tries too
			}
			got, err := e.m.Approve(bg, tk.ID, name, "")
			switch {
			case err == nil && got.State == Approved:
				approved.Add(1)
			case err == nil && got.State == AwaitingApproval:
				votes.Add(1)
			case errors.As(err, new(*ConflictError)), errors.As(err, new(*DuplicateVoteError)), errors.Is(err, ErrSelfApproval):
				other.Add(1)
			default:
				t.Errorf("Approve(%s): %v, %v", name, got, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	e.result(t, "o", tk.ID)
	final, _ := e.m.Lookup(bg, tk.ID)
	if approved.Load() != 1 || votes.Load() != 2 || other.Load() != 57 {
		t.Errorf("approved %d, votes %d, refused %d; want 1, 2, 57", approved.Load(), votes.Load(), other.Load())
	}
	seen := map[string]bool{}
	for _, v := range final.Approvals {
		if seen[v.By] || v.By == "req" {
			t.Errorf("vote by %s counted: %+v", v.By, final.Approvals)
		}
		seen[v.By] = true
	}
	if len(final.Approvals) != 3 || final.State != Completed || final.Decision.By != final.Approvals[2].By {
		t.Errorf("final task %+v", final)
	}
	if n := e.exec.calls.Load(); n != 1 {
		t.Errorf("executed %d times, want once", n)
	}
}

// TestMinApprovalsReload: a reload that raises min_approvals applies to pending tasks; one
// that lowers it does not (the number stored at creation still holds).
func TestMinApprovalsReload(t *testing.T) {
	t.Run("up", func(t *testing.T) {
		e, live := twoPersonEnv(t, config.Workflow{MinApprovals: 2})
		tk := e.create(t, "o")
		if _, err := e.m.Approve(bg, tk.ID, "alice", ""); err != nil {
			t.Fatal(err)
		}
		live.set("default", config.Workflow{MinApprovals: 3})
		got, err := e.m.Approve(bg, tk.ID, "bob", "")
		if err != nil || got.State != AwaitingApproval || !strings.Contains(got.StatusMessage, "2 of 3 approvals") {
			t.Fatalf("bob after raise: %+v, %v", got, err)
		}
		if got, err = e.m.Approve(bg, tk.ID, "carol", ""); err != nil || got.State != Approved {
			t.Fatalf("carol: %+v, %v", got, err)
		}
		e.result(t, "o", tk.ID)
		if n := e.exec.calls.Load(); n != 1 {
			t.Errorf("executed %d times", n)
		}
	})
	t.Run("down", func(t *testing.T) {
		e, live := twoPersonEnv(t, config.Workflow{MinApprovals: 3})
		tk := e.create(t, "o")
		live.set("default", config.Workflow{MinApprovals: 1})
		got, err := e.m.Approve(bg, tk.ID, "alice", "")
		if err != nil || got.State != AwaitingApproval || !strings.Contains(got.StatusMessage, "1 of 3 approvals") {
			t.Fatalf("alice after lowering: %+v, %v", got, err)
		}
		if n := RequiredApprovals(got, live.get); n != 3 {
			t.Errorf("RequiredApprovals = %d, want 3", n)
		}
		// a task created after the reload needs one
		tk2 := e.create(t, "o")
		if got, err := e.m.Approve(bg, tk2.ID, "alice", ""); err != nil || got.State != Approved {
			t.Errorf("new task: %+v, %v", got, err)
		}
	})
	t.Run("workflow removed", func(t *testing.T) {
		e, live := twoPersonEnv(t, config.Workflow{MinApprovals: 2})
		tk := e.create(t, "o")
		live.mu.Lock()
		delete(live.wfs, "default")
		live.mu.Unlock()
		if got, err := e.m.Approve(bg, tk.ID, "alice", ""); err != nil || got.State != AwaitingApproval {
			t.Errorf("alice after removal: %+v, %v", got, err)
		}
	})
}

// TestTimeoutWithPartialApprovals: the approval timeout decides as on_timeout says and is
// recorded as system:on_timeout with the approvals given — never as the missing approver.
func TestTimeoutWithPartialApprovals(t *testing.T) {
	for _, tc := range []struct {
		onTimeout string
		state     State
		calls     int32
	}{{"approve", Completed, 1}, {"deny", TimedOut, 0}} {
		t.Run(tc.onTimeout, func(t *testing.T) {
			e, _ := twoPersonEnv(t, config.Workflow{MinApprovals: 2, Timeout: config.Duration(time.Minute), OnTimeout: tc.onTimeout})
			tk := e.create(t, "o")
			if _, err := e.m.Approve(bg, tk.ID, "alice", ""); err != nil {
				t.Fatal(err)
			}
			e.clock.Advance(time.Minute)
			e.m.Sweep(bg)
			e.result(t, "o", tk.ID)
			got, _ := e.m.Lookup(bg, tk.ID)
			wantReason := "approval timed out (on_timeout: " + tc.onTimeout + ") with 1 of 2 approvals given"
			if got.State != tc.state || got.Decision == nil || got.Decision.By != ByTimeout || got.Decision.Reason != wantReason ||
				len(got.Approvals) != 1 || got.Approvals[0].By != "alice" {
				t.Errorf("task %+v decision %+v", got, got.Decision)
			}
			if n := e.exec.calls.Load(); n != tc.calls {
				t.Errorf("executed %d times, want %d", n, tc.calls)
			}
		})
	}
}

// TestVotesPersisted: votes live in the stored task, so another manager on the same store
// (a restart, a replica) sees them and counts the next approval as the second.
func TestVotesPersisted(t *testing.T) {
	e, live := twoPersonEnv(t, config.Workflow{MinApprovals: 2})
	tk := e.create(t, "o")
	if _, err := e.m.Approve(bg, tk.ID, "alice", "first"); err != nil {
		t.Fatal(err)
	}
	rec, err := e.st.Get(bg, tk.ID)
	if err != nil || !strings.Contains(string(rec.Data), `"approvals":[{"by":"alice","reason":"first"`) ||
		!strings.Contains(string(rec.Data), `"required_approvals":2`) {
		t.Fatalf("stored task %s, %v", rec.Data, err)
	}
	m2 := NewManager(e.st, e.exec, nil, Options{Now: e.clock.Now, Workflow: live.get})
	t.Cleanup(func() { _ = m2.Close() })
	if _, err := m2.Approve(bg, tk.ID, "alice", ""); !errors.As(err, new(*DuplicateVoteError)) {
		t.Errorf("alice again on the second manager: %v", err)
	}
	got, err := m2.Approve(bg, tk.ID, "bob", "")
	if err != nil || got.State != Approved || len(got.Approvals) != 2 {
		t.Errorf("bob on the second manager: %+v, %v", got, err)
	}
}

// TestSingleApprovalUnchanged: without min_approvals (and for tasks stored before it) one
// approval decides, with the message it always had.
func TestSingleApprovalUnchanged(t *testing.T) {
	e := newEnv(t, nil) // no workflows at all
	tk := e.create(t, "o")
	if strings.Contains(tk.StatusMessage, "approvals)") || tk.RequiredApprovals != 1 {
		t.Errorf("created: %+v", tk)
	}
	got, err := e.m.Approve(bg, tk.ID, "bob", "")
	if err != nil || got.State != Approved || got.StatusMessage != "Approved by bob" {
		t.Errorf("approve: %+v, %v", got, err)
	}
	if RequiredApprovals(&Task{}, nil) != 1 {
		t.Error("a stored task without required_approvals needs one")
	}
}
