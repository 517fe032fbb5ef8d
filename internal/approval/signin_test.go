package approval

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

// signInConfig: a login proxy at 10.0.0.0/8 and fd00::/8 with oauth2-proxy's auth_request
// header names; alice signs in only through it (no token), bob has a token too.
func signInConfig() *config.Config {
	return &config.Config{
		Server: config.Server{AdminAuth: config.AdminAuth{
			TrustedProxy: []string{"10.0.0.0/8", "fd00::/8"},
			UserHeader:   config.DefaultUserHeader, EmailHeader: config.DefaultEmailHeader, GroupsHeader: config.DefaultGroupsHeader,
		}},
		Approvers: []config.Approver{
			{Name: "alice", Email: "alice@example.com"},
			{Name: "bob", TokenEnv: "BOB_TOKEN", Email: "bob@example.com"},
			{Name: "carol", TokenEnv: "CAROL_TOKEN"},
		},
	}
}

// signInStack is the admin API as internal/server mounts it: ProxySignIn → Throttle → API.
func signInStack(cfg *config.Config) (http.Handler, *fakeTasks, *atomic.Int64) {
	h, f, untrusted, _ := signInStackRefused(cfg)
	return h, f, untrusted
}

// signInStackRefused also counts the sign-ins refused as look-alikes of an approver.
func signInStackRefused(cfg *config.Config) (http.Handler, *fakeTasks, *atomic.Int64, *atomic.Int64) {
	f := newFake(pendingTask("t1", 0))
	var untrusted, lookalike atomic.Int64
	api := Throttle(NewHandler(f, testAuth(), Options{Workflow: testWorkflows}), ThrottleOptions{})
	return ProxySignIn(api, ProxyOptions{
		SignIn:      SignInFrom(func() *config.Config { return cfg }),
		OnUntrusted: func() { untrusted.Add(1) },
		OnRefused: func(reason string) {
			if reason == "lookalike" {
				lookalike.Add(1)
			}
		},
	}), f, &untrusted, &lookalike
}

