package browser

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tollgate-mcp/tollgate/internal/console"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// TestConsoleOpensSummarisedRequest: the list summarises arguments over 4 KiB
// (argumentsTruncated); opening such a request fetches its detail and shows the arguments
// whole before it can be approved.
func TestConsoleOpensSummarisedRequest(t *testing.T) {
	b := startBrowser(t)
	_, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, consoleRules), map[string]string{"ALICE_TOKEN": aliceToken, "BOB_TOKEN": bobToken}, nil)
	g.WaitReady(t)
	origin := consoleOrigin(t, g)
	note := strings.Repeat("n", 10<<10) + "THE-END"
	id := g.NewClient(t).CallTask(1, "delete_user", `{"user_id":"u-002","note":"`+note+`"}`)

	b.do("open the console", chromedp.Navigate(origin+console.Path), chromedp.WaitVisible(chromedp.ID("token")))
	b.do("sign in", chromedp.SendKeys(chromedp.ID("token"), aliceToken), chromedp.Click(chromedp.ID("signin")))
	b.do("the pending request is listed", chromedp.WaitVisible(chromedp.CSS(rowSel(id))))
	code, list := g.AdminRequest(t, "GET", "/api/v1/approvals", aliceToken, "")
	rows, _ := list["approvals"].([]any)
	if code != 200 || len(rows) != 1 || rows[0].(map[string]any)["argumentsTruncated"] != true {
		t.Fatalf("the list does not summarise the request: %d %v", code, list)
	}
	b.do("open the request", clickJS(rowSel(id)), chromedp.WaitVisible(chromedp.ID("args")))
	b.waitFor("the whole arguments", `document.getElementById('args').textContent.includes('THE-END')`)
	b.waitFor("approve enabled", `!document.getElementById('approve').disabled`)
	b.checkNoProblems()
}
