package browser

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tollgate-mcp/tollgate/internal/console"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// TestConsoleShowsEarlierRejection: a held call rejected (with a reason) and told to its
// requester, then made again, is a new pending approval whose detail in the console shows
// who rejected the same call before, when, which task and why — rendered, not only in the DOM.
// The re-request settled undecided (hold_budget), so nobody waits for it: the console says
// "Requester no longer waiting; the result will be kept for N" beside Approve, which stays
// enabled, and on its row. Fails on the console before this change (neither was shown).
func TestConsoleShowsEarlierRejection(t *testing.T) {
	b := startBrowser(t)
	_, upURL := testkit.StartDemo(t)
	rules := consoleRules + "tasks:\n  hold_budget: 300ms\n"
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, rules), map[string]string{"ALICE_TOKEN": aliceToken, "BOB_TOKEN": bobToken}, nil)
	g.WaitReady(t)
	origin := consoleOrigin(t, g)
	c := g.NewClient(t)
	args := map[string]any{"user_id": "u-003"}
	held := func(id int) string {
		t.Helper()
		m := c.Call(id, "delete_user", args, 0)
		tid, _ := testkit.Dig(m, "result", "_meta", "io.tollgate/approval", "taskId").(string)
		if !strings.HasPrefix(tid, "tg_") {
			t.Fatalf("want a held call settled awaiting approval, got %v", m)
		}
		return tid
	}
	first := held(1)
	if st, v := g.AdminRequest(t, "POST", "/api/v1/approvals/"+first+"/reject", bobToken, `{"reason":"wrong account"}`); st != 200 {
		t.Fatalf("reject: %d %v", st, v)
	}
	if m := c.Call(2, "delete_user", args, 0); !strings.Contains(strings.ToLower(fmt.Sprint(testkit.Dig(m, "error", "message"))), "reject") {
		t.Fatalf("the retry after the rejection: %v; want the rejection", m)
	}
	again := held(3)
	if again == first {
		t.Fatalf("the re-request was answered from %s", first)
	}

	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, v := g.AdminRequest(t, "GET", "/api/v1/approvals/"+again, aliceToken, ""); v["requesterNotWaiting"] != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("API: the settled re-request is not shown as unwaited within 10s")
		}
	}
	b.do("open the console and sign in", chromedp.Navigate(origin+console.Path), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), aliceToken), chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.CSS(rowSel(again))))
	b.do("open the re-request", clickJS(rowSel(again)), chromedp.WaitVisible(chromedp.ID("args")))
	b.waitFor("the detail of the re-request", `document.getElementById('d-id').textContent === `+jsString(again))
	// The dt/dd pair, found by its label, and its computed visibility.
	got := eval[string](b, `(() => { for (const dt of document.querySelectorAll('#d-fields dt')) {
		if (dt.textContent !== 'Rejected before') continue;
		const dd = dt.nextElementSibling, s = getComputedStyle(dd);
		if (s.display === 'none' || s.visibility === 'hidden' || dd.getClientRects().length === 0) return 'not rendered';
		return dd.textContent; } return 'absent'; })()`)
	for _, want := range []string{"by bob", first, "wrong account", " at "} {
		if !strings.Contains(got, want) {
			t.Errorf("'Rejected before' reads %q; want it to contain %q", got, want)
		}
	}
	checkNotWaitingRendered(t, b, again)
}

func checkNotWaitingRendered(t *testing.T, b *browser, id string) {
	t.Helper()
	on := b.rendered("d-not-waiting", "approve")
	if !on["d-not-waiting"] || !on["approve"] {
		t.Fatalf("rendered: %v; want the not-waiting line beside Approve", on)
	}
	if got := eval[string](b, `document.getElementById('d-not-waiting').textContent`); !strings.HasPrefix(got, "Requester no longer waiting; the result will be kept for ") {
		t.Errorf("not-waiting line %q", got)
	}
	if eval[bool](b, `document.getElementById('approve').disabled`) {
		t.Error("Approve is disabled for a call nobody waits for (it still runs, for the same call made again)")
	}
	badge := eval[bool](b, `(() => { const e = document.querySelector(`+jsString(rowSel(id)+" .not-waiting-badge")+`); if (!e) return false;
		const s = getComputedStyle(e); return s.display !== 'none' && e.getClientRects().length > 0 && e.textContent === 'requester not waiting'; })()`)
	if !badge {
		t.Error("the row does not show 'requester not waiting'")
	}
}
