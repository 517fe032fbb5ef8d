package e2e

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

func readyz(t *testing.T, g *testkit.Gateway) (int, string) {
	t.Helper()
	resp, err := testkit.HTTPClient.Get(g.Admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// closedURL is a loopback URL nothing listens on.
func closedURL(t *testing.T, path string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return "http://" + addr + path
}

// TestApprovalChannelsReported: workflows in use whose destination cannot reach anyone — a
// webhook host that does not answer, a Slack hook whose notifications fail, no approver token
// — are logged at start and listed on /readyz (which stays 200: forwarded calls still work),
// without the destinations' secret paths.
func TestApprovalChannelsReported(t *testing.T) {
	var posts atomic.Int32
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts.Add(1)
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusMethodNotAllowed) // HEAD probe: reachable
	}))
	defer failing.Close()
	dead := closedURL(t, "/hooks/secret-path-dead")
	_, upURL := testkit.StartDemo(t)
	cfg := testkit.BasicConfig(upURL, `governance:
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve}
    - {match: "drop_*", action: approve, approval: hooks}
    - {match: "transfer_*", action: approve, approval: slacky}
approval:
  hooks: {destination: {type: webhook, url: "`+dead+`"}}
  slacky: {destination: {type: slack, url: "`+failing.URL+`/services/secret-path-slack"}}
  unused: {destination: {type: webhook, url: "`+closedURL(t, "/x")+`"}}
approvers:
  - {name: alice, token_env: ALICE_TOKEN}
tasks: {hold_budget: 100ms}
`)
	g := testkit.StartGateway(t, cfg, approverEnv, nil)
	g.WaitReady(t)
	var body string
	waitFor(t, "the dead webhook on /readyz", func() bool {
		_, body = readyz(t, g)
		return strings.Contains(body, "degraded: approval.hooks: webhook notifications to http://127.0.0.1:")
	})
	st, body := readyz(t, g)
	if st != http.StatusOK || !strings.HasPrefix(body, "ready\n") || !strings.Contains(body, "unreachable") {
		t.Errorf("readyz %d:\n%s", st, body)
	}
	for _, absent := range []string{"slacky", "unused", "approval.default", "secret-path", "no approver token"} {
		if strings.Contains(body, absent) {
			t.Errorf("readyz mentions %q:\n%s", absent, body)
		}
	}
	if !strings.Contains(g.Logs.String(), "approval channel not working: approval.hooks") {
		t.Errorf("no WARN at start for the dead webhook")
	}

	// A held call's notifications to the Slack hook fail: the channel shows as not working.
	c := g.NewClient(t)
	c.Call(1, "transfer_funds", map[string]any{"from_account": "a", "to_account": "b", "amount": 1, "currency": "USD"}, 0)
	waitFor(t, "the failing Slack hook on /readyz", func() bool {
		_, body = readyz(t, g)
		return strings.Contains(body, "degraded: approval.slacky: slack notifications to "+failing.URL+" do not arrive (last notification failed after 3 attempt(s): HTTP 500)")
	})
	if strings.Contains(body, "secret-path") || posts.Load() != 3 {
		t.Errorf("readyz:\n%s\nposts %d", body, posts.Load())
	}

	// Without any approver token nobody can decide: reported too.
	g2 := testkit.StartGateway(t, testkit.BasicConfig(upURL, "governance:\n  rules:\n    - {match: \"delete_*\", action: approve}\n"),
		map[string]string{"TOLLGATE_ADMIN_TOKEN": ""}, nil)
	g2.WaitReady(t)
	if st, body := readyz(t, g2); st != http.StatusOK || !strings.Contains(body, "degraded: no approver token is configured") || !strings.Contains(body, "workflow default") {
		t.Errorf("readyz without tokens %d:\n%s", st, body)
	}
}
