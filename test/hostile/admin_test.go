package hostile

import (
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/approval"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// adminGet sends one GET to the admin listener with the given Host and Origin ("" = default,
// none) and returns the status.
func adminGet(t *testing.T, g *testkit.Gateway, path, host, origin, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, g.Admin+path, nil)
	if host != "" {
		req.Host = host
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := testkit.HTTPClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestAdminHostOrigin: the admin listener (loopback by default) refuses a foreign Host or
// Origin like the MCP listener does, so a DNS-rebinding page cannot read /metrics or drive the
// approvals API. It used to answer them all.
func TestAdminHostOrigin(t *testing.T) {
	up := startTypedUpstream(t)
	g := startPolicyGateway(t, up)
	adminPort := g.Admin[strings.LastIndex(g.Admin, ":"):]
	for _, path := range []string{"/metrics", "/healthz", "/readyz", "/api/v1/approvals", "/approvals"} {
		if got := adminGet(t, g, path, "", "", testkit.AdminToken); got != http.StatusOK {
			t.Errorf("GET %s from loopback: %d, want 200", path, got)
		}
		if got := adminGet(t, g, path, "", "http://localhost"+adminPort, testkit.AdminToken); got != http.StatusOK {
			t.Errorf("GET %s with a loopback Origin: %d, want 200", path, got)
		}
		if got := adminGet(t, g, path, "rebind.evil.example"+adminPort, "", testkit.AdminToken); got != http.StatusForbidden {
			t.Errorf("GET %s with a foreign Host: %d, want 403", path, got)
		}
		if got := adminGet(t, g, path, "", "https://evil.example", testkit.AdminToken); got != http.StatusForbidden {
			t.Errorf("GET %s with a foreign Origin: %d, want 403", path, got)
		}
	}
}

// TestBadAdminTokensSampled: every refused bearer token used to be one WARN line, so anyone
// reaching the admin listener could fill the log. The WARN is now sampled (10 at once, then
// one a second) and carries how many were held back.
func TestBadAdminTokensSampled(t *testing.T) {
	up := startTypedUpstream(t)
	g := startPolicyGateway(t, up)
	const tries = approval.AuthFailureBurst // more would be throttled (429), see TestAdminTokenGuessesThrottled
	start := time.Now()
	for i := range tries {
		if got := adminGet(t, g, "/api/v1/approvals", "", "", fmt.Sprintf("wrong-token-%d", i)); got != http.StatusUnauthorized {
			t.Fatalf("bad token %d: %d, want 401", i, got)
		}
	}
	elapsed := time.Since(start)
	warns := strings.Count(g.Logs.String(), "admin API: rejected bearer token")
	if limit := 10 + int(math.Ceil(elapsed.Seconds())); warns == 0 || warns > limit {
		t.Errorf("%d WARNs for %d bad tokens in %v, want 1..%d", warns, tries, elapsed, limit)
	}
	if strings.Contains(g.Logs.String(), "wrong-token-") {
		t.Error("a refused token was logged")
	}
}

// fromClient is an HTTP client whose connections come from the loopback address local (Linux
// accepts any 127/8 source), so one test can act as several sources.
func fromClient(local string) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

// TestAdminTokenGuessesThrottled: 1500 wrong admin tokens from one address used to be
// answered 401 each, in 258 ms. Failed tokens are now limited per address: after
// approval.AuthFailureBurst failures (plus one a second) the address gets 429 with Retry-After
// and a JSON error, a correct token from another address is still served, and the refusals
// are counted in tollgate_limit_refusals_total{limit="admin_auth"}.
func TestAdminTokenGuessesThrottled(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("binds 127.0.0.2 as a second loopback source (Linux)")
	}
	up := startTypedUpstream(t)
	g := startPolicyGateway(t, up)
	attacker, approver := fromClient("127.0.0.1"), fromClient("127.0.0.2")
	defer attacker.CloseIdleConnections()
	defer approver.CloseIdleConnections()
	ask := func(c *http.Client, token string) (int, http.Header, string) {
		req, _ := http.NewRequest(http.MethodGet, g.Admin+"/api/v1/approvals", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return resp.StatusCode, resp.Header, string(b)
	}
	const guesses = 1500
	codes := map[int]int{}
	var last429 http.Header
	var body429 string
	start := time.Now()
	for i := range guesses {
		st, h, b := ask(attacker, fmt.Sprintf("guess-%04d", i))
		codes[st]++
		if st == http.StatusTooManyRequests {
			last429, body429 = h, b
		}
	}
	elapsed := time.Since(start)
	t.Logf("%d guesses in %v: %v", guesses, elapsed.Round(time.Millisecond), codes)
	if limit := approval.AuthFailureBurst + int(math.Ceil(elapsed.Seconds()/approval.AuthFailureEvery.Seconds())); codes[http.StatusUnauthorized] > limit {
		t.Errorf("%d of %d wrong tokens were checked (401) in %v, want at most %d", codes[http.StatusUnauthorized], guesses, elapsed, limit)
	}
	if codes[http.StatusUnauthorized]+codes[http.StatusTooManyRequests] != guesses {
		t.Errorf("answers %v, want only 401 and 429", codes)
	}
	if last429 != nil {
		if ra := last429.Get("Retry-After"); ra == "" || last429.Get("Content-Type") != "application/json" || !strings.Contains(body429, `"error":"too_many_failures"`) {
			t.Errorf("429 with Retry-After %q, Content-Type %q, body %s; want Retry-After and a JSON too_many_failures error", ra, last429.Get("Content-Type"), body429)
		}
	}
	if st, _, b := ask(approver, testkit.AdminToken); st != http.StatusOK {
		t.Errorf("correct token from another address during the attack: HTTP %d %s, want 200", st, b)
	}
	if st, _, _ := ask(attacker, testkit.AdminToken); st != http.StatusTooManyRequests {
		t.Errorf("correct token from the throttled address: HTTP %d, want 429 (a 200 would confirm guesses)", st)
	}
	resp, err := testkit.HTTPClient.Get(g.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !regexp.MustCompile(`tollgate_limit_refusals_total\{limit="admin_auth"\} [1-9]`).Match(m) {
		t.Errorf("admin_auth refusals not counted in /metrics")
	}
}
