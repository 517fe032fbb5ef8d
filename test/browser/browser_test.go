// Package browser drives the approval console (internal/console) in a real headless Chromium
// through the Chrome DevTools Protocol (github.com/chromedp/chromedp), against a real Tollgate
// in front of the demo MCP server. It needs /usr/bin/chromium (Debian: apt-get install -y
// chromium) and skips loudly without it.
package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/tollgate-mcp/tollgate/internal/console"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

const (
	chromiumPath = "/usr/bin/chromium"
	// stepTimeout bounds every browser wait.
	stepTimeout = 10 * time.Second
)

// browser is one headless Chromium tab.
type browser struct {
	t        *testing.T
	ctx      context.Context
	mu       sync.Mutex
	problems []string // uncaught exceptions, CSP / Trusted Types violations
}

// startBrowser launches Chromium with a throwaway profile. The tab (and the browser) close
// at test cleanup; on failure a screenshot is written to the test's artifact directory first.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Skipf("\n\n*** SKIPPING BROWSER TEST: %s not found (%v).\n*** Install it with: DEBIAN_FRONTEND=noninteractive apt-get install -y chromium\n", chromiumPath, err)
	}
	profile := t.TempDir()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	b := &browser{t: t}
	tabCtx, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithListener(b.listen))
	t.Cleanup(cancelTab)
	b.ctx = tabCtx

	// The first Run starts the browser and must not carry a timeout (it would stop the
	// browser with it), so bound it from outside.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(tabCtx) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("starting %s: %v", chromiumPath, err)
		}
	case <-time.After(20 * time.Second):
		cancelAlloc()
		t.Fatalf("%s did not start within 20s", chromiumPath)
	}
	t.Cleanup(b.screenshotOnFailure)
	return b
}

// listen records what the page must never produce. It runs on chromedp's event goroutine.
func (b *browser) listen(ev any) {
	var p string
	switch e := ev.(type) {
	case *runtime.EventExceptionThrown:
		p = "uncaught exception: " + e.ExceptionDetails.Text
		if e.ExceptionDetails.Exception != nil {
			p += " " + e.ExceptionDetails.Exception.Description
		}
	case *log.EventEntryAdded:
		// Network entries are the expected 401/403/409 replies; anything from security,
		// violation or javascript sources means the page broke its CSP or threw.
		switch e.Entry.Source {
		case log.EntrySourceSecurity, log.EntrySourceViolation, log.EntrySourceJavascript:
			p = fmt.Sprintf("browser log (%s/%s): %s", e.Entry.Source, e.Entry.Level, e.Entry.Text)
		}
	case *runtime.EventConsoleAPICalled:
		if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
			p = "console." + string(e.Type) + " called by the page"
		}
	}
	if p != "" {
		b.mu.Lock()
		b.problems = append(b.problems, p)
		b.mu.Unlock()
	}
}

func (b *browser) checkNoProblems() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		b.t.Errorf("page problem: %s", p)
	}
}

func (b *browser) screenshotOnFailure() {
	if !b.t.Failed() {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot failed: %v", err)
		return
	}
	// ArtifactDir is the test's temp dir; run with -artifacts to keep the file.
	path := filepath.Join(b.t.ArtifactDir(), "console-failure.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Logf("writing screenshot: %v", err)
		return
	}
	b.t.Logf("screenshot of the failing page: %s (go test -artifacts keeps it)", path)
}

// do runs browser steps, each call bounded by stepTimeout.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("browser: %s: %v\n%s", what, err, b.banner())
	}
}

