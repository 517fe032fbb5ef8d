package audit

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

type okExec struct{}

func (okExec) Execute(context.Context, *tasks.Task) (json.RawMessage, *jsonrpc.Error) {
	return json.RawMessage(`{"content":[]}`), nil
}

// TestVotesAudited: with min_approvals 2 each approval is its own line ("vote", then
// "approved" by the last approver), each saying k of N; a repeated vote writes nothing; a
// timeout after one vote is recorded as system:on_timeout with the approvals given.
func TestVotesAudited(t *testing.T) {
	ctx := context.Background()
	now := t0
	wf := config.Workflow{MinApprovals: 2, Timeout: config.Duration(time.Minute), OnTimeout: config.OnTimeoutApprove}
	m := tasks.NewManager(store.NewMemory(), okExec{}, nil, tasks.Options{
		Now:      func() time.Time { return now },
		Workflow: func(string) (config.Workflow, bool) { return wf, true },
	})
	defer m.Close()
	var buf syncBuffer // written by the manager's goroutines
	l := New(&buf)
	defer m.Subscribe(l.OnTaskChange)()
	create := func() *tasks.Task {
		tk, err := m.Create(ctx, tasks.CreateRequest{Owner: "o", RequestedBy: "carol", Tool: "delete_user",
			Arguments: json.RawMessage(`{"password":"` + secretArg + `"}`), Workflow: "default"})
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	// wait returns the audit events once id's execution is logged: its outcome can be read
	// (Result) a moment before the transition's subscribers have run.
	wait := func(id string) []Event {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, _, err := m.Result(c, "o", id); err != nil {
			t.Fatal(err)
		}
		for {
			got := decode(t, buf.Bytes())
			if len(got) > 0 && got[len(got)-1].Kind == "executed" {
				return got
			}
			select {
			case <-c.Done():
				t.Fatalf("no executed event for %s: %s", id, buf.String())
			case <-time.After(5 * time.Millisecond):
			}
		}
	}

	a := create()
	if _, err := m.Approve(ctx, a.ID, "alice", "looks right"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Approve(ctx, a.ID, "alice", "again"); err == nil {
		t.Fatal("a second vote by alice was accepted")
	}
	if _, err := m.Approve(ctx, a.ID, "bob", ""); err != nil {
		t.Fatal(err)
	}
	got := wait(a.ID)
	if k := kinds(got); k != "created:carol,vote:alice,approved:bob,executed:" {
		t.Fatalf("events %s", k)
	}
	for i, want := range [][2]int{{0, 2}, {1, 2}, {2, 2}, {2, 2}} {
		if got[i].Approvals != want[0] || got[i].RequiredApprovals != want[1] {
			t.Errorf("event %d (%s): %d of %d, want %d of %d", i, got[i].Kind, got[i].Approvals, got[i].RequiredApprovals, want[0], want[1])
		}
	}
	if got[1].Reason != "looks right" {
		t.Errorf("vote reason %q", got[1].Reason)
	}

	buf.Reset()
	b := create()
	if _, err := m.Approve(ctx, b.ID, "alice", ""); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	m.Sweep(ctx)
	got = wait(b.ID)
	if k := kinds(got); k != "created:carol,vote:alice,approved:system:on_timeout,executed:" {
		t.Fatalf("events %s", k)
	}
	if e := got[2]; e.Approvals != 1 || e.RequiredApprovals != 2 ||
		e.Reason != "approval timed out (on_timeout: approve) with 1 of 2 approvals given" {
		t.Errorf("timeout event %+v", e)
	}
	if strings.Contains(buf.String(), secretArg) {
		t.Error("audit log leaks an argument")
	}
}
