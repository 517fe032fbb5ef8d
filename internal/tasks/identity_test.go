package tasks

import (
	"errors"
	"testing"
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
