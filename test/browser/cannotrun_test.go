//go:build unix

package browser

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tollgate-mcp/tollgate/internal/console"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// stdioFixture builds test/fixture/stdio (an MCP server on stdin/stdout) once.
var stdioFixture = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "tollgate-browser-stdio")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "stdio-fixture")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "../fixture/stdio").CombinedOutput(); err != nil {
		return "", fmt.Errorf("%v\n%s", err, out)
	}
	return bin, nil
})

// TestConsoleFlagsCallThatCannotRun: a pending write_note whose stdio server process was
// restarted is flagged in the console before anyone approves it: the row shows "cannot run",
// the detail shows why next to Approve (rendered: computed style and a box on the page), and
// Approve is disabled while Reject is not; a pending call on a live process shows neither.
// Fails on main (nothing is rendered; Approve is enabled).
func TestConsoleFlagsCallThatCannotRun(t *testing.T) {
	b := startBrowser(t)
	bin, err := stdioFixture()
	if err != nil {
		t.Fatalf("building the stdio fixture: %v", err)
	}
	cfg := fmt.Sprintf(`schema: 1
sources:
  - id: local
    kind: mcp
    command: %q
    env: {NOTES_FILE: %q}
governance:
  defaults: {action: forward}
  rules:
    - {match: "write_note", action: approve}
approval:
  default: {destination: {type: console}, timeout: 10m, on_timeout: deny}
approvers:
  - {name: alice, token_env: ALICE_TOKEN}
`, bin, filepath.Join(t.TempDir(), "notes"))
	g := testkit.StartGateway(t, cfg, map[string]string{"ALICE_TOKEN": aliceToken}, nil)
	g.WaitReady(t)
	origin := consoleOrigin(t, g)
	c, live := g.NewClient(t), g.NewClient(t)
	doomed := c.CallTask(1, "write_note", `{"text":"doomed"}`)
	fine := live.CallTask(1, "write_note", `{"text":"fine"}`)

	pid, err := strconv.Atoi(resultText(c.Call(2, "pid", map[string]any{}, 0)))
	if err != nil {
		t.Fatal("pid:", err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	resultText(g.NewClient(t).Call(1, "pid", map[string]any{}, 0)) // the server runs again, in a new process
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, v := g.AdminRequest(t, "GET", "/api/v1/approvals/"+doomed, aliceToken, "")
		if testkit.Dig(v, "cannotRun", "reason") == "stdio_process_exited" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("API: not flagged within 10s: %v", v)
		}
	}

	b.do("open the console and sign in", chromedp.Navigate(origin+console.Path), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), aliceToken), chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.CSS(rowSel(doomed))), chromedp.WaitVisible(chromedp.CSS(rowSel(fine))))
	badge := func(id string) bool {
		return eval[bool](b, `(() => { const e = document.querySelector(`+jsString(rowSel(id)+" .cannot-run-badge")+`); if (!e) return false;
			const s = getComputedStyle(e); return s.display !== 'none' && s.visibility !== 'hidden' && e.getClientRects().length > 0 && e.textContent === 'cannot run'; })()`)
	}
	if !badge(doomed) {
		t.Error("the doomed call's row does not show 'cannot run'")
	}
	if badge(fine) {
		t.Error("the live call's row shows 'cannot run'")
	}

	b.do("open the doomed request", clickJS(rowSel(doomed)), chromedp.WaitVisible(chromedp.ID("args")))
	b.waitFor("the detail of the doomed call", `document.getElementById('d-id').textContent === `+jsString(doomed))
	on := b.rendered("d-cannot-run", "approve", "reject")
	if !on["d-cannot-run"] || !on["approve"] || !on["reject"] {
		t.Fatalf("rendered: %v; want the flag beside Approve and Reject", on)
	}
	if got := eval[string](b, `document.getElementById('d-cannot-run').textContent`); !strings.Contains(got, "Cannot run any more") ||
		!strings.Contains(got, "stdio_process_exited") || !strings.Contains(got, "SessionGone") {
		t.Errorf("flag text %q", got)
	}
	// Next to the Approve button: the flag ends just above the buttons' row.
	if gap := eval[float64](b, `document.getElementById('approve').getBoundingClientRect().top - document.getElementById('d-cannot-run').getBoundingClientRect().bottom`); gap < 0 || gap > 40 {
		t.Errorf("the flag is %.0fpx from the Approve button; want it right above", gap)
	}
	if !eval[bool](b, `document.getElementById('approve').disabled`) || eval[bool](b, `document.getElementById('reject').disabled`) {
		t.Error("Approve must be disabled and Reject enabled for a call that cannot run")
	}

	b.do("open the live request", clickJS(rowSel(fine)))
	b.waitFor("the detail of the live call", `document.getElementById('d-id').textContent === `+jsString(fine))
	if b.rendered("d-cannot-run")["d-cannot-run"] {
		t.Error("the live call's detail shows the cannot-run flag")
	}
	if eval[bool](b, `document.getElementById('approve').disabled`) {
		t.Error("Approve is disabled for a call that can run")
	}
}

// resultText is the first text content of a tools/call result.
func resultText(m map[string]any) string {
	if c, ok := testkit.Dig(m, "result", "content").([]any); ok && len(c) > 0 {
		if first, ok := c[0].(map[string]any); ok {
			s, _ := first["text"].(string)
			return s
		}
	}
	return ""
}
