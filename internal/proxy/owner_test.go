package proxy

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/session"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

// TestSessionBoundToIdentity: a session is bound to the identity that opened it (Options.Identity,
// here X-User). Another identity holding its id — or none — gets the 404 of an unknown session
// on GET, POST and DELETE, in both directions, and the upstream never sees those requests (a
// foreign DELETE does not end the session); the opener keeps using it. A session opened without
// an identity is bound to no one.
func TestSessionBoundToIdentity(t *testing.T) {
	var mu sync.Mutex
	var seen []string // "METHOD session" as the upstream received them
	next := 0
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sid := r.Header.Get(upstream.HeaderSessionID)
		mu.Lock()
		seen = append(seen, r.Method+" "+sid)
		if sid == "" {
			next++
			sid = "up-" + string(rune('0'+next))
		}
		mu.Unlock()
		switch r.Method {
		case http.MethodGet:
			http.Error(w, "no stream", http.StatusMethodNotAllowed)
		case http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		default:
			w.Header().Set(upstream.HeaderSessionID, sid)
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"u","version":"1"}}}`))
		}
	}))
	defer up.Close()
	uc, err := upstream.New(up.URL, upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := New(Options{Upstream: uc, Sessions: session.NewRegistry(0, nil), AllowedHosts: []string{"*"},
		Identity: func(r *http.Request) string { return r.Header.Get("X-User") }})
	front := httptest.NewServer(h)
	defer front.Close()

	do := func(method, user, sid string) *http.Response {
		t.Helper()
		body := ""
		if method == http.MethodPost {
			body = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
			if sid != "" {
				body = `{"jsonrpc":"2.0","id":1,"method":"ping"}`
			}
		}
		req, _ := http.NewRequestWithContext(t.Context(), method, front.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if user != "" {
			req.Header.Set("X-User", user)
		}
		if sid != "" {
			req.Header.Set(upstream.HeaderSessionID, sid)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	open := func(user string) string {
		t.Helper()
		resp := do(http.MethodPost, user, "")
		sid := resp.Header.Get(upstream.HeaderSessionID)
		if resp.StatusCode != http.StatusOK || sid == "" {
			t.Fatalf("initialize as %q: HTTP %d, session %q", user, resp.StatusCode, sid)
		}
		return sid
	}
	upstreamSaw := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}

	alice, bob, anon := open("alice"), open("bob"), open("")
	for _, tc := range []struct{ sid, user string }{
		{alice, "bob"}, {alice, ""}, {alice, "Alice"}, {alice, "\u0430lice"}, // bob, no one, look-alikes
		{bob, "alice"}, {bob, ""}, // and the other direction
	} {
		before := len(upstreamSaw())
		for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
			if resp := do(method, tc.user, tc.sid); resp.StatusCode != http.StatusNotFound {
				t.Errorf("%s on %s's session as %q: HTTP %d, want 404", method, tc.sid, tc.user, resp.StatusCode)
			}
		}
		if saw := upstreamSaw(); len(saw) != before {
			t.Errorf("the upstream saw requests on %s made as %q: %v", tc.sid, tc.user, saw[before:])
		}
	}
	// The openers still hold their sessions: nothing above ended them.
	for _, tc := range []struct{ sid, user string }{{alice, "alice"}, {bob, "bob"}, {anon, "carol"}, {anon, ""}} {
		if resp := do(http.MethodPost, tc.user, tc.sid); resp.StatusCode != http.StatusOK {
			t.Errorf("POST on %s as %q: HTTP %d, want 200", tc.sid, tc.user, resp.StatusCode)
		}
	}
	if resp := do(http.MethodDelete, "alice", alice); resp.StatusCode != http.StatusNoContent {
		t.Errorf("DELETE by its opener: HTTP %d, want 204", resp.StatusCode)
	}
	if resp := do(http.MethodPost, "alice", alice); resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST after the opener's DELETE: HTTP %d, want 404", resp.StatusCode)
	}
}
