package notify

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestProbe(t *testing.T) {
	var method string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method = r.Method
		w.WriteHeader(http.StatusMethodNotAllowed)
	}))
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/hook/secret-token?sig=abc"
	_ = ln.Close()

	n := New(Options{})
	for _, tt := range []struct {
		dest   string
		ok     bool
		detail string
	}{
		{srv.URL + "/hook/secret-token", true, ""},
		{closed, false, "unreachable"},
		{"ftp://example.com/x", false, "not an absolute http(s) URL"},
	} {
		h := n.Probe(context.Background(), tt.dest)
		if h.OK != tt.ok || !strings.Contains(h.Detail, tt.detail) || strings.Contains(h.Detail+h.Target, "secret-token") || strings.Contains(h.Detail, "sig=abc") {
			t.Errorf("Probe(%s) = %+v", tt.dest, h)
		}
		if got, known := n.ChannelHealth(tt.dest); !known || got != h {
			t.Errorf("ChannelHealth(%s) = %+v, %v", tt.dest, got, known)
		}
	}
	if method != http.MethodHead {
		t.Errorf("probe method %q, want HEAD", method)
	}
	if _, known := n.ChannelHealth("http://never.example/"); known {
		t.Error("unknown destination reported")
	}
}
