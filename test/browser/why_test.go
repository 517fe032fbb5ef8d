package browser

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tollgate-mcp/tollgate/internal/console"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// TestConsoleWhyAndAuditMode: the console says audit mode is on (a banner) and answers "why is
// this held?" for a request: the rule, the outcome and what would change it.
func TestConsoleWhyAndAuditMode(t *testing.T) {
	b := startBrowser(t)
	_, upURL := testkit.StartDemo(t)
	rules := strings.Replace(consoleRules, `    - {match: "delete_*", action: approve, approval: default}`,
		`    - {match: "delete_*", action: approve, approval: default}
    - {match: "drop_*", action: deny, mode: audit}`, 1)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, rules), map[string]string{"ALICE_TOKEN": aliceToken, "BOB_TOKEN": bobToken}, nil)
	g.WaitReady(t)
	origin := consoleOrigin(t, g)
	id := g.NewClient(t).CallTask(1, "delete_user", `{"user_id":"u-002"}`)

	b.do("open the console", chromedp.Navigate(origin+console.Path), chromedp.WaitVisible(chromedp.ID("token")))
	b.do("sign in", chromedp.SendKeys(chromedp.ID("token"), aliceToken), chromedp.Click(chromedp.ID("signin")))
	b.do("the pending request is listed", chromedp.WaitVisible(chromedp.CSS(rowSel(id))))
	b.waitFor("the audit mode banner", `!document.getElementById('audit-mode').hidden`)
	if txt := eval[string](b, `document.getElementById('audit-mode').textContent`); !strings.Contains(txt, "Audit mode is on") || !strings.Contains(txt, `"drop_*"`) {
		t.Errorf("banner: %q", txt)
	}
	b.do("open the request", clickJS(rowSel(id)), chromedp.WaitVisible(chromedp.ID("args")))
	b.do("ask why", clickJS("#d-why summary"))
	b.waitFor("the explanation", `document.getElementById('why').textContent.includes('What would change it')`)
	why := eval[string](b, `document.getElementById('why').textContent`)
	for _, want := range []string{`Rule: governance.rules[0] "delete_*" → approve`, "Outcome: approve", `is the first rule matching "delete_user"`} {
		if !strings.Contains(why, want) {
			t.Errorf("why lacks %q:\n%s", want, why)
		}
	}
	b.checkNoProblems()
}
