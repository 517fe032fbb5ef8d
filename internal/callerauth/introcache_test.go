package callerauth

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

// TestIntrospectionRefusalsNeverEvictCallers: made-up opaque tokens, refused by the issuer,
// are remembered apart from verified callers' answers, so a flood of them never forces a
// verified caller's token to be introspected again.
func TestIntrospectionRefusalsNeverEvictCallers(t *testing.T) {
	var asked atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		asked.Add(1)
		if r.Form.Get("token") == "good-token" { // short-lived: in one shared table, refusals (kept 10 s) outlived it
			_ = json.NewEncoder(w).Encode(map[string]any{"active": true, "sub": "agent-1", "exp": time.Now().Add(5 * time.Second).Unix()})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"active": false})
	}))
	t.Cleanup(srv.Close)
	a, err := New(config.Server{PublicURL: "https://mcp.example.com", CallerAuth: config.CallerAuth{CallerIssuer: config.CallerIssuer{Type: config.CallerAuthIntrospection,
		Issuer: srv.URL, IntrospectionURL: srv.URL + "/introspect", ClientID: "tollgate", ClientSecretEnv: "X"}}},
		Options{Client: srv.Client(), Secret: func(string, string) (string, error) { return "secret", nil }})
	if err != nil {
		t.Fatal(err)
	}
	a.intro, a.introRefused = newIntroCache(2), newIntroCache(2) // small tables, same rule
	if _, f := a.Authenticate(request("good-token")); f != nil {
		t.Fatal(f)
	}
	for i := range 20 {
		if _, f := a.Authenticate(request("made-up-" + string(rune('a'+i)))); f == nil || f.Reason != "inactive" {
			t.Fatalf("a made-up token: %v", f)
		}
	}
	before := asked.Load()
	if _, f := a.Authenticate(request("good-token")); f != nil {
		t.Fatal(f)
	}
	if asked.Load() != before {
		t.Error("the verified caller's token was introspected again: refusals pushed its answer out")
	}
}

// TestIntrospectionRefusalsThrottledPerSource: each made-up opaque token cost one request to
// the introspection endpoint; now an address whose tokens were refused refusalBurst times gets
// its next unknown tokens refused (introspection_throttled) without asking, while another
// address's new token is still introspected and accepted, and the budget refills with time.
func TestIntrospectionRefusalsThrottledPerSource(t *testing.T) {
	var asked atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		asked.Add(1)
		if r.Form.Get("token") == "good-token" {
			_ = json.NewEncoder(w).Encode(map[string]any{"active": true, "sub": "agent-1", "exp": time.Now().Add(time.Hour).Unix()})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"active": false})
	}))
	t.Cleanup(srv.Close)
	now := time.Now()
	a, err := New(config.Server{PublicURL: "https://mcp.example.com", CallerAuth: config.CallerAuth{CallerIssuer: config.CallerIssuer{Type: config.CallerAuthIntrospection,
		Issuer: srv.URL, IntrospectionURL: srv.URL + "/introspect", ClientID: "tollgate", ClientSecretEnv: "X"}}},
		Options{Client: srv.Client(), Secret: func(string, string) (string, error) { return "secret", nil }, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	from := func(tok, addr string) *http.Request {
		r := request(tok)
		r.RemoteAddr = addr
		return r
	}
	for i := range refusalBurst {
		if _, f := a.Authenticate(from(fmt.Sprintf("made-up-%d", i), "192.0.2.7:4000")); f == nil || f.Reason != "inactive" {
			t.Fatalf("made-up token %d: %v", i, f)
		}
	}
	before := asked.Load()
	for i := range 1000 {
		_, f := a.Authenticate(from(fmt.Sprintf("flood-%d", i), "192.0.2.7:4001"))
		if f == nil || f.Reason != "introspection_throttled" || f.Status != http.StatusUnauthorized {
			t.Fatalf("flood token %d: %v, want 401 introspection_throttled", i, f)
		}
	}
	if n := asked.Load() - before; n != 0 {
		t.Errorf("the throttled address still cost %d introspection requests", n)
	}
	if c, f := a.Authenticate(from("good-token", "198.51.100.9:5000")); f != nil || c.Subject == "" {
		t.Errorf("another address's token: %v", f)
	}
	now = now.Add(refusalEvery)
	if _, f := a.Authenticate(from("made-up-later", "192.0.2.7:4002")); f == nil || f.Reason != "inactive" {
		t.Errorf("after %s the address may ask once more: %v", refusalEvery, f)
	}
	if a.refusals.sources() != 1 {
		t.Errorf("sources remembered = %d, want 1 (accepted tokens never count)", a.refusals.sources())
	}
}
