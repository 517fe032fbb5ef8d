package callerauth

import (
	"encoding/json"
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