func send(h http.Handler, method, path, remote string, hdr map[string][]string) *httptest.ResponseRecorder {
	var body *strings.Reader
	if method == http.MethodPost {
		body = strings.NewReader(`{}`)
	} else {
		body = strings.NewReader("")
	}
	r := httptest.NewRequest(method, path, body)
	r.RemoteAddr = remote
	for k, vs := range hdr {
		for _, v := range vs {
			r.Header.Add(k, v)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func errorCode(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var e ErrorResponse
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
		t.Fatalf("error body %q: %v", w.Body, err)
	}
	return e.Error
}

// TestProxySignIn: a request from the login proxy carrying the user (or e-mail) header is that
// approver, no token needed; the same headers from any other peer are refused and counted,
// whatever else the request carries (a valid token, X-Forwarded-For naming the proxy); without
// the headers bearer tokens work as before; a user who is not an approver gets 403.
func TestProxySignIn(t *testing.T) {
	const (
		proxy4   = "10.1.2.3:40000"
		proxy6   = "[fd00::5]:40000"
		mapped   = "[::ffff:10.1.2.3]:40000"
		outsider = "192.0.2.7:40000"
	)
	user := func(vs ...string) map[string][]string { return map[string][]string{"X-Auth-Request-User": vs} }
	with := func(h map[string][]string, k string, vs ...string) map[string][]string { h[k] = vs; return h }
	cases := []struct {
		name      string
		off       bool
		remote    string
		hdr       map[string][]string
		status    int
		approver  string // decision.by on success
		code      string // error code otherwise
		untrusted int64
		lookalike int64 // sign-ins refused as a look-alike of an approver
	}{
		{name: "proxy user", remote: proxy4, hdr: user("alice"), status: 200, approver: "alice"},
		// Sign-in grants, so names match exactly: a name that only looks like an approver's
		// is refused and counted (identity: folding only ever refuses).
		{name: "proxy user, other case", remote: proxy4, hdr: user("Alice"), status: 403, code: "unknown_approver", lookalike: 1},
		{name: "proxy user with a Cyrillic a", remote: proxy4, hdr: user("\u0430lice"), status: 403, code: "unknown_approver", lookalike: 1},
		{name: "proxy user with a dotless i", remote: proxy4, hdr: user("al\u0131ce"), status: 403, code: "unknown_approver", lookalike: 1},
		{name: "proxy user in full width", remote: proxy4, hdr: user("ａｌｉｃｅ"), status: 403, code: "unknown_approver", lookalike: 1},
		{name: "proxy user with a capital dotted I", remote: proxy4, hdr: user("al\u0130ce"), status: 403, code: "unknown_approver", lookalike: 1},
		{name: "proxy e-mail in full width", remote: proxy4, hdr: map[string][]string{"X-Auth-Request-Email": {"ａlice@example.com"}}, status: 403, code: "unknown_approver", lookalike: 1},
		{name: "proxy e-mail only", remote: proxy4, hdr: map[string][]string{"X-Auth-Request-Email": {"ALICE@example.com"}}, status: 200, approver: "alice"},
		{name: "proxy over IPv6", remote: proxy6, hdr: user("bob"), status: 200, approver: "bob"},
		{name: "proxy as IPv4-mapped IPv6", remote: mapped, hdr: user("alice"), status: 200, approver: "alice"},
		{name: "proxy identity wins over a forwarded token", remote: proxy4, hdr: with(user("alice"), "Authorization", "Bearer some-id-token"), status: 200, approver: "alice"},
		{name: "user and e-mail agree", remote: proxy4, hdr: with(user("bob"), "X-Auth-Request-Email", "bob@example.com"), status: 200, approver: "bob"},

		{name: "outsider with the user header", remote: outsider, hdr: user("alice"), status: 403, code: "untrusted_proxy_header", untrusted: 1},
		{name: "outsider with header and a valid token", remote: outsider, hdr: with(user("alice"), "Authorization", "Bearer "+bobToken), status: 403, code: "untrusted_proxy_header", untrusted: 1},
		{name: "outsider with X-Forwarded-For naming the proxy", remote: outsider, hdr: with(user("alice"), "X-Forwarded-For", "10.1.2.3"), status: 403, code: "untrusted_proxy_header", untrusted: 1},
		{name: "outsider with the groups header only", remote: outsider, hdr: with(map[string][]string{"Authorization": {"Bearer " + bobToken}}, "X-Auth-Request-Groups", "finance"), status: 403, code: "untrusted_proxy_header", untrusted: 1},
		{name: "outsider with the e-mail header in lower case", remote: outsider, hdr: map[string][]string{"x-auth-request-email": {"alice@example.com"}}, status: 403, code: "untrusted_proxy_header", untrusted: 1},
		{name: "outsider next to the proxy range", remote: "11.0.0.1:1", hdr: user("alice"), status: 403, code: "untrusted_proxy_header", untrusted: 1},

		{name: "proxy, no headers: bearer token", remote: proxy4, hdr: map[string][]string{"Authorization": {"Bearer " + bobToken}}, status: 200, approver: "bob"},
		{name: "proxy, no headers, no token", remote: proxy4, hdr: nil, status: 401, code: "unauthorized"},
		{name: "proxy, groups only: bearer token", remote: proxy4, hdr: map[string][]string{"X-Auth-Request-Groups": {"finance"}, "Authorization": {"Bearer " + bobToken}}, status: 200, approver: "bob"},
		{name: "proxy, groups only, no token", remote: proxy4, hdr: map[string][]string{"X-Auth-Request-Groups": {"finance"}}, status: 401, code: "unauthorized"},
		{name: "outsider, no headers: bearer token", remote: outsider, hdr: map[string][]string{"Authorization": {"Bearer " + bobToken}}, status: 200, approver: "bob"},

		{name: "the requester signed in by the proxy cannot decide", remote: proxy4, hdr: user("carol"), status: 403, code: "self_approval"},
		{name: "proxy user who is no approver", remote: proxy4, hdr: user("mallory"), status: 403, code: "unknown_approver"},
		{name: "proxy user admin is no approver", remote: proxy4, hdr: user("admin"), status: 403, code: "unknown_approver"},
		{name: "proxy user with an invisible code point", remote: proxy4, hdr: user("alice\u200b"), status: 403, code: "unknown_approver"},
		{name: "proxy user and e-mail name two approvers", remote: proxy4, hdr: with(user("alice"), "X-Auth-Request-Email", "bob@example.com"), status: 403, code: "ambiguous_identity"},
		{name: "proxy user header twice", remote: proxy4, hdr: user("mallory", "alice"), status: 403, code: "ambiguous_identity"},

		{name: "sign-in off: headers ignored", off: true, remote: proxy4, hdr: user("alice"), status: 401, code: "unauthorized"},
		{name: "sign-in off: token still works", off: true, remote: outsider, hdr: with(user("alice"), "Authorization", "Bearer "+bobToken), status: 200, approver: "bob"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := signInConfig()
			if tc.off {
				cfg.Server.AdminAuth.TrustedProxy = nil
			}
			h, f, untrusted, lookalike := signInStackRefused(cfg)
			w := send(h, http.MethodPost, "/api/v1/approvals/t1/approve", tc.remote, tc.hdr)
			if w.Code != tc.status {
				t.Fatalf("HTTP %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			if tc.status == 200 {
				if got := f.tasks["t1"].Decision; got == nil || got.By != tc.approver {
					t.Errorf("decision %+v, want by %q", got, tc.approver)
				}
			} else {
				if c := errorCode(t, w); c != tc.code {
					t.Errorf("error %q, want %q: %s", c, tc.code, w.Body)
				}
				if f.tasks["t1"].Decision != nil {
					t.Errorf("refused request decided the task: %+v", f.tasks["t1"].Decision)
				}
			}
			if n := untrusted.Load(); n != tc.untrusted {
				t.Errorf("untrusted refusals counted %d, want %d", n, tc.untrusted)
			}
			if n := lookalike.Load(); n != tc.lookalike {
				t.Errorf("look-alike refusals counted %d, want %d", n, tc.lookalike)
			}
		})
	}
}

// TestProxySignInGroups: the groups reach the API next to the approver's name (comma-separated
// or repeated, trimmed, without duplicates), and only on a request the proxy signed in.
func TestProxySignInGroups(t *testing.T) {
	var got Identity
	var signed bool
	probe := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got, signed = SignedIn(r.Context()) })
	h := ProxySignIn(probe, ProxyOptions{SignIn: SignInFrom(func() *config.Config { return signInConfig() })})

	send(h, http.MethodGet, "/api/v1/approvals", "10.9.9.9:1", map[string][]string{
		"X-Auth-Request-User": {"alice"}, "X-Auth-Request-Groups": {"finance, sre,,finance", "ops"}})
	if !signed || got.Approver != "alice" || !slices.Equal(got.Groups, []string{"finance", "sre", "ops"}) {
		t.Errorf("signed in %v as %+v, want alice with [finance sre ops]", signed, got)
	}
	send(h, http.MethodGet, "/api/v1/approvals", "10.9.9.9:1", map[string][]string{"X-Auth-Request-Groups": {"finance"}})
	if signed {
		t.Errorf("groups alone signed a request in: %+v", got)
	}
}

