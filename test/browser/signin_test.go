package browser

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
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
	b.do("open the request", chromedp.Click(chromedp.CSS(rowSel(taskID))))
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
