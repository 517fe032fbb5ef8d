package browser

import (
	"context"
	"crypto/sha1"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tollgate-mcp/tollgate/internal/console"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// loginProxy stands in for oauth2-proxy in front of the admin listener (an oauth2-proxy cannot
// sign anyone in here without an identity provider): GET /oauth2/start?user=U&rd=PATH plays the
// identity provider's round trip and sets a session cookie; every other request needs that
// cookie (else 401, as oauth2-proxy answers a JSON request) and is forwarded with the user's
// X-Auth-Request-User/-Email/-Groups, the client's own copies removed — what
// oauth2-proxy --set-xauthrequest behind ingress-nginx's auth_request does. It connects from
// 127.0.0.2, so the gateway can trust it (server.admin_auth.trusted_proxy: 127.0.0.2/32) and
// still see direct requests from 127.0.0.1 as someone else.
type loginProxy struct {
	URL string

	mu       sync.Mutex
	sessions map[string]string // cookie → user
}

var directory = map[string]struct{ email, groups string }{
	"alice":   {"alice@example.com", "finance,sre"},
	"mallory": {"mallory@example.com", "finance"},
}

func startLoginProxy(t *testing.T, admin string) *loginProxy {
	t.Helper()
	target, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	p := &loginProxy{sessions: map[string]string{}}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{DialContext: (&net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 5 * time.Second}).DialContext}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /oauth2/start", func(w http.ResponseWriter, r *http.Request) {
		user := r.URL.Query().Get("user")
		if _, ok := directory[user]; !ok {
			http.Error(w, "unknown user", http.StatusForbidden)
			return
		}
		cookie := "session-" + user
		p.mu.Lock()
		p.sessions[cookie] = user
		p.mu.Unlock()
		http.SetCookie(w, &http.Cookie{Name: "_oauth2_proxy", Value: cookie, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
		http.Redirect(w, r, r.URL.Query().Get("rd"), http.StatusFound)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie("_oauth2_proxy")
		p.mu.Lock()
		user := ""
		if err == nil {
			user = p.sessions[c.Value]
		}
		p.mu.Unlock()
		if user == "" {
			http.Error(w, "sign in first", http.StatusUnauthorized)
			return
		}
		for _, h := range []string{"X-Auth-Request-User", "X-Auth-Request-Email", "X-Auth-Request-Groups"} {
			r.Header.Del(h)
		}
		r.Header.Set("X-Auth-Request-User", user)
		r.Header.Set("X-Auth-Request-Email", directory[user].email)
		r.Header.Set("X-Auth-Request-Groups", directory[user].groups)
		rp.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

const signInRules = `governance:
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve, approval: default}
approval:
  default:
    destination: {type: console}
    timeout: 10m
    on_timeout: deny
server:
  admin_auth:
    trusted_proxy: [127.0.0.2/32]
approvers:
  - {name: alice, email: alice@example.com}
  - {name: bob, token_env: BOB_TOKEN}
`

// TestConsoleBehindLoginProxy: signed in as alice by the login proxy, the console asks for no
// token, lists the held call and approves it; the decision is alice's and the call runs once.
// A user the proxy signs in who is not an approver gets the sign-in form with the gateway's
// 403; the proxy's headers sent straight to the admin listener are refused and counted.
func TestConsoleBehindLoginProxy(t *testing.T) {
	b := startBrowser(t)
	d, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, signInRules), map[string]string{"BOB_TOKEN": bobToken}, nil)
	g.WaitReady(t)
	proxy := startLoginProxy(t, g.Admin)
	c := g.NewClient(t)
	taskID := c.CallTask(1, "delete_user", `{"user_id":"u-002"}`)

	b.do("sign in at the login proxy as alice and open the console",
		chromedp.Navigate(proxy.URL+"/oauth2/start?user=alice&rd="+url.QueryEscape(console.Path)))
	b.do("the held call is listed without a token", chromedp.WaitVisible(chromedp.CSS(rowSel(taskID))))
	if who := eval[string](b, `document.getElementById('whoami').textContent`); who != "signed in as alice (login proxy)" {
		t.Errorf("whoami %q", who)
	}
	if !eval[bool](b, `document.getElementById('login').hidden && document.getElementById('signout').hidden && sessionStorage.length === 0`) {
		t.Error("the console asked for a token, offered a sign-out or stored something")
	}
	b.do("open the request", clickJS(rowSel(taskID)))
	b.waitFor("the detail", `document.getElementById('d-id').textContent === `+jsString(taskID))
	b.do("approve", chromedp.Click(chromedp.ID("approve")))
	b.messageIs("ok", "Approved delete_user")

	st, view := g.AdminRequest(t, "GET", "/api/v1/approvals/"+taskID, bobToken, "")
	if st != 200 || testkit.Dig(view, "decision", "by") != "alice" || testkit.Dig(view, "decision", "approved") != true {
		t.Errorf("after the console's approval: %d %v", st, view)
	}
	if res := c.TaskRPC(2, "tasks/result", taskID).Message(t); testkit.Dig(res, "result", "isError") == true {
		t.Errorf("tasks/result: %v", res)
	}
	if n := d.Calls("delete_user"); n != 1 {
		t.Errorf("delete_user ran %d times, want 1", n)
	}

	// Signed in by the proxy, but not an approver: the gateway's 403 and the token form.
	b.do("sign in at the login proxy as mallory",
		chromedp.Navigate(proxy.URL+"/oauth2/start?user=mallory&rd="+url.QueryEscape(console.Path)))
	b.messageIs("error", "403")
	b.messageIs("error", "not an approver")
	b.waitFor("the token form", `!document.getElementById('login').hidden && document.getElementById('app').hidden`)
	b.checkNoProblems()

	// The proxy's headers straight to the admin listener (from 127.0.0.1, not the proxy).
	req, _ := http.NewRequestWithContext(context.Background(), "GET", g.Admin+"/api/v1/approvals", nil)
	req.Header.Set("X-Auth-Request-User", "alice")
	req.Header.Set("X-Forwarded-For", "127.0.0.2")
	resp, err := testkit.HTTPClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "untrusted_proxy_header") {
		t.Errorf("direct request with the proxy's header: %d %s", resp.StatusCode, body)
	}
	resp, err = testkit.HTTPClient.Get(g.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `tollgate_limit_refusals_total{limit="admin_proxy_header"} 1`) {
		t.Errorf("refusal not counted in tollgate_limit_refusals_total{limit=\"admin_proxy_header\"}")
	}
}