// TestProxySignInNotThrottled: every user behind the proxy shares its address, so failed
// tokens from there (the throttle's key) must not lock out users the proxy signs in, and a
// proxy that forwards an ID token as Authorization is no guess.
func TestProxySignInNotThrottled(t *testing.T) {
	h, _, _ := signInStack(signInConfig())
	const proxy = "10.1.2.3:40000"
	for i := 0; i <= AuthFailureBurst; i++ {
		send(h, http.MethodGet, "/api/v1/approvals", proxy, map[string][]string{"Authorization": {"Bearer wrong-guess"}})
	}
	if w := send(h, http.MethodGet, "/api/v1/approvals", proxy, map[string][]string{"Authorization": {"Bearer wrong-guess"}}); w.Code != http.StatusTooManyRequests {
		t.Fatalf("bad tokens from the proxy address: HTTP %d, want 429 (the throttle still applies to tokens)", w.Code)
	}
	for range 3 {
		w := send(h, http.MethodGet, "/api/v1/approvals", proxy, map[string][]string{
			"X-Auth-Request-User": {"alice"}, "Authorization": {"Bearer forwarded-id-token"}})
		if w.Code != 200 {
			t.Fatalf("signed-in request after the throttle filled: HTTP %d %s", w.Code, w.Body)
		}
	}
}

