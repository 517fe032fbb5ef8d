package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/demo"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store/storetest"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// TestCredentialAcrossReplicas: two replicas with caller auth share a real redis-server and one
// recording upstream that needs Tollgate's credential (sources[0].credential: a static one on
// A, a client-credentials token from a token endpoint on B, obtained once). A legacy call
// held on replica A and approved through replica B's API runs on A; a 2026-07-28 call held on
// A, approved through B after A is gone, runs on B. Every request the upstream receives —
// handshakes, both approved calls — carries Tollgate's credential, never the caller's token,
// whichever replica sends it.
func TestCredentialAcrossReplicas(t *testing.T) {
	url := storetest.RedisURL(t) // skips loudly without redis-server
	d := demo.New()
	var mu sync.Mutex
	type seen struct {
		auth, replica string
		call          string // the user_id of a delete_user call, "" for other requests
	}
	var got []seen
	rec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		s := seen{auth: r.Header.Get("Authorization"), replica: r.URL.Query().Get("replica")}
		for _, id := range []string{"u-002", "u-003"} {
			if bytes.Contains(body, []byte(`"delete_user"`)) && bytes.Contains(body, []byte(`"`+id+`"`)) {
				s.call = id
			}
		}
		mu.Lock()
		got = append(got, s)
		mu.Unlock()
		d.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(rec.Close)
	// Replica B gets its upstream token from a token endpoint (client_credentials).
	var issued atomic.Int64
	te := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id, secret, ok := r.BasicAuth(); !ok || id != "tollgate-b" || secret != "b-client-secret" || r.FormValue("grant_type") != "client_credentials" {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"cc-token-%d","token_type":"Bearer","expires_in":3600}`, issued.Add(1))
	}))
	t.Cleanup(te.Close)
	is := testkit.StartIssuer(t)
	const aud = "https://tollgate.example.test/mcp" // one resource, two replicas
	credentials := map[string]string{
		"a": "{value_file: upstream.cred}",
		"b": "{client_credentials: {token_url: \"" + te.URL + "/token\", client_id: tollgate-b, client_secret_file: b.secret}}",
	}
	cfg := func(replica string) string {
		return "schema: 1\nsources:\n  - id: upstream\n    kind: mcp\n    url: " + rec.URL + "/mcp?replica=" + replica +
			"\n    credential: " + credentials[replica] + "\n" + `server:
  caller_auth: {type: jwt, issuer: ` + is.URL + `, audience: ` + aud + `}
governance:
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve}
approval:
  default: {}
approvers:
  - {name: alice, token_env: ALICE_TOKEN}
  - {name: bob, token_env: BOB_TOKEN}
tasks:
  sync_approval: error
  store: {type: redis, url: "` + url + `?key_prefix=ha-cred-` + strings.ReplaceAll(t.Name(), "/", "-") + `:"}
`
	}
	files := map[string]string{"upstream.cred": "Bearer tollgate-own-upstream-credential\n", "b.secret": "b-client-secret\n"}
	a := testkit.StartGateway(t, cfg("a"), approverEnv, files)
	b := testkit.StartGateway(t, cfg("b"), approverEnv, files)
	a.WaitReady(t)
	b.WaitReady(t)
	tok := is.Token(t, aud, map[string]any{"sub": "agent-carol"})

	// 2025-11-25: held on A, approved on B, run on A (the caller's session lives there).
	c := withBearer(&testkit.RPC{T: t, URL: a.MCP}, tok)
	c.Initialize()
	tid := c.CallTask(1, "delete_user", `{"user_id":"u-002"}`)
	if st, body := b.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/approve", "alice-secret-token", `{}`); st != http.StatusOK {
		t.Fatalf("approve on B: %d %v", st, body)
	}
	waitFor(t, "the legacy call approved on B to run", func() bool { return d.Calls("delete_user") == 1 })

	// 2026-07-28: held on A, A stops, approved on B, run on B.
	hdr := http.Header{"Authorization": {"Bearer " + tok}}
	onA := &modernClient{t: t, url: a.MCP, tasks: true, hdr: hdr}
	onB := &modernClient{t: t, url: b.MCP, tasks: true, hdr: hdr}
	m := onA.call(2, "tools/call", map[string]any{"name": "delete_user", "arguments": map[string]any{"user_id": "u-003"}})
	mtid, _ := testkit.Dig(m, "result", "taskId").(string)
	if !strings.HasPrefix(mtid, "tg_") {
		t.Fatalf("no task: %v", m)
	}
	a.Stop()
	if st, body := b.AdminRequest(t, "POST", "/api/v1/approvals/"+mtid+"/approve", "bob-secret-token", `{}`); st != http.StatusOK {
		t.Fatalf("approve on B: %d %v", st, body)
	}
	if s := testkit.Dig(onB.waitTask(mtid), "result", "status"); s != "completed" {
		t.Fatalf("the 2026-07-28 task after approval on B: %v", s)
	}
	if n := d.Calls("delete_user"); n != 2 {
		t.Fatalf("upstream delete_user calls = %d, want 2", n)
	}

	mu.Lock()
	defer mu.Unlock()
	ranOn := map[string]string{}
	for i, s := range got {
		if s.call != "" {
			ranOn[s.call] += s.replica
		}
		if want := map[string]string{"a": "Bearer tollgate-own-upstream-credential", "b": "Bearer cc-token-1"}[s.replica]; s.auth != want {
			t.Errorf("upstream request %d from replica %s carried Authorization %q, want Tollgate's credential %q", i, s.replica, s.auth, want)
		}
		if strings.Contains(s.auth, tok) {
			t.Errorf("upstream request %d from replica %s carried the caller's token", i, s.replica)
		}
	}
	if ranOn["u-002"] != "a" || ranOn["u-003"] != "b" {
		t.Errorf("the approved calls ran on %v, want u-002 on a (legacy, its session) and u-003 on b (2026-07-28, A gone)", ranOn)
	}
}
