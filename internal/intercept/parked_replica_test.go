package intercept

import (
	"strings"
	"testing"
)

// TestRequestStateNamesItsReplica: a requestState names the process that parked the call, so
// another replica tells a misrouted retry (RequestStateOnOtherReplica) from a made-up or
// expired one (InvalidRequestState).
func TestRequestStateNamesItsReplica(t *testing.T) {
	var a, b parking
	a.table()
	b.table()
	if a.replica == b.replica || len(a.replica) != 12 {
		t.Fatalf("replica ids %q and %q: want two different 12-digit ids", a.replica, b.replica)
	}
	tok, ok := a.put(&parkedCall{owner: "o", cancel: func() {}}, "src")
	if !ok || !strings.HasPrefix(tok, requestStatePrefix+a.replica+"_") {
		t.Fatalf("token %q", tok)
	}
	defer a.closeAll()
	for _, c := range []struct {
		tok  string
		want bool
	}{
		{tok, true}, // at b: issued by a
		{requestStatePrefix + b.replica + "_" + strings.Repeat("0", 32), false}, // b's own (expired)
		{"tgrs_nonsense", false},
		{requestStatePrefix + strings.Repeat("a", 32), false},                   // no replica
		{requestStatePrefix + "zzzzzzzzzzzz_" + strings.Repeat("0", 32), false}, // not hex
		{requestStatePrefix + a.replica + "_" + strings.Repeat("0", 31), false},
		{"x" + tok, false},
	} {
		if got := b.elsewhere(c.tok); got != c.want {
			t.Errorf("elsewhere(%q) = %v, want %v", c.tok, got, c.want)
		}
	}
	if a.elsewhere(tok) {
		t.Error("a replica's own token is elsewhere")
	}
}
