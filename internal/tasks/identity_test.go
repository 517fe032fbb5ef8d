package tasks

import (
	"errors"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/identity"
)

// TestSelfApprovalLookalikes: a requester cannot decide their own call under an invisible or
// confusable variant of their name, in either direction (the identity header may carry the
// variant as well as an approver name). Names with invisible code points are refused outright.
func TestSelfApprovalLookalikes(t *testing.T) {
	tests := []struct {
		name, requester, approver string
		want                      error
	}{
		{"zero width space", "alice", "alice\u200b", ErrInvalidApprover},
		{"soft hyphen", "alice", "ali\u00adce", ErrInvalidApprover},
		{"word joiner", "alice", "al\u2060ice", ErrInvalidApprover},
		{"byte order mark", "alice", "\ufeffalice", ErrInvalidApprover},
		{"variation selector", "alice", "alice\ufe0f", ErrInvalidApprover},
		{"dotless i", "alice", "alıce", ErrSelfApproval},
		{"Cyrillic ie", "alice", "alic\u0435", ErrSelfApproval},
		{"requested as dotless i", "alıce", "alice", ErrSelfApproval},
		{"requested as Cyrillic ie", "alic\u0435", "alice", ErrSelfApproval},
		{"requested with zero width space", "alice\u200b", "alice", ErrSelfApproval},
		{"requested with soft hyphen", "ali\u00adce", "Alice", ErrSelfApproval},
	}
	for _, tc := range tests {
		for _, approve := range []bool{true, false} {
			t.Run(tc.name, func(t *testing.T) {
				e := newEnv(t, nil)
				tk := e.create(t, "owner", func(r *CreateRequest) { r.RequestedBy = tc.requester })
				decide := e.m.Reject
				if approve {
					decide = e.m.Approve
				}
				if _, err := decide(bg, tk.ID, tc.approver, "mine"); !errors.Is(err, tc.want) {
					t.Fatalf("decision by %q on a call requested by %q: err = %v, want %v", tc.approver, tc.requester, err, tc.want)
				}
				if s := e.state(t, tk.ID); s != AwaitingApproval {
					t.Errorf("state %s, want %s", s, AwaitingApproval)
				}
				if n := e.exec.calls.Load(); n != 0 {
					t.Errorf("executed %d times", n)
				}
			})
		}
	}
	// Someone else still decides.
	e := newEnv(t, nil)
	tk := e.create(t, "owner", func(r *CreateRequest) { r.RequestedBy = "alice" })
	if _, err := e.m.Reject(bg, tk.ID, "bob", "no"); err != nil {
		t.Fatalf("bob rejects alice's call: %v", err)
	}
}

// TestSelfApprovalEveryName: the requester is compared with every name the approver carries
// (identity.Directory): a call requested as alice's e-mail (server.identity_header carrying
// e-mails, the README's setup), as her token subject, or by a verified caller whose e-mail
// claim is hers, is alice's own call — alone or as one of min_approvals 2.
func TestSelfApprovalEveryName(t *testing.T) {
	dir := identity.NewDirectory([]identity.Person{
		{Name: "alice", Emails: []string{"alice@example.com"}, Subjects: []string{"agents:a-1"}, SlackIDs: []string{"U0ALICE01"}},
		{Name: "bob", Emails: []string{"bob@example.com"}},
	})
	people := func(o *Options, _ *fakeExec) {
		o.People = func() *identity.Directory { return dir }
		o.Workflow = func(string) (config.Workflow, bool) { return config.Workflow{MinApprovals: 2}, true }
	}
	for _, tc := range []struct {
		name string
		req  func(*CreateRequest)
	}{
		{"requested as her e-mail", func(r *CreateRequest) { r.RequestedBy = "alice@example.com" }},
		{"requested as her e-mail in other case", func(r *CreateRequest) { r.RequestedBy = "Alice@Example.com" }},
		{"requested with her token subject", func(r *CreateRequest) {
			r.RequestedBy = "agents:a-1"
			r.Caller = &identity.Caller{Subject: "agents:a-1", Verified: true}
		}},
		{"requested by a verified caller with her e-mail claim", func(r *CreateRequest) {
			r.RequestedBy = "agents:other"
			r.Caller = &identity.Caller{Subject: "agents:other", Email: "alice@example.com", Verified: true}
		}},
		{"requested as her Slack id", func(r *CreateRequest) { r.RequestedBy = "U0ALICE01" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil, people)
			tk := e.create(t, "owner", tc.req)
			if _, err := e.m.Approve(bg, tk.ID, "alice", "mine"); !errors.Is(err, ErrSelfApproval) {
				t.Fatalf("alice approves her own call: err = %v, want %v", err, ErrSelfApproval)
			}
			if _, err := e.m.Approve(bg, tk.ID, "bob", "ok"); err != nil {
				t.Fatalf("bob approves: %v", err)
			}
			if s := e.state(t, tk.ID); s != AwaitingApproval {
				t.Errorf("state %s after bob's vote and alice's refused one, want %s (two people must approve)", s, AwaitingApproval)
			}
			if n := e.exec.calls.Load(); n != 0 {
				t.Errorf("executed %d times", n)
			}
		})
	}
}

// TestVotesOnePersonManyNames: alice voting under her name and then her e-mail is one vote.
func TestVotesOnePersonManyNames(t *testing.T) {
	dir := identity.NewDirectory([]identity.Person{{Name: "alice", Emails: []string{"alice@example.com"}}, {Name: "bob"}})
	e := newEnv(t, nil, func(o *Options, _ *fakeExec) {
		o.People = func() *identity.Directory { return dir }
		o.Workflow = func(string) (config.Workflow, bool) { return config.Workflow{MinApprovals: 2}, true }
	})
	tk := e.create(t, "owner", func(r *CreateRequest) { r.RequestedBy = "carol" })
	if _, err := e.m.Approve(bg, tk.ID, "alice", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Approve(bg, tk.ID, "alice@example.com", ""); !errors.As(err, new(*DuplicateVoteError)) {
		t.Fatalf("second vote under alice's e-mail: %v, want a duplicate vote", err)
	}
}
