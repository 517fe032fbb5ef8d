package browser

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tollgate-mcp/tollgate/internal/console"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// These tests check what the console renders, not only DOM properties: an element with the
// hidden attribute that a CSS display rule shows anyway is "hidden" to the DOM and on screen
// to the approver (issue 29: signed out, the page showed "signed in", Sign out and the table).

// visibleJS is true when the element with id is rendered: it exists, its computed style does not
// hide it, and it has a box on the page (false for itself or an ancestor with display none).
func visibleJS(id string) string {
	return `(() => { const e = document.getElementById(` + jsString(id) + `); if (!e) return false;
		const s = getComputedStyle(e); return s.display !== 'none' && s.visibility !== 'hidden' && e.getClientRects().length > 0; })()`
}

// rendered reports for each id whether it is on screen.
func (b *browser) rendered(ids ...string) map[string]bool {
	b.t.Helper()
	out := map[string]bool{}
	for _, id := range ids {
		out[id] = eval[bool](b, visibleJS(id))
	}
	return out
}

// signedOutOnScreen checks that only the sign-in form is on screen: no session line, no Sign
// out, no approvals table, no detail; and that the header bar's right half, where the session
// line sits, is painted in the bar's colour alone (a screenshot of the rendered pixels).
func (b *browser) signedOutOnScreen(when string) {
	b.t.Helper()
	for id, on := range b.rendered("session", "whoami", "groups", "signout", "app", "approvals", "detail", "summary") {
		if on {
			b.t.Errorf("%s: #%s is on screen", when, id)
		}
	}
	if on := b.rendered("login", "token", "signin"); !on["login"] || !on["token"] || !on["signin"] {
		b.t.Errorf("%s: the sign-in form is not on screen: %v", when, on)
	}
	if n := b.barRightInk(); n > 0 {
		b.t.Errorf("%s: %d pixels of the header's right half are not the bar colour: something is drawn where the session line sits", when, n)
	}
}

// barRightInk counts the pixels in the right half of the header bar (the session line's place)
// that differ from the bar's background colour #22303c.
func (b *browser) barRightInk() int {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	shot, err := chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS(".bar")))
	if err != nil {
		b.t.Fatalf("screenshot of the header bar: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		b.t.Fatalf("decoding the header screenshot: %v", err)
	}
	r := img.Bounds()
	ink := 0
	for y := r.Min.Y + 2; y < r.Max.Y-2; y++ {
		for x := r.Min.X + r.Dx()/2; x < r.Max.X-2; x++ {
			if !near(img, x, y, 0x22, 0x30, 0x3c) {
				ink++
			}
		}
	}
	return ink
}

func near(img image.Image, x, y int, wr, wg, wb uint8) bool {
	cr, cg, cb, _ := img.At(x, y).RGBA()
	d := func(c uint32, w uint8) int {
		v := int(c>>8) - int(w)
		if v < 0 {
			return -v
		}
		return v
	}
	return d(cr, wr) <= 6 && d(cg, wg) <= 6 && d(cb, wb) <= 6
}

// TestConsoleShowsWhatIsTrue: signed out, only the sign-in form is rendered (computed style and
// the header's pixels); signed in, the header names the approver and their groups; the detail
// of an approved call follows it to "completed" after it left the pending list (it used to
// keep saying "approved (working)"); and after sign-out the page is back to the form alone.
// Fails on the console before issue 29 (checked against the old static files).
func TestConsoleShowsWhatIsTrue(t *testing.T) {
	b := startBrowser(t)
	d, upURL := testkit.StartDemo(t)
	rules := consoleRules + "approver_groups:\n  finance: [alice]\n  oncall: [alice, bob]\n"
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, rules), map[string]string{"ALICE_TOKEN": aliceToken, "BOB_TOKEN": bobToken}, nil)
	g.WaitReady(t)
	origin := consoleOrigin(t, g)
	c := g.NewClient(t)
	id := c.CallTask(1, "delete_user", `{"user_id":"u-002"}`)

	b.do("open the console", chromedp.Navigate(origin+console.Path), chromedp.WaitVisible(chromedp.ID("token")))
	b.signedOutOnScreen("signed out")

	b.do("sign in as alice", chromedp.SendKeys(chromedp.ID("token"), aliceToken), chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.CSS(rowSel(id))))
	b.waitFor("the approver named", `document.getElementById('whoami').textContent === 'signed in as alice' &&
		document.getElementById('groups').textContent === 'groups: finance, oncall'`)
	for id, on := range b.rendered("session", "whoami", "groups", "signout", "app", "approvals") {
		if !on {
			t.Errorf("signed in: #%s is not on screen", id)
		}
	}
	if b.rendered("login")["login"] {
		t.Error("signed in: the sign-in form is still on screen")
	}
	if n := b.barRightInk(); n == 0 {
		t.Error("signed in: nothing drawn in the header's right half (the pixel check would pass anything)")
	}

	b.do("open the request", clickJS(rowSel(id)), chromedp.WaitVisible(chromedp.ID("args")))
	b.waitFor("the pending status", `document.getElementById('d-fields').textContent.includes('awaiting approval')`)
	b.do("approve", chromedp.Click(chromedp.ID("approve")))
	b.messageIs("ok", "Approved delete_user")
	// The call leaves the pending list; the detail must follow it to its end.
	b.waitFor("the detail says completed", `document.getElementById('d-fields').textContent.includes('Statuscompleted')`)
	if st, v := g.AdminRequest(t, "GET", "/api/v1/approvals/"+id, bobToken, ""); st != 200 || v["state"] != "completed" {
		t.Errorf("API: %d %v", st, v["state"])
	}
	if got := eval[string](b, `document.getElementById('d-fields').textContent`); strings.Contains(got, "working") || strings.Contains(got, "running") {
		t.Errorf("the detail of a completed call: %q", got)
	}
	if b.rendered("decide")["decide"] {
		t.Error("the decision buttons are on screen for a completed call")
	}
	if n := d.Calls("delete_user"); n != 1 {
		t.Errorf("delete_user ran %d times, want 1", n)
	}

	b.do("sign out", chromedp.Click(chromedp.ID("signout")), chromedp.WaitVisible(chromedp.ID("token")))
	b.signedOutOnScreen("after sign-out")
	b.checkNoProblems()
}