// oauth2ProxyEnv names an oauth2-proxy binary for TestConsoleBehindOAuth2Proxy, e.g. built with
// GOBIN=/tmp/o2p go install github.com/oauth2-proxy/oauth2-proxy/v7@latest.
const oauth2ProxyEnv = "OAUTH2_PROXY_BIN"

// TestConsoleBehindOAuth2Proxy is TestConsoleBehindLoginProxy with the real oauth2-proxy in
// front of the admin listener, in its reverse-proxy mode (X-Forwarded-User/-Email/-Groups). It
// signs users in from an htpasswd file through its own form, so it runs with no identity
// provider (its google provider is configured with dummy credentials and never contacted).
func TestConsoleBehindOAuth2Proxy(t *testing.T) {
	bin := os.Getenv(oauth2ProxyEnv)
	if bin == "" {
		// scripts/ensure-deps.sh (make test) builds it here.
		if p, err := filepath.Abs("../../.tools/bin/oauth2-proxy"); err == nil {
			if _, err := os.Stat(p); err == nil {
				bin = p
			}
		}
	}
	if bin == "" {
		t.Skipf("\n\n*** SKIPPING: no oauth2-proxy: run scripts/ensure-deps.sh (make deps), or set %s to an oauth2-proxy binary\n", oauth2ProxyEnv)
	}
	b := startBrowser(t)
	d, upURL := testkit.StartDemo(t)
	// Finance approves payments, SRE deletes; alice is in neither approver_groups entry: only
	// oauth2-proxy's groups (--htpasswd-user-group=finance) make her a finance approver.
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, oauth2ProxyRules), map[string]string{"BOB_TOKEN": bobToken}, nil)
	g.WaitReady(t)

	dir := t.TempDir()
	sum := sha1.Sum([]byte("alice-password-1")) // htpasswd {SHA}: good enough for a throwaway test user
	htpasswd := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(htpasswd, []byte("alice:{SHA}"+base64.StdEncoding.EncodeToString(sum[:])+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testkit.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--http-address="+addr, "--upstream="+g.Admin+"/",
		"--provider=google", "--client-id=unused", "--client-secret=unused",
		"--cookie-secret=0123456789abcdef0123456789abcdef", "--cookie-secure=false", "--email-domain=*",
		"--htpasswd-file="+htpasswd, "--htpasswd-user-group=finance",
		"--pass-user-headers=true", "--skip-provider-button=false")
	var out testkit.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("oauth2-proxy output:\n%s", out.String())
		}
	})
	proxyURL := "http://" + addr
	for i := 0; ; i++ {
		resp, err := testkit.HTTPClient.Get(proxyURL + "/ping")
		if err == nil {
			resp.Body.Close()
			break
		}
		if i == 100 {
			t.Fatalf("oauth2-proxy did not answer /ping: %v\n%s", err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	c := g.NewClient(t)
	deleteID := c.CallTask(1, "delete_user", `{"user_id":"u-002"}`)
	taskID := c.CallTask(2, "transfer_funds", `{"from_account":"acc-1","to_account":"acc-2","amount":5,"currency":"USD"}`)
	b.do("open the console: oauth2-proxy's sign-in page", chromedp.Navigate(proxyURL+console.Path),
		chromedp.WaitVisible(chromedp.CSS(`input[name="username"]`)))
	b.do("sign in with oauth2-proxy's form",
		chromedp.SendKeys(chromedp.CSS(`input[name="username"]`), "alice"),
		chromedp.SendKeys(chromedp.CSS(`input[name="password"]`), "alice-password-1"),
		chromedp.Submit(chromedp.CSS(`input[name="password"]`)))
	b.do("the finance call is listed without a token", chromedp.WaitVisible(chromedp.CSS(rowSel(taskID))))
	if who := eval[string](b, `document.getElementById('whoami').textContent`); who != "signed in as alice (login proxy)" {
		t.Errorf("whoami %q", who)
	}
	if eval[bool](b, `document.querySelector(`+jsString(rowSel(deleteID))+`) !== null`) {
		t.Error("a finance approver sees SRE's held delete")
	}
	b.do("open the request", clickJS(rowSel(taskID)))
	b.waitFor("the detail", `document.getElementById('d-id').textContent === `+jsString(taskID))
	b.do("approve", chromedp.Click(chromedp.ID("approve")))
	b.messageIs("ok", "Approved transfer_funds")
	st, view := g.AdminRequest(t, "GET", "/api/v1/approvals/"+taskID, bobToken, "")
	if st != 200 || testkit.Dig(view, "decision", "by") != "alice" {
		t.Errorf("after the console's approval: %d %v", st, view)
	}
	// The approved call runs right after the decision, not within it: wait for its outcome.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, v := g.AdminRequest(t, "GET", "/api/v1/approvals/"+taskID, bobToken, ""); v["state"] == "completed" || time.Now().After(deadline) {
			break
		}
	}
	if n := d.Calls("transfer_funds"); n != 1 {
		t.Errorf("transfer_funds ran %d times, want 1", n)
	}
	if st, view := g.AdminRequest(t, "GET", "/api/v1/approvals/"+deleteID, bobToken, ""); st != 200 || view["state"] != "awaiting_approval" || d.Calls("delete_user") != 0 {
		t.Errorf("SRE's delete after alice's session: %d %v", st, view)
	}
}

// oauth2ProxyRules: payments decided by finance, deletes by SRE (bob is both by configuration;
// alice only through the groups oauth2-proxy sends).
const oauth2ProxyRules = `governance:
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve, approval: deletes}
    - {match: "transfer_*", action: approve, approval: payments}
approval:
  deletes: {destination: {type: console}, timeout: 10m, on_timeout: deny, approvers: ["group:sre"]}
  payments: {destination: {type: console}, timeout: 10m, on_timeout: deny, approvers: ["group:finance"]}
approver_groups:
  sre: [bob]
  finance: [bob]
server:
  admin_auth:
    trusted_proxy: [127.0.0.1/32]
    user_header: X-Forwarded-User
    email_header: X-Forwarded-Email
    groups_header: X-Forwarded-Groups
approvers:
  - {name: alice, email: alice@example.com}
  - {name: bob, token_env: BOB_TOKEN}
`
