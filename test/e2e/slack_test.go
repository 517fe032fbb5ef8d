package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/demo"
	"github.com/tollgate-mcp/tollgate/internal/slack"
	"github.com/tollgate-mcp/tollgate/internal/slack/slacktest"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

const slackSecret = "e2e-slack-signing-secret"

// postInteraction POSTs a Slack interactivity callback to the admin listener as Slack does.
func postInteraction(t *testing.T, g *testkit.Gateway, body []byte, hdr http.Header) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, g.Admin+slack.InteractionsPath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = hdr
	resp, err := testkit.HTTPClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// buttonValue is the task id the posted message's Approve button carries.
func buttonValue(t *testing.T, post map[string]any) string {
	t.Helper()
	acts := slacktest.Blocks(post, "actions")
	if len(acts) != 1 {
		t.Fatalf("posted message has %d actions blocks", len(acts))
	}
	el := acts[0]["elements"].([]any)[0].(map[string]any)
	if el["action_id"] != slack.ActionApprove {
		t.Fatalf("first button %v", el)
	}
	return el["value"].(string)
}

// startSlackGateway runs Tollgate in front of the demo upstream with transfer_* held in
// workflow pay, posted to a Slack channel (the local receiver recv); extra is one more key of
// approval.pay ("" for none). alice (U0ALICE) and bob (U0BOB) are approvers.
func startSlackGateway(t *testing.T, extra string) (*slacktest.Receiver, *demo.Demo, *testkit.Gateway) {
	t.Helper()
	recv := slacktest.NewReceiver(t, "xoxb-e2e-token")
	d, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, slackConfig(upURL, extra), slackEnv(recv), nil)
	g.WaitReady(t)
	return recv, d, g
}

// slackEnv is the environment of a Tollgate posting to recv, with the approvers' tokens.
func slackEnv(recv *slacktest.Receiver) map[string]string {
	env := map[string]string{
		"TOLLGATE_SLACK_BOT_TOKEN": "xoxb-e2e-token", "TOLLGATE_SLACK_SIGNING_SECRET": slackSecret, "TOLLGATE_SLACK_API_URL": recv.URL,
	}
	for k, v := range approverEnv {
		env[k] = v
	}
	return env
}

// slackConfig holds transfer_* calls for the Slack workflow "pay" (extra: one more key of it).
func slackConfig(upURL, extra string) string {
	if extra != "" {
		extra = "    " + extra + "\n"
	}
	return testkit.BasicConfig(upURL, `governance:
  defaults: {action: forward}
  rules:
    - {match: "transfer_*", action: approve, approval: pay}
approval:
  pay:
    destination: {type: slack, channel: "#approvals"}
`+extra+`approvers:
  - {name: alice, token_env: ALICE_TOKEN, slack_user_id: U0ALICE}
  - {name: bob, token_env: BOB_TOKEN, slack_user_id: U0BOB}
`)
}

