package browser

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tollgate-mcp/tollgate/internal/console"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// whoRules: transfers are decided by group finance (alice) only; deletes by every approver
// until the reload below narrows them to alice too.
func whoRules(defaultApprovers string) string {
	return `governance:
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve}
    - {match: "transfer_*", action: approve, approval: payments}
approval:
  default: {` + defaultApprovers + `}
  payments: {approvers: ["group:finance"]}
approvers:
  - {name: alice, token_env: ALICE_TOKEN}
  - {name: bob, token_env: BOB_TOKEN}
approver_groups:
  finance: [alice]
`
}

// TestConsoleWhoMayDecide: signed in as bob, who is outside payments' approvers, the console
// lists and counts only the delete he may decide, never the transfer; after a reload that
// narrows the default workflow to alice, his approve click is refused with the API's reason
// (403 not_authorized) and the call stays pending.
func TestConsoleWhoMayDecide(t *testing.T) {
	b := startBrowser(t)
	_, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, whoRules("")), map[string]string{"ALICE_TOKEN": aliceToken, "BOB_TOKEN": bobToken}, nil)
	g.WaitReady(t)
	origin := consoleOrigin(t, g)
	c := g.NewClient(t)
	transferID := c.CallTask(1, "transfer_funds", `{"from_account":"acc-checking","to_account":"acc-savings","amount":5,"currency":"EUR"}`)
	deleteID := c.CallTask(2, "delete_user", `{"user_id":"u-002"}`)

	b.do("open and sign in as bob", chromedp.Navigate(origin+console.Path), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), bobToken), chromedp.Click(chromedp.ID("signin")))
	b.do("bob's request is listed", chromedp.WaitVisible(chromedp.CSS(rowSel(deleteID))))
	b.waitFor("only what bob may decide", `document.querySelectorAll('#approvals tbody tr').length === 1 && !document.querySelector(`+jsString(rowSel(transferID))+`)`+
		` && document.getElementById('summary-total').textContent.startsWith('1 pending') && !document.documentElement.outerHTML.includes('transfer_funds')`)

	b.do("open the delete", clickJS(rowSel(deleteID)), chromedp.WaitVisible(chromedp.ID("args")))
	path := filepath.Join(g.Dir, "tollgate.yaml")
	if err := os.WriteFile(path, []byte(testkit.BasicConfig(upURL, whoRules(`approvers: [alice]`))), 0o644); err != nil {
		t.Fatal(err)
	}
	g.Srv.Reload()
	// The reload is asynchronous: wait until the API applies it (bounded).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if st, _ := g.AdminRequest(t, "GET", "/api/v1/approvals/"+deleteID, bobToken, ""); st == 403 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the reload did not apply within 10s")
		}
	}
	b.do("approve after the reload", chromedp.Click(chromedp.ID("approve")))
	b.messageIs("error", "approver bob is not in approval.default.approvers")
	if st, v := g.AdminRequest(t, "GET", "/api/v1/approvals/"+deleteID, aliceToken, ""); st != 200 || v["state"] != "awaiting_approval" {
		t.Errorf("the delete after bob's refused click: %d %v", st, v)
	}
	b.checkNoProblems()
}
