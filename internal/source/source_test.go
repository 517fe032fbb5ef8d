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
