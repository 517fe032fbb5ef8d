package source

import (
	"net/http"
	"testing"
)

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		remote, identity, want string
	}{
		{"192.0.2.7:4100", "", "ip:192.0.2.7"},
		{"192.0.2.7:4100", "  alice ", "id:alice"},
		{"[2001:db8:1:2:aaaa::1]:80", "", "ip:2001:db8:1:2::/64"},
		{"[2001:db8:1:2:bbbb::9]:81", "", "ip:2001:db8:1:2::/64"},
		{"[2001:db8:1:3::1]:80", "", "ip:2001:db8:1:3::/64"},
		{"[::ffff:192.0.2.7]:80", "", "ip:192.0.2.7"},
		{"pipe", "", "ip:pipe"},
		{"192.0.2.7:1", string(make([]byte, MaxIdentity+1)), "ip:192.0.2.7"},
	} {
		r := &http.Request{RemoteAddr: tc.remote}
		if got := Of(r, tc.identity); got != tc.want {
			t.Errorf("Of(%q, %q) = %q, want %q", tc.remote, tc.identity, got, tc.want)
		}
	}
}

func TestVictim(t *testing.T) {
	held := map[string]int{"ip:A": 3, "ip:B": 1, "ip:C": 2}
	for _, tc := range []struct {
		req     string
		sources []string // idle candidates, least recently used first
		want    int
	}{
		{"ip:A", []string{"ip:B", "ip:C", "ip:A", "ip:A"}, 2}, // the heaviest takes only its own
		{"ip:B", []string{"ip:B", "ip:C", "ip:A", "ip:A"}, 2}, // a light one takes from the heaviest
		{"ip:C", []string{"ip:B", "ip:C"}, 1},                 // nobody heavier idle: its own
		{"ip:A", []string{"ip:B", "ip:C"}, -1},                // nothing it may take
		{"ip:D", []string{"ip:B"}, 0},                         // a new source takes from any holder
		{"ip:A", nil, -1},
	} {
		if got := Victim(tc.req, tc.sources, held); got != tc.want {
			t.Errorf("Victim(%s, %v) = %d, want %d", tc.req, tc.sources, got, tc.want)
		}
	}
}

// TestRequest: the source the door put in the request's context wins; without one, Of.
func TestRequest(t *testing.T) {
	r := &http.Request{RemoteAddr: "192.0.2.7:4100"}
	if got := Request(r, "alice"); got != "id:alice" {
		t.Errorf("without a context source: %q, want id:alice", got)
	}
	r = r.WithContext(NewContext(r.Context(), "id:bob"))
	if got := Request(r, "alice"); got != "id:bob" {
		t.Errorf("with the door's source: %q, want id:bob", got)
	}
	if got := Request(nil, "alice"); got != "" {
		t.Errorf("nil request: %q", got)
	}
}