// TestSlackApproval: a real Tollgate in front of the demo upstream posts a held call to Slack
// (a local stand-in checking every request against Slack's documented shapes); a signed click
// on Approve by a mapped Slack user runs the call exactly once and the message is updated to
// say who approved. An unmapped user's click and a replayed one decide nothing. A call decided
// in the approvals API instead updates its message too.
func TestSlackApproval(t *testing.T) {
	recv, d, g := startSlackGateway(t, "redact_fields: [to_account]")
	recv.Wait(t, "auth.test", 1) // the start-up probe of the bot token
	if _, body := readyz(t, g); strings.Contains(body, "degraded: approval.pay") {
		t.Errorf("readyz reports the working Slack channel:\n%s", body)
	}
	c := g.NewClient(t)

	tid := c.CallTask(1, "transfer_funds", `{"from_account":"acc-1","to_account":"acc-secret","amount":9007199254740993,"currency":"USD"}`)
	post := recv.Wait(t, "chat.postMessage", 1)[0].Body
	waitPosted(t, g, 1) // clicks are matched against the place Tollgate keeps once Slack answered
	if got := buttonValue(t, post); got != tid {
		t.Fatalf("button value %q, want the task id %q", got, tid)
	}
	text := slacktest.Text(post)
	if !strings.Contains(text, "9007199254740993") || strings.Contains(text, "acc-secret") {
		t.Errorf("posted arguments not exact and redacted:\n%s", text)
	}
	respURL := recv.ResponseURL("T0/1/abc")

	// An unmapped Slack user: told ephemerally, nothing decided.
	mallory := slacktest.Click("U0MALLORY", slack.ActionApprove, tid, slacktest.ChannelID, "1700000000.000001", respURL)
	if st := postInteraction(t, g, mallory, slacktest.Signed(slackSecret, time.Now(), mallory)); st != http.StatusOK {
		t.Fatalf("unmapped click: HTTP %d", st)
	}
	if r := recv.Wait(t, "response_url", 1)[0].Body; r["response_type"] != "ephemeral" {
		t.Errorf("unmapped user answered %v", r)
	}
	// A forged click: refused.
	forged := slacktest.Click("U0ALICE", slack.ActionApprove, tid, slacktest.ChannelID, "1700000000.000001", respURL)
	if st := postInteraction(t, g, forged, slacktest.Signed("guessed-secret", time.Now(), forged)); st != http.StatusUnauthorized {
		t.Errorf("forged click: HTTP %d, want 401", st)
	}
	if st, v := g.AdminRequest(t, "GET", "/api/v1/approvals/"+tid, "alice-secret-token", ""); st != 200 || v["state"] != "awaiting_approval" {
		t.Fatalf("after refused clicks: %d %v", st, v)
	}

	// Alice approves in Slack: the call runs once, the message says so.
	click := slacktest.Click("U0ALICE", slack.ActionApprove, tid, slacktest.ChannelID, "1700000000.000001", respURL)
	hdr := slacktest.Signed(slackSecret, time.Now(), click)
	if st := postInteraction(t, g, click, hdr); st != http.StatusOK {
		t.Fatalf("alice's click: HTTP %d", st)
	}
	if st := postInteraction(t, g, click, hdr); st != http.StatusUnauthorized {
		t.Errorf("replayed click: HTTP %d, want 401", st)
	}
	res := string(c.TaskRPC(2, "tasks/result", tid).ResponseBytes(t))
	if !strings.Contains(res, "acc-1") {
		t.Errorf("tasks/result: %s", res)
	}
	if n := d.Calls("transfer_funds"); n != 1 {
		t.Errorf("upstream executions %d, want 1", n)
	}
	upd := recv.Wait(t, "chat.update", 1)[0].Body
	if upd["channel"] != slacktest.ChannelID || upd["ts"] != "1700000000.000001" || !strings.Contains(slacktest.Text(upd), "Approved by alice") {
		t.Errorf("chat.update %v", upd)
	}
	if len(slacktest.Blocks(upd, "actions")) != 0 {
		t.Error("the updated message still has buttons")
	}
	if st, v := g.AdminRequest(t, "GET", "/api/v1/approvals/"+tid, "bob-secret-token", ""); st != 200 || testkit.Dig(v, "decision", "by") != "alice" {
		t.Errorf("decision recorded: %d %v", st, v)
	}

	// Decided elsewhere (the approvals API): the Slack message is updated all the same.
	tid2 := c.CallTask(3, "transfer_funds", `{"from_account":"acc-2","to_account":"acc-3","amount":5,"currency":"USD"}`)
	recv.Wait(t, "chat.postMessage", 2)
	waitPosted(t, g, 2)
	if st, _ := g.AdminRequest(t, "POST", "/api/v1/approvals/"+tid2+"/reject", "bob-secret-token", `{"reason":"not today"}`); st != 200 {
		t.Fatalf("reject in the API: %d", st)
	}
	upd = recv.Wait(t, "chat.update", 2)[1].Body
	if got := slacktest.Text(upd); !strings.Contains(got, "Rejected by bob") || !strings.Contains(got, "not today") {
		t.Errorf("chat.update after the API decision:\n%s", got)
	}
	// The stand-in numbers each message it is asked to post: tid's is ts …001, tid2's …002
	// (updates keep their message's ts, whenever they come).
	const tid2TS = "1700000000.000002"
	// A click carrying tid2 from a message Tollgate did not post for it (tid's): refused,
	// nothing decided or updated.
	foreign := slacktest.Click("U0BOB", slack.ActionApprove, tid2, slacktest.ChannelID, "1700000000.000001", respURL)
	if st := postInteraction(t, g, foreign, slacktest.Signed(slackSecret, time.Now(), foreign)); st != http.StatusOK {
		t.Fatalf("click from another message: HTTP %d", st)
	}
	if r := recv.Wait(t, "response_url", 2)[1].Body; !strings.Contains(r["text"].(string), "not the one Tollgate posted") {
		t.Errorf("click from another message answered %v", r)
	}
	// A late click on the decided call's own button: told who decided, nothing changes.
	late := slacktest.Click("U0ALICE", slack.ActionApprove, tid2, slacktest.ChannelID, tid2TS, respURL)
	if st := postInteraction(t, g, late, slacktest.Signed(slackSecret, time.Now(), late)); st != http.StatusOK {
		t.Fatalf("late click: HTTP %d", st)
	}
	if r := recv.Wait(t, "response_url", 3)[2].Body; !strings.Contains(r["text"].(string), "already rejected by bob") {
		t.Errorf("late click answered %v", r)
	}
	// ... and its message (found through the place kept with the task) shows the outcome.
	if u := recv.Wait(t, "chat.update", 3)[2].Body; u["ts"] != tid2TS || !strings.Contains(slacktest.Text(u), "Rejected by bob") {
		t.Errorf("stale message not brought up to date: %v", u)
	}
	if n := d.Calls("transfer_funds"); n != 1 {
		t.Errorf("upstream executions %d after the reject, want 1", n)
	}
	for series, want := range map[string]float64{
		`tollgate_slack_interactions_refused_total{reason="unmapped_user"}`:      1,
		`tollgate_slack_interactions_refused_total{reason="bad_signature"}`:      1,
		`tollgate_slack_interactions_refused_total{reason="replay"}`:             1,
		`tollgate_slack_interactions_refused_total{reason="not_pending"}`:        1,
		`tollgate_slack_interactions_refused_total{reason="foreign_message"}`:    1,
		`tollgate_slack_requests_total{method="chat.postMessage",result="sent"}`: 2,
		// the incoming-webhook sender leaves channel destinations alone
		`tollgate_notifications_total{destination="slack",result="failed"}`: 0,
		`tollgate_notifications_total{destination="slack",result="sent"}`:   0,
	} {
		if got := metricValue(t, g, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if logs := g.Logs.String(); strings.Contains(logs, "xoxb-e2e-token") || strings.Contains(logs, slackSecret) {
		t.Error("a Slack secret appears in the logs")
	}
}

// TestSlackChannelReported: a Slack channel that cannot work — the bot token unset, or Slack
// refusing it — and buttons that cannot decide (no signing secret) are listed on /readyz as
// degraded (still 200), never with a secret.
func TestSlackChannelReported(t *testing.T) {
	_, upURL := testkit.StartDemo(t)
	cfg := testkit.BasicConfig(upURL, `governance:
  rules:
    - {match: "transfer_*", action: approve, approval: pay}
approval:
  pay: {destination: {type: slack, channel: "#approvals"}}
`)
	g := testkit.StartGateway(t, cfg, approverEnv, nil)
	g.WaitReady(t)
	st, body := readyz(t, g)
	for _, want := range []string{
		"degraded: approval.pay: slack messages to #approvals do not arrive (TOLLGATE_SLACK_BOT_TOKEN is not set)",
		"degraded: approval.pay: Slack buttons cannot decide: TOLLGATE_SLACK_SIGNING_SECRET is not set",
	} {
		if st != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("readyz %d lacks %q:\n%s", st, want, body)
		}
	}

	recv := slacktest.NewReceiver(t, "xoxb-e2e-token")
	recv.FailNext.Store(1) // auth.test answered 500
	g2 := testkit.StartGateway(t, cfg, map[string]string{"TOLLGATE_SLACK_BOT_TOKEN": "xoxb-e2e-token",
		"TOLLGATE_SLACK_SIGNING_SECRET": slackSecret, "TOLLGATE_SLACK_API_URL": recv.URL}, nil)
	g2.WaitReady(t)
	waitFor(t, "the failed auth.test on /readyz", func() bool {
		_, body = readyz(t, g2)
		return strings.Contains(body, "degraded: approval.pay: slack messages to #approvals do not arrive (auth.test: HTTP 500)")
	})
	if strings.Contains(body, "xoxb") || strings.Contains(body, slackSecret) || strings.Contains(body, "buttons cannot decide") {
		t.Errorf("readyz:\n%s", body)
	}
}

// TestSlackClickOutsideApprovers: a Slack click decides through the approvals API's own path,
// so a workflow's approvers list binds Slack too: bob, mapped to a Slack user but not in
// approval.pay.approvers, is told so ephemerally and decides nothing; alice's click approves.
func TestSlackClickOutsideApprovers(t *testing.T) {
	recv, d, g := startSlackGateway(t, "approvers: [alice]")
	c := g.NewClient(t)
	tid := c.CallTask(1, "transfer_funds", `{"from_account":"acc-1","to_account":"acc-2","amount":5,"currency":"USD"}`)
	recv.Wait(t, "chat.postMessage", 1)
	waitPosted(t, g, 1) // clicks are matched against the place Tollgate keeps once Slack answered
	respURL := recv.ResponseURL("T0/1/abc")

	bob := slacktest.Click("U0BOB", slack.ActionApprove, tid, slacktest.ChannelID, "1700000000.000001", respURL)
	if st := postInteraction(t, g, bob, slacktest.Signed(slackSecret, time.Now(), bob)); st != http.StatusOK {
		t.Fatalf("bob's click: HTTP %d", st)
	}
	if r := recv.Wait(t, "response_url", 1)[0].Body; r["response_type"] != "ephemeral" || !strings.Contains(fmt.Sprint(r["text"]), "approval.pay.approvers") {
		t.Errorf("bob was answered %v", r)
	}
	if st, v := g.AdminRequest(t, "GET", "/api/v1/approvals/"+tid, "alice-secret-token", ""); st != 200 || v["state"] != "awaiting_approval" {
		t.Fatalf("after bob's click: %d %v", st, v)
	}
	if got := metricValue(t, g, `tollgate_slack_interactions_refused_total{reason="not_authorized"}`); got != 1 {
		t.Errorf("not_authorized refusals = %v, want 1", got)
	}
	alice := slacktest.Click("U0ALICE", slack.ActionApprove, tid, slacktest.ChannelID, "1700000000.000001", respURL)
	if st := postInteraction(t, g, alice, slacktest.Signed(slackSecret, time.Now(), alice)); st != http.StatusOK {
		t.Fatalf("alice's click: HTTP %d", st)
	}
	if res := string(c.TaskRPC(2, "tasks/result", tid).ResponseBytes(t)); !strings.Contains(res, "acc-1") {
		t.Errorf("tasks/result: %s", res)
	}
	if n := d.Calls("transfer_funds"); n != 1 {
		t.Errorf("upstream executions %d, want 1", n)
	}
}

// TestSlackMessageKeptAcrossRestart: the place of a posted approval message is kept with its
// task in the file store, so a Tollgate restarted meanwhile still replaces the message (no
// stale Approve / Reject buttons) when the call is decided in the approvals API; a message
// Slack refused before the restart is posted by the restarted process, and a posted one is
// not posted twice.
func TestSlackMessageKeptAcrossRestart(t *testing.T) {
	recv := slacktest.NewReceiver(t, "xoxb-e2e-token")
	_, upURL := testkit.StartDemo(t)
	env := slackEnv(recv)
	env["TOLLGATE_DATA_DIR"] = t.TempDir() // both processes use the same file store
	cfg := slackConfig(upURL, "")
	first := testkit.StartGateway(t, cfg, env, nil)
	first.WaitReady(t)
	recv.Wait(t, "auth.test", 1)
	c := first.NewClient(t)
	posted := c.CallTask(1, "transfer_funds", `{"from_account":"acc-1","to_account":"acc-2","amount":5,"currency":"USD"}`)
	recv.Wait(t, "chat.postMessage", 1) // answered ts 1700000000.000001
	// The post is done (and its place kept) once the sender logs it as sent.
	waitFor(t, "the message to be posted", func() bool {
		return strings.Contains(first.Logs.String(), `"msg":"slack request sent","method":"chat.postMessage"`)
	})
	recv.FailNext.Store(3) // every attempt of the next post fails
	refused := c.CallTask(2, "transfer_funds", `{"from_account":"acc-3","to_account":"acc-4","amount":6,"currency":"USD"}`)
	waitFor(t, "the second post to fail", func() bool {
		return strings.Contains(first.Logs.String(), `"msg":"slack request failed","method":"chat.postMessage"`)
	})
	first.Stop()

	second := testkit.StartGateway(t, cfg, env, nil)
	second.WaitReady(t)
	// The refused message is posted now (answered ts 1700000000.000002), the other one not again.
	if post := recv.Wait(t, "chat.postMessage", 5)[4].Body; buttonValue(t, post) != refused {
		t.Fatalf("posted after the restart: %v, want the message of %s", post, refused)
	}
	for _, id := range []string{posted, refused} {
		if st, _ := second.AdminRequest(t, "POST", "/api/v1/approvals/"+id+"/reject", "bob-secret-token", `{"reason":"after the restart"}`); st != 200 {
			t.Fatalf("reject %s after the restart: %d", id, st)
		}
	}
	updated := map[string]bool{}
	for _, u := range recv.Wait(t, "chat.update", 2) {
		if u.Body["channel"] != slacktest.ChannelID || !strings.Contains(slacktest.Text(u.Body), "Rejected by bob") || len(slacktest.Blocks(u.Body, "actions")) != 0 {
			t.Errorf("chat.update after the restart: %v", u.Body)
		}
		updated[fmt.Sprint(u.Body["ts"])] = true
	}
	if !updated["1700000000.000001"] || !updated["1700000000.000002"] {
		t.Errorf("messages updated after the restart: %v, want both posted ones", updated)
	}
	if n := len(recv.Calls("chat.postMessage")); n != 5 {
		t.Errorf("%d posts in all, want 5 (one, three refused attempts, the resumed one)", n)
	}
}

// waitPosted waits until Tollgate has had n chat.postMessage answers from Slack: the stand-in
// records a request when it arrives, but Tollgate keeps the message's channel and ts (which
// a click must match) only once the answer is back.
func waitPosted(t *testing.T, g *testkit.Gateway, n int) {
	t.Helper()
	waitFor(t, "the Slack message to be posted", func() bool {
		return strings.Count(g.Logs.String(), `"msg":"slack request sent","method":"chat.postMessage"`) >= n
	})
}
