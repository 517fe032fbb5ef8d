package notify

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// TestVoteNotified: with min_approvals 2 the first approval is an approval.voted event with
// its own delivery id and "approvals"/"required_approvals"; the final decision carries both
// votes; Slack says "1 of 2 approvals".
func TestVoteNotified(t *testing.T) {
	r := newReceiver(t, nil)
	wf := hook(r.srv.URL + "/hook")
	wf.MinApprovals = 2
	f := newFixture(t, map[string]config.Workflow{"ops": wf}, true)

	tk := task("ops", tasks.AwaitingApproval)
	tk.RequiredApprovals = 2
	tk.Approvals = []tasks.Vote{{By: "alice", Reason: "fine", At: created.Add(30e9)}}
	if ev := eventFor(tasks.Transition{From: tasks.AwaitingApproval, To: tasks.AwaitingApproval, Task: tk}); ev != EventVoted {
		t.Fatalf("eventFor(vote) = %q", ev)
	}
	f.n.OnTaskChange(tasks.Transition{From: tasks.AwaitingApproval, To: tasks.AwaitingApproval, Task: tk})
	var got Webhook
	if d := r.next(t); json.Unmarshal(d.body, &got) != nil || d.header.Get("X-Tollgate-Event") != EventVoted {
		t.Fatalf("vote delivery %s %v", d.body, d.header)
	}
	if got.Event != EventVoted || got.DeliveryID != tk.ID+"/vote-1" || got.RequiredApprovals != 2 || got.Decision != nil ||
		len(got.Approvals) != 1 || got.Approvals[0] != (WebhookVote{By: "alice", Reason: "fine", At: "2025-11-25T10:00:30.000Z"}) {
		t.Errorf("vote body %+v", got)
	}

	done := task("ops", tasks.Approved)
	done.RequiredApprovals = 2
	done.Approvals = []tasks.Vote{tk.Approvals[0], {By: "bob", At: created.Add(60e9)}}
	f.n.OnTaskChange(moved(done))
	got = Webhook{}
	if d := r.next(t); json.Unmarshal(d.body, &got) != nil {
		t.Fatalf("decision delivery %s", d.body)
	}
	if got.Event != EventDecided || got.DeliveryID != done.ID+"/approved" || len(got.Approvals) != 2 || got.RequiredApprovals != 2 {
		t.Errorf("decision body %+v", got)
	}

	sw := slack("http://x")
	sw.MinApprovals = 2
	b, err := slackBody(item{event: EventVoted, task: tk, wf: sw}, "")
	if err != nil || !strings.Contains(string(b), "Approved by alice (1 of 2 approvals: alice): waiting for another approver") ||
		!strings.Contains(string(b), `*Approvals*\n1 of 2 approvals: alice`) {
		t.Errorf("slack vote %s, %v", b, err)
	}
}

// TestSingleApprovalPayload: a one-approval workflow's bodies say 0 or 1 of 1, as before
// plus the two fields.
func TestSingleApprovalPayload(t *testing.T) {
	b, err := webhookBody(item{event: EventRequested, task: task("w", tasks.AwaitingApproval), wf: hook("http://x")}, "")
	if err != nil || !strings.Contains(string(b), `"approvals":[],"required_approvals":1`) {
		t.Errorf("body %s, %v", b, err)
	}
	s, _ := slackBody(item{event: EventRequested, task: task("w", tasks.AwaitingApproval), wf: slack("http://x")}, "")
	if strings.Contains(string(s), "*Approvals*") {
		t.Errorf("one-approval Slack message shows approvals: %s", s)
	}
}