// TestSignInFromFollowsReloads: the sign-in follows the current configuration snapshot.
func TestSignInFromFollowsReloads(t *testing.T) {
	var cur atomic.Pointer[config.Config]
	cur.Store(signInConfig())
	si := SignInFrom(cur.Load)
	if s := si(); s == nil || s != si() {
		t.Fatal("not compiled once per snapshot")
	}
	off := signInConfig()
	off.Server.AdminAuth.TrustedProxy = nil
	cur.Store(off)
	if si() != nil {
		t.Error("a reload that removed trusted_proxy left sign-in on")
	}
}

// BenchmarkProxySignIn: the cost the sign-in adds to an admin request, mapping the proxy's user
// against 100 approvers (the last one matches: the worst case of the linear scan).
func BenchmarkProxySignIn(b *testing.B) {
	cfg := signInConfig()
	cfg.Approvers = nil
	for i := range 100 {
		cfg.Approvers = append(cfg.Approvers, config.Approver{Name: "approver-" + strconv.Itoa(i)})
	}
	h := ProxySignIn(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
		ProxyOptions{SignIn: SignInFrom(func() *config.Config { return cfg })})
	r := httptest.NewRequest(http.MethodGet, "/api/v1/approvals", nil)
	r.RemoteAddr = "10.1.2.3:40000"
	r.Header.Set("X-Auth-Request-User", "Approver-99") // not the exact name: the confusable comparison runs for all 100
	r.Header.Set("X-Auth-Request-Groups", "finance,sre")
	for b.Loop() {
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
}

// TestProxyGroupsDecide: the login proxy's groups count for "group:<name>" in a workflow's
// approvers list, in what the approver sees and in the decision itself: bob, in no
// approver_groups entry, decides a finance call when the proxy says he is in finance, and
// gets 403 not_authorized when it does not.
func TestProxyGroupsDecide(t *testing.T) {
	cfg := signInConfig()
	cfg.ApproverGroups = map[string][]string{"finance": {"alice"}}
	cfg.Approval = map[string]config.Workflow{"payments": {Approvers: []string{"group:finance"}}}
	pay := pendingTask("tg_pay", time.Minute)
	pay.Workflow = "payments"
	f := newFake(pay)
	api := NewHandler(f, testAuth(), Options{Workflow: cfg.WorkflowFor, Config: func() *config.Config { return cfg }})
	h := ProxySignIn(api, ProxyOptions{SignIn: SignInFrom(func() *config.Config { return cfg })})
	bob := map[string][]string{config.DefaultUserHeader: {"bob"}}
	if w := send(h, http.MethodGet, "/api/v1/approvals/tg_pay", "10.0.0.5:4000", bob); w.Code != http.StatusForbidden || errorCode(t, w) != "not_authorized" {
		t.Fatalf("bob without groups: %d %s", w.Code, w.Body)
	}
	if w := send(h, http.MethodPost, "/api/v1/approvals/tg_pay/approve", "10.0.0.5:4000", bob); w.Code != http.StatusForbidden {
		t.Fatalf("bob without groups approved: %d %s", w.Code, w.Body)
	}
	bobFinance := map[string][]string{config.DefaultUserHeader: {"bob"}, config.DefaultGroupsHeader: {"sre,finance"}}
	if w := send(h, http.MethodGet, "/api/v1/approvals", "10.0.0.5:4000", bobFinance); w.Code != 200 || !strings.Contains(w.Body.String(), "tg_pay") {
		t.Fatalf("bob in finance does not see the call: %d %s", w.Code, w.Body)
	}
	if w := send(h, http.MethodPost, "/api/v1/approvals/tg_pay/approve", "10.0.0.5:4000", bobFinance); w.Code != 200 {
		t.Fatalf("bob in finance: %d %s", w.Code, w.Body)
	}
}
