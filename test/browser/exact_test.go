package browser

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tollgate-mcp/tollgate/internal/console"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// TestConsoleShowsExactArguments: the console showed arguments through JSON.parse and
// JSON.stringify, so an approver read account 9007199254740992 while the upstream was sent
// 9007199254740993 (and 1.0 as 1, 1E400 as 1.7976931348623157e+308, 30 digits in exponent
// form). It must show the call exactly as it will be sent.
func TestConsoleShowsExactArguments(t *testing.T) {
	b := startBrowser(t)
	_, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, consoleRules), map[string]string{"ALICE_TOKEN": aliceToken, "BOB_TOKEN": bobToken}, nil)
	g.WaitReady(t)
	origin := consoleOrigin(t, g)
	id := g.NewClient(t).CallTask(1, "delete_user",
		`{"user_id":"u-9","account_id":9007199254740993,"ratio":1.0,"huge":1E400,"big":123456789012345678901234567890,"password":"p"}`)

	b.do("open the console", chromedp.Navigate(origin+console.Path), chromedp.WaitVisible(chromedp.ID("token")))
	b.do("sign in", chromedp.SendKeys(chromedp.ID("token"), aliceToken), chromedp.Click(chromedp.ID("signin")))
	b.do("open the request", chromedp.WaitVisible(chromedp.CSS(rowSel(id))), clickJS(rowSel(id)), chromedp.WaitVisible(chromedp.ID("args")))
	args := eval[string](b, `document.getElementById('args').textContent`)
	for _, want := range []string{`"account_id": 9007199254740993`, `"ratio": 1.0`, `"huge": 1E400`, `"big": 123456789012345678901234567890`, `"password": "[REDACTED]"`} {
		if !strings.Contains(args, want) {
			t.Errorf("the console shows\n%s\nwithout %s", args, want)
		}
	}
	b.checkNoProblems()
}