// clickJS clicks the element sel matches from JavaScript, once it exists. The console redraws
// its rows and summary counts when it polls, so a node found first and clicked after (as
// chromedp.Click does, by node id) may be gone by then ("Could not find node with given id");
// finding and clicking it in one script cannot miss.
func clickJS(sel string) chromedp.Action[chromedp.Void] {
	click := chromedp.Evaluate[bool](`(() => { const e = document.querySelector(` + jsString(sel) + `); if (!e) return false; e.click(); return true; })()`)
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		for {
			ok, err := click(ctx, t)
			if err != nil || ok {
				return chromedp.Void{}, err
			}
			select {
			case <-ctx.Done():
				return chromedp.Void{}, ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// eval evaluates a JavaScript expression through DevTools. (chromedp.Poll is not usable here:
// it compiles its predicate with new Function, which the console's CSP rightly forbids.)
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("browser: evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor polls a JavaScript predicate until it is true, for at most stepTimeout.
func (b *browser) waitFor(what, expr string) {
	b.t.Helper()
	deadline := time.Now().Add(stepTimeout)
	for {
		ctx, cancel := context.WithDeadline(b.ctx, deadline)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+expr+")"))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("browser: waiting for %s: not within %s (last error: %v)\n%s", what, stepTimeout, err, b.banner())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// banner is the console's message line, for failure output.
func (b *browser) banner() string {
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.getElementById('message')||{}).textContent||''`))
	if err != nil {
		return ""
	}
	return "console message: " + s
}

func (b *browser) messageIs(kind, contains string) {
	b.t.Helper()
	b.waitFor(fmt.Sprintf("a %s message containing %q", kind, contains),
		fmt.Sprintf(`(() => { const m = document.getElementById('message');
			return !m.hidden && m.dataset.kind === %q && m.textContent.includes(%q); })()`, kind, contains))
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func rowSel(taskID string) string { return `#approvals tbody tr[data-task-id="` + taskID + `"]` }

// consoleOrigin returns the origin that serves the console for g. Once the admin listener
// serves GET /approvals (internal/server wiring) that is the admin address itself; until then
// the test serves console.Handler() from its own origin and reverse-proxies /api/ to the real
// admin listener, so the page still talks to the real approvals API on its own origin.
func consoleOrigin(t *testing.T, g *testkit.Gateway) string {
	t.Helper()
	resp, err := testkit.HTTPClient.Get(g.Admin + console.Path)
	if err == nil {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode == 200 && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") &&
			strings.Contains(string(body), "/approvals/console.js") {
			t.Logf("the admin listener serves the console at %s%s", g.Admin, console.Path)
			return g.Admin
		}
	}
	t.Logf("the admin listener does not serve GET %s yet: serving console.Handler() from a test origin that proxies /api/ to %s", console.Path, g.Admin)
	admin, _ := url.Parse(g.Admin)
	mux := http.NewServeMux()
	mux.Handle(console.Path, console.Handler())
	mux.Handle(console.Path+"/", console.Handler())
	mux.Handle("/api/", httputil.NewSingleHostReverseProxy(admin))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

const consoleRules = `governance:
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve, approval: default}
approval:
  default:
    destination: {type: console}
    timeout: 10m
    on_timeout: deny
    redact_fields: [password]
approvers:
  - {name: alice, token_env: ALICE_TOKEN}
  - {name: bob, token_env: BOB_TOKEN}
`

const (
	aliceToken = "alice-console-token"
	bobToken   = "bob-console-token"
)

// TestApprovalConsole drives the console like an approver: a wrong token, sign-in, a held
// delete_user with a redacted password, approve with a reason, reject without one (optional, as
// in the API and the CLI), a
// decision that loses the race (409), and the past-decision filter. Every outcome is checked
// through the API and MCP as well, not only on the page.
func TestApprovalConsole(t *testing.T) {
	start := time.Now()
	b := startBrowser(t)
	d, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, consoleRules), map[string]string{"ALICE_TOKEN": aliceToken, "BOB_TOKEN": bobToken}, nil)
	g.WaitReady(t)
	origin := consoleOrigin(t, g)
	c := g.NewClient(t)

	const secret = "hunter2-Sup3rSecret"
	approveID := c.CallTask(1, "delete_user", `{"user_id":"u-002","password":"`+secret+`"}`)

	// Wrong token: the 401 is spelled out and the sign-in form comes back.
	b.do("open the console", chromedp.Navigate(origin+console.Path), chromedp.WaitVisible(chromedp.ID("token")))
	b.do("enter a wrong token", chromedp.SendKeys(chromedp.ID("token"), "not-the-token"), chromedp.Click(chromedp.ID("signin")))
	b.messageIs("error", "401")
	b.waitFor("the sign-in form again", `!document.getElementById('login').hidden && document.getElementById('app').hidden`)
	if eval[bool](b, `sessionStorage.getItem('tollgate.adminToken') === null`) != true {
		t.Error("a refused token stayed in sessionStorage")
	}

	// Sign in; the pending request appears with its tool name.
	b.do("sign in", chromedp.SendKeys(chromedp.ID("token"), aliceToken), chromedp.Click(chromedp.ID("signin")))
	b.do("the pending request is listed", chromedp.WaitVisible(chromedp.CSS(rowSel(approveID))))
	if row := eval[string](b, `document.querySelector(`+jsString(rowSel(approveID))+`).textContent`); !strings.Contains(row, "delete_user") || !strings.Contains(row, "default") {
		t.Errorf("row does not show tool and workflow: %q", row)
	}
	if !eval[bool](b, `sessionStorage.getItem('tollgate.adminToken') === `+jsString(aliceToken)) {
		t.Error("token not kept in sessionStorage")
	}
	if eval[bool](b, `location.href.includes(`+jsString(aliceToken)+`) || localStorage.length > 0 || document.getElementById('token').value !== ''`) {
		t.Error("token leaked into the URL, localStorage or the input field")
	}

	// Detail: redacted arguments, never the secret anywhere on the page.
	b.do("open the request", clickJS(rowSel(approveID)), chromedp.WaitVisible(chromedp.ID("args")))
	args := eval[string](b, `document.getElementById('args').textContent`)
	if !strings.Contains(args, `"password": "[REDACTED]"`) || !strings.Contains(args, `"user_id": "u-002"`) {
		t.Errorf("arguments shown: %s", args)
	}
	if eval[bool](b, `document.documentElement.outerHTML.includes(`+jsString(secret)+`)`) {
		t.Error("the redacted secret reached the page")
	}

	// Approve with a reason.
	b.do("approve", chromedp.SendKeys(chromedp.ID("reason"), "ticket OPS-42"), chromedp.Click(chromedp.ID("approve")))
	b.messageIs("ok", "Approved delete_user")
	st, view := g.AdminRequest(t, "GET", "/api/v1/approvals/"+approveID, bobToken, "")
	if st != 200 || testkit.Dig(view, "decision", "approved") != true || testkit.Dig(view, "decision", "by") != "alice" || testkit.Dig(view, "decision", "reason") != "ticket OPS-42" {
		t.Errorf("API after UI approve: %d %v", st, view)
	}
	res := c.TaskRPC(2, "tasks/result", approveID).Message(t)
	content, _ := json.Marshal(testkit.Dig(res, "result", "content"))
	if !strings.Contains(string(content), "u-002") || testkit.Dig(res, "result", "isError") == true {
		t.Errorf("tasks/result after approval: %v", res)
	}
	if n := d.Calls("delete_user"); n != 1 {
		t.Errorf("delete_user executed %d times, want 1", n)
	}
	if st, view := g.AdminRequest(t, "GET", "/api/v1/approvals/"+approveID, bobToken, ""); st != 200 || view["state"] != "completed" {
		t.Errorf("approved task state: %d %v", st, view["state"])
	}

	// Reject without a reason: optional in the console as in the API and the CLI.
	rejectID := c.CallTask(3, "delete_user", `{"user_id":"u-003","password":"`+secret+`"}`)
	b.do("the second request is listed", chromedp.WaitVisible(chromedp.CSS(rowSel(rejectID))))
	b.do("open the second request", clickJS(rowSel(rejectID)))
	b.waitFor("the detail of the second request", `document.getElementById('d-id').textContent === `+jsString(rejectID))
	b.do("reject without a reason", chromedp.Click(chromedp.ID("reject")))
	b.messageIs("ok", "Rejected delete_user")
	st, view = g.AdminRequest(t, "GET", "/api/v1/approvals/"+rejectID, bobToken, "")
	if st != 200 || view["state"] != "rejected" || testkit.Dig(view, "decision", "by") != "alice" || testkit.Dig(view, "decision", "reason") != nil {
		t.Errorf("API after UI reject: %d %v", st, view)
	}
	if code, name := testkit.ErrorOf(c.TaskRPC(4, "tasks/result", rejectID).Message(t)); code != -32007 || name != "ApprovalRejected" {
		t.Errorf("tasks/result after rejection: %v %q", code, name)
	}
	if n := d.Calls("delete_user"); n != 1 {
		t.Errorf("rejected call executed: delete_user ran %d times", n)
	}

	// Someone else decides first: the page shows the standing decision (409).
	lateID := c.CallTask(5, "delete_user", `{"user_id":"u-004"}`)
	b.do("the third request is listed", chromedp.WaitVisible(chromedp.CSS(rowSel(lateID))))
	b.do("open the third request", clickJS(rowSel(lateID)))
	b.waitFor("the detail of the third request", `document.getElementById('d-id').textContent === `+jsString(lateID))
	if st, _ := g.AdminRequest(t, "POST", "/api/v1/approvals/"+lateID+"/approve", bobToken, `{"reason":"bob was faster"}`); st != 200 {
		t.Fatalf("bob's approval: %d", st)
	}
	b.do("reject too late", chromedp.SendKeys(chromedp.ID("reason"), "too late"), chromedp.Click(chromedp.ID("reject")))
	b.messageIs("warn", "409")
	b.messageIs("warn", "Approved by bob")
	b.messageIs("warn", "bob was faster")

	// Past decisions.
	eval[bool](b, `(() => { const f = document.getElementById('filter'); f.value = 'rejected'; f.dispatchEvent(new Event('change')); return true; })()`)
	b.do("the rejected request is listed", chromedp.WaitVisible(chromedp.CSS(rowSel(rejectID))))
	if eval[bool](b, `!!document.querySelector(`+jsString(rowSel(approveID))+`)`) {
		t.Error("the rejected filter lists an approved request")
	}
	b.do("open the rejected request", clickJS(rowSel(rejectID)))
	b.waitFor("the decision of the rejected request", `document.getElementById('d-decision-text').textContent.includes('Rejected by alice') && document.getElementById('approve').disabled`)

	b.do("sign out", chromedp.Click(chromedp.ID("signout")), chromedp.WaitVisible(chromedp.ID("token")))
	if !eval[bool](b, `sessionStorage.length === 0`) {
		t.Error("sign-out left the token in sessionStorage")
	}
	b.checkNoProblems()
	t.Logf("browser test took %s", time.Since(start).Round(time.Millisecond))
}

// TestConsoleAgainstHostileData serves the console in front of a stub API whose data is
// markup, and which refuses decisions with 403 (self-approval), as the real API cannot be
// made to in a test without an authenticated requester identity.
func TestConsoleAgainstHostileData(t *testing.T) {
	b := startBrowser(t)
	const evil = `<img src=x id=pwned onerror="window.pwned=1">`
	now := time.Now().UTC()
	view := map[string]any{
		"taskId": "tg_hostile", "tool": evil, "workflow": "</td><script>window.pwned=2</script>",
		"arguments": map[string]any{"note": `</pre><script>window.pwned=3</script>` + evil},
		"argsHash":  "abc", "state": "awaiting_approval", "status": "working",
		"requestedBy": evil, "owner": "0123456789ab",
		"createdAt": now.Add(-90 * time.Second), "updatedAt": now, "approvalDeadline": now.Add(5 * time.Minute),
	}
	mux := http.NewServeMux()
	mux.Handle(console.Path, console.Handler())
	mux.Handle(console.Path+"/", console.Handler())
	mux.HandleFunc("/api/v1/approvals", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer stub" || r.URL.Query().Get("status") != "pending" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"approvals": []any{view}})
	})
	mux.HandleFunc("/api/v1/approvals/summary", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		group := map[string]any{"top": []any{map[string]any{"key": evil, "pending": 1}}, "otherKeys": 0, "otherPending": 0}
		_ = json.NewEncoder(w).Encode(map[string]any{"pending": 1, "owners": group, "tools": group, "workflows": group})
	})
	mux.HandleFunc("POST /api/v1/approvals/{id}/approve", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"error":"self_approval","message":"the requester of a call cannot decide on it"}`)
	})
	// A pin whose tool name, reason, digest and diff are markup (an upstream that is not Go's
	// encoder writes < raw).
	mux.HandleFunc("GET /api/v1/pins", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"pins": []any{map[string]any{
			"tool": evil, "status": "quarantined", "reason": evil, "digest": evil, "accepted_digest": evil, "changes": 2,
			"diff": []any{map[string]any{"field": evil, "lines": []string{"- " + evil, "+ </pre><script>window.pwned=4</script>"}}},
		}}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	b.do("open and sign in", chromedp.Navigate(srv.URL+console.Path), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), "stub"), chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.CSS(rowSel("tg_hostile"))), clickJS(rowSel("tg_hostile")),
		chromedp.WaitVisible(chromedp.ID("args")))
	if got := eval[string](b, `document.getElementById('args').textContent`); !strings.Contains(got, `<script>window.pwned=3</script>`) {
		t.Errorf("arguments not shown as text: %s", got)
	}
	if got := eval[string](b, `document.querySelector(`+jsString(rowSel("tg_hostile"))+`).textContent`); !strings.Contains(got, evil) {
		t.Errorf("tool name not shown as text: %s", got)
	}
	b.waitFor("the hostile summary", `document.getElementById('summary-tools').textContent.includes(`+jsString(evil+": 1 pending")+`)`)
	b.waitFor("the hostile pin as text", `document.getElementById('pins').textContent.includes('window.pwned=4') && document.getElementById('pins').textContent.includes(`+jsString(evil)+`)`)
	if eval[bool](b, `!!document.getElementById('pwned') || document.querySelectorAll('script').length !== 1 || 'pwned' in window`) {
		t.Error("hostile data became markup")
	}
	b.do("approve", chromedp.Click(chromedp.ID("approve")))
	b.messageIs("error", "403")
	b.messageIs("error", "requester of a call cannot approve or reject it")
	b.checkNoProblems()
}

// TestConsoleReachesBuriedApprovals: 150 pending requests of one MCP session used to hide a
// later request of another session from the console (oldest first, 100 shown, no paging), and
// a hidden request times out and is denied. Now it is on the first page (newest first), on the
// second page oldest first, one click away through the per-owner counts, and decidable there.
func TestConsoleReachesBuriedApprovals(t *testing.T) {
	start := time.Now()
	b := startBrowser(t)
	_, upURL := testkit.StartDemo(t)
	cfg := consoleRules + "tasks:\n  quotas: {max_pending_per_owner: 1000}\n"
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, cfg), map[string]string{"ALICE_TOKEN": aliceToken, "BOB_TOKEN": bobToken}, nil)
	g.WaitReady(t)
	origin := consoleOrigin(t, g)

	const flood = 150
	flooder := g.NewClient(t)
	var floodIDs []string
	for i := range flood {
		floodIDs = append(floodIDs, flooder.CallTask(i+1, "delete_user", fmt.Sprintf(`{"user_id":"u-%d"}`, i)))
	}
	victimID := g.NewClient(t).CallTask(1, "delete_user", `{"user_id":"u-victim"}`)
	owner := func(id string) string {
		st, v := g.AdminRequest(t, "GET", "/api/v1/approvals/"+id, bobToken, "")
		o, _ := v["owner"].(string)
		if st != 200 || o == "" {
			t.Fatalf("owner of %s: %d %v", id, st, v)
		}
		return o
	}
	victimOwner, flooderOwner := owner(victimID), owner(floodIDs[0])
	rows := `document.querySelectorAll('#approvals tbody tr').length`

	b.do("open and sign in", chromedp.Navigate(origin+console.Path), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), aliceToken), chromedp.Click(chromedp.ID("signin")))
	b.do("the other session's request is on the first page", chromedp.WaitVisible(chromedp.CSS(rowSel(victimID))))

	// Per-owner counts: the approver sees both owners and how many each has pending.
	ownerChip := func(o string) string { return `#summary-owners button[data-key="` + o + `"]` }
	b.waitFor("per-owner counts", `document.querySelector(`+jsString(ownerChip(victimOwner))+`)?.textContent === `+jsString("owner "+victimOwner+": 1 pending")+
		` && document.querySelector(`+jsString(ownerChip(flooderOwner))+`)?.textContent === `+jsString(fmt.Sprintf("owner %s: %d pending", flooderOwner, flood)))
	b.waitFor("the total", `document.getElementById('summary-total').textContent.startsWith('151 pending')`)

	// Oldest first the request is the 151st: page 2, and Previous comes back.
	eval[bool](b, `(() => { const s = document.getElementById('sort'); s.value = 'oldest'; s.dispatchEvent(new Event('change')); return true; })()`)
	b.do("oldest first, page 1", chromedp.WaitVisible(chromedp.CSS(rowSel(floodIDs[0]))))
	b.waitFor("a full first page without the request", rows+` === 100 && !document.querySelector(`+jsString(rowSel(victimID))+`) && !document.getElementById('next').disabled`)
	b.do("next page", chromedp.Click(chromedp.ID("next")), chromedp.WaitVisible(chromedp.CSS(rowSel(victimID))))
	b.waitFor("page 2 is the last", rows+` === 51 && document.getElementById('page').textContent === 'Page 2 (last)' && document.getElementById('next').disabled`)
	b.do("previous page", chromedp.Click(chromedp.ID("prev")), chromedp.WaitVisible(chromedp.CSS(rowSel(floodIDs[0]))))
	b.waitFor("page 1 again", `document.getElementById('page').textContent === 'Page 1' && document.getElementById('prev').disabled`)

	// One click on the owner's count shows only that owner's requests; decide from there.
	b.do("filter by the owner", clickJS(ownerChip(victimOwner)), chromedp.WaitVisible(chromedp.CSS(rowSel(victimID))))
	b.waitFor("only the owner's request", rows+` === 1 && document.getElementById('f-owner').value === `+jsString(victimOwner))
	b.do("open and approve it", clickJS(rowSel(victimID)), chromedp.WaitVisible(chromedp.ID("args")),
		chromedp.Click(chromedp.ID("approve")))
	b.messageIs("ok", "Approved delete_user")
	if st, v := g.AdminRequest(t, "GET", "/api/v1/approvals/"+victimID, bobToken, ""); st != 200 || testkit.Dig(v, "decision", "by") != "alice" {
		t.Errorf("the buried request after the console approved it: %d %v", st, v)
	}

	// A filter the API refuses is spelled out, and clearing it lists again.
	b.do("a bad tool glob", chromedp.SendKeys(chromedp.ID("f-tool"), "delete_["), chromedp.Click(chromedp.ID("f-apply")))
	b.messageIs("error", "not a valid glob")
	b.do("clear the filters", chromedp.Click(chromedp.ID("f-clear")), chromedp.WaitVisible(chromedp.CSS(rowSel(floodIDs[0]))))
	b.waitFor("the error cleared", `document.getElementById('message').hidden`)
	b.checkNoProblems()
	t.Logf("browser test took %s", time.Since(start).Round(time.Millisecond))
}
