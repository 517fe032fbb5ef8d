package e2e

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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

// TestWebhookResumedAfterRestart: an approval.requested webhook the destination refused (every
// retry) is sent by the restarted process, with the same delivery_id; one that was delivered is
// not sent again. Approvers hear of every pending call even across a rolling restart.
func TestWebhookResumedAfterRestart(t *testing.T) {
	var failing atomic.Int32
	type delivery struct{ event, id string }
	got := make(chan delivery, 16)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed) // HEAD probe: reachable
			return
		}
		if failing.Add(-1) >= 0 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		var b struct {
			DeliveryID string `json:"delivery_id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&b)
		got <- delivery{r.Header.Get("X-Tollgate-Event"), b.DeliveryID}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()
	next := func() delivery {
		t.Helper()
		select {
		case d := <-got:
			return d
		case <-time.After(10 * time.Second):
			t.Fatal("no webhook delivery within 10s")
			return delivery{}
		}
	}
	_, upURL := testkit.StartDemo(t)
	cfg := testkit.BasicConfig(upURL, `governance:
  defaults: {action: forward}
  rules:
    - {match: "transfer_*", action: approve, approval: hooks}
approval:
  hooks: {destination: {type: webhook, url: "`+hook.URL+`/hooks/secret"}}
approvers:
  - {name: bob, token_env: BOB_TOKEN}
`)
	env := map[string]string{"TOLLGATE_DATA_DIR": t.TempDir()} // both processes use the same file store
	for k, v := range approverEnv {
		env[k] = v
	}
	first := testkit.StartGateway(t, cfg, env, nil)
	first.WaitReady(t)
	c := first.NewClient(t)
	delivered := c.CallTask(1, "transfer_funds", `{"from_account":"acc-1","to_account":"acc-2","amount":5,"currency":"USD"}`)
	if d := next(); d.event != "approval.requested" || d.id != delivered+"/awaiting_approval" {
		t.Fatalf("first delivery %+v", d)
	}
	waitFor(t, "the delivery to be recorded", func() bool {
		return strings.Contains(first.Logs.String(), `"msg":"notification sent"`)
	})
	failing.Store(3) // every attempt of the next event fails
	refused := c.CallTask(2, "transfer_funds", `{"from_account":"acc-3","to_account":"acc-4","amount":6,"currency":"USD"}`)
	waitFor(t, "the second event to fail", func() bool {
		return strings.Contains(first.Logs.String(), `"msg":"notification failed"`)
	})
	first.Stop()

	second := testkit.StartGateway(t, cfg, env, nil)
	second.WaitReady(t)
	if d := next(); d.event != "approval.requested" || d.id != refused+"/awaiting_approval" {
		t.Fatalf("after the restart: %+v, want approval.requested of %s", d, refused)
	}
	// Events go out in order: the decision's event comes right after whatever was queued
	// before it, so a delivered event sent again would show up here first.
	if st, _ := second.AdminRequest(t, "POST", "/api/v1/approvals/"+refused+"/reject", "bob-secret-token", `{"reason":"no"}`); st != 200 {
		t.Fatalf("reject: %d", st)
	}
	if d := next(); d.event != "approval.decided" || d.id != refused+"/rejected" {
		t.Errorf("after the resumed event: %+v, want approval.decided of %s (a delivered event was sent again?)", d, refused)
	}
}
