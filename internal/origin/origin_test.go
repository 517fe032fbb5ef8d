package origin

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestGuard(t *testing.T) {
	loop := Options{ListenAddr: "127.0.0.1:7469", AllowedHosts: []string{"gw.internal"}, AllowedOrigins: []string{"https://console.example.com/"}}
	all := Options{ListenAddr: "0.0.0.0:7469"}
	same := Options{ListenAddr: "127.0.0.1:7469", SameOrigin: true, AllowedHosts: []string{"gw.internal"}}
	tests := []struct {
		name         string
		o            Options
		host, origin string
		ok           bool
	}{
		{"loopback host", loop, "127.0.0.1:7469", "", true},
		{"localhost", loop, "localhost:7469", "", true},
		{"ipv6 loopback", loop, "[::1]:7469", "", true},
		{"sub.localhost", loop, "a.localhost", "", true},
		{"allowed host", loop, "gw.internal:7469", "", true},
		{"allowed host, case", loop, "GW.Internal", "", true},
		{"foreign host", loop, "evil.example:7469", "", false},
		{"foreign host posing as localhost", loop, "localhost.evil.example", "", false},
		{"allowed origin, trailing slash", loop, "127.0.0.1:7469", "https://console.example.com", true},
		{"loopback origin", loop, "127.0.0.1:7469", "http://localhost:5173", true},
		{"foreign origin", loop, "127.0.0.1:7469", "https://evil.example", false},
		{"null origin", loop, "127.0.0.1:7469", "null", false},
		{"garbage origin", loop, "127.0.0.1:7469", "http://%zz", false},
		{"any interface: any host", all, "10.1.2.3:7469", "", true},
		{"any interface: loopback origin not exempt", all, "10.1.2.3:7469", "http://localhost", false},
		{"any interface: foreign origin", all, "10.1.2.3:7469", "https://evil.example", false},
		{"same origin accepted", same, "gw.internal:7469", "http://gw.internal:7469", true},
		{"same origin, other port", same, "gw.internal:7469", "http://gw.internal:8080", false},
		{"same origin, odd scheme", same, "gw.internal:7469", "ftp://gw.internal:7469", false},
		{"same origin does not lift the host check", same, "evil.example:7469", "http://evil.example:7469", false},
		{"same origin off", loop, "gw.internal:7469", "http://gw.internal:7469", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Host = tt.host
			if tt.origin != "" {
				r.Header.Set("Origin", tt.origin)
			}
			if _, ok := New(tt.o).Check(r); ok != tt.ok {
				t.Errorf("Check = %v, want %v", ok, tt.ok)
			}
		})
	}
}

func TestWrap(t *testing.T) {
	h := New(Options{ListenAddr: "127.0.0.1:1"}).Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	}))
	for host, want := range map[string]int{"127.0.0.1:1": http.StatusTeapot, "evil.example": http.StatusForbidden} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Host = host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("Host %s: %d, want %d", host, w.Code, want)
		}
	}
}
