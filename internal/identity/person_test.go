package identity

import (
	"errors"
	"testing"
)

// people is a directory as config.Config.Directory builds it.
func people() *Directory {
	return NewDirectory([]Person{
		{Name: "alice", Emails: []string{"alice@example.com"}, Subjects: []string{"agents:7f3a-alice"}, SlackIDs: []string{"U0ALICE01"}},
		{Name: "bob", Emails: []string{"bob@example.com"}, Subjects: []string{"agents:9c1d-bob"}, SlackIDs: []string{"U0BOB0001"}},
		{Name: "admin"},
	})
}

// TestSelfApproval: the requester of a call, under any name it carries, is the approver
// alice for the self-approval check — every name form alice has, and look-alikes of each.
func TestSelfApproval(t *testing.T) {
	d := people()
	for _, tc := range []struct {
		name      string
		requester Person
		same      bool
	}{
		{"approver name", Person{Name: "alice"}, true},
		{"e-mail asserted by a proxy (identity_header)", Person{Name: "alice@example.com"}, true},
		{"e-mail in other case", Person{Name: "Alice@Example.COM"}, true},
		{"e-mail in full width", Person{Name: "ａlice@example.com"}, true},
		{"verified subject", Person{Name: "agents:7f3a-alice", Subjects: []string{"agents:7f3a-alice"}}, true},
		{"unknown subject with alice's e-mail claim", Person{Name: "agents:0000", Emails: []string{"alice@example.com"}}, true},
		{"Slack id", Person{Name: "U0ALICE01"}, true},
		{"other case", Person{Name: "Alice"}, true},
		{"Cyrillic a", Person{Name: "\u0430lice"}, true},
		{"dotless i", Person{Name: "al\u0131ce"}, true},
		{"capital dotted I", Person{Name: "Al\u0130ce"}, true},
		{"full width", Person{Name: "ａｌｉｃｅ"}, true},
		{"zero width space", Person{Name: "alice\u200b"}, true},
		{"bob", Person{Name: "bob"}, false},
		{"bob's e-mail", Person{Name: "bob@example.com"}, false},
		{"bob's subject", Person{Name: "agents:9c1d-bob", Subjects: []string{"agents:9c1d-bob"}}, false},
		{"someone else", Person{Name: "carol@example.com"}, false},
		{"nobody", Person{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := d.Same(tc.requester, Person{Name: "alice"}); got != tc.same {
				t.Errorf("Same(%+v, alice) = %v, want %v", tc.requester, got, tc.same)
			}
			if got := d.Same(Person{Name: "alice"}, tc.requester); got != tc.same {
				t.Errorf("Same(alice, %+v) = %v, want %v (not symmetric)", tc.requester, got, tc.same)
			}
		})
	}
}

// TestVotes: a second vote by one person under another name is the same person.
func TestVotes(t *testing.T) {
	d := people()
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"alice", "alice", true},
		{"alice", "alice@example.com", true},
		{"alice", "U0ALICE01", true},
		{"alice", "agents:7f3a-alice", true},
		{"alice", "ALICE", true},
		{"alice", "bob", false},
		{"alice", "admin", false},
		{"admin", "admin", true},
	} {
		if got := d.SameName(tc.a, tc.b); got != tc.same {
			t.Errorf("SameName(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}

// TestGrant: sign-in and token claims grant an identity only by an exact name of its kind;
// look-alikes are refused as such, never mapped.
func TestGrant(t *testing.T) {
	d := people()
	for _, tc := range []struct {
		name   string
		claims []Claim
		want   string
		err    error
	}{
		{"proxy user", []Claim{{KindName, "alice"}}, "alice", nil},
		{"proxy e-mail", []Claim{{KindEmail, "alice@example.com"}}, "alice", nil},
		{"proxy e-mail, ASCII case", []Claim{{KindEmail, "ALICE@example.com"}}, "alice", nil},
		{"user and e-mail agree", []Claim{{KindName, "bob"}, {KindEmail, "bob@example.com"}}, "bob", nil},
		{"token subject", []Claim{{KindSubject, "agents:7f3a-alice"}}, "alice", nil},
		{"Slack id", []Claim{{KindSlackID, "U0BOB0001"}}, "bob", nil},
		{"user other case", []Claim{{KindName, "Alice"}}, "", ErrLookalike},
		{"user Cyrillic a", []Claim{{KindName, "\u0430lice"}}, "", ErrLookalike},
		{"user dotless i", []Claim{{KindName, "al\u0131ce"}}, "", ErrLookalike},
		{"user full width", []Claim{{KindName, "ａｌｉｃｅ"}}, "", ErrLookalike},
		{"user capital dotted I", []Claim{{KindName, "al\u0130ce"}}, "", ErrLookalike},
		{"e-mail full width", []Claim{{KindEmail, "ａlice@example.com"}}, "", ErrLookalike},
		{"e-mail with a capital dotted I", []Claim{{KindEmail, "AL\u0130CE@example.com"}}, "", ErrLookalike},
		{"subject in other case", []Claim{{KindSubject, "AGENTS:7F3A-ALICE"}}, "", ErrLookalike},
		{"a name of another kind does not grant", []Claim{{KindName, "alice@example.com"}}, "", ErrLookalike},
		{"Slack id as a user", []Claim{{KindName, "U0ALICE01"}}, "", ErrLookalike},
		{"user and e-mail of two people", []Claim{{KindName, "alice"}, {KindEmail, "bob@example.com"}}, "", ErrAmbiguous},
		{"nobody", []Claim{{KindName, "mallory"}}, "", ErrUnknown},
		{"empty", []Claim{{KindName, ""}}, "", ErrUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := d.Grant(tc.claims...)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("Grant = %+v, %v; want %v", p, err, tc.err)
				}
				return
			}
			if err != nil || p.Name != tc.want {
				t.Fatalf("Grant = %+v, %v; want %s", p, err, tc.want)
			}
		})
	}
}

// TestDirectoryRefusesSharedNames: a name two people carry grants neither.
func TestDirectoryRefusesSharedNames(t *testing.T) {
	d := NewDirectory([]Person{{Name: "alice", Emails: []string{"ops@example.com"}}, {Name: "bob", Emails: []string{"ops@example.com"}}})
	if p, err := d.Grant(Claim{KindEmail, "ops@example.com"}); err == nil {
		t.Fatalf("a shared e-mail granted %s", p.Name)
	}
}
