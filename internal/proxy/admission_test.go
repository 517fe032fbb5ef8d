package proxy

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/tollgate-mcp/tollgate/internal/limits"
)

func TestReadBody(t *testing.T) {
	long := strings.Repeat("x", 3*bodyChunk+5)
	tests := []struct {
		name   string
		body   string
		length int64 // -1: chunked (unknown)
		limit  int64
		budget int64
		want   error
	}{
		{"known length", `{"a":1}`, 7, 100, 100, nil},
		{"known length over the limit, unread", long, int64(len(long)), 10, 1 << 30, errTooLarge},
		{"known length over the budget, unread", `{"a":1}`, 7, 100, 6, errBusy},
		{"chunked", long, -1, int64(len(long)), 1 << 30, nil},
		{"chunked over the limit", long, -1, int64(len(long)) - 1, 1 << 30, errTooLarge},
		{"chunked over the budget", long, -1, 1 << 30, bodyChunk, errBusy},
		{"empty", "", 0, 10, 10, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := limits.NewBudget(tt.budget)
			r := iotest.HalfReader(strings.NewReader(tt.body)) // short reads, as from a socket
			got, taken, err := readBody(r, tt.length, tt.limit, b)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if err == nil && string(got) != tt.body {
				t.Errorf("body = %d bytes, want %d", len(got), len(tt.body))
			}
			if b.Used() != taken {
				t.Errorf("budget used %d, reported taken %d", b.Used(), taken)
			}
			b.Release(taken)
			if b.Used() != 0 {
				t.Errorf("budget not back to 0 after release: %d", b.Used())
			}
		})
	}
}

func TestSource(t *testing.T) {
	h := New(Options{Identity: func(r *http.Request) string { return r.Header.Get("X-User") }})
	tests := []struct {
		remote, user, want string
	}{
		{"10.0.0.1:5555", "", "ip:10.0.0.1"},
		{"10.0.0.1:5555", "alice", "id:alice"},
		{"[2001:db8:1:2:3:4:5:6]:443", "", "ip:2001:db8:1:2::/64"},
		{"[2001:db8:1:2:ffff::1]:443", "", "ip:2001:db8:1:2::/64"}, // same /64, same source
		{"garbage", "", "ip:garbage"},
	}
	for _, tt := range tests {
		r, _ := http.NewRequest(http.MethodPost, "/mcp", nil)
		r.RemoteAddr = tt.remote
		if tt.user != "" {
			r.Header.Set("X-User", tt.user)
		}
		if got := h.source(r); got != tt.want {
			t.Errorf("source(%s, %q) = %q, want %q", tt.remote, tt.user, got, tt.want)
		}
	}
}
