package hostile

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

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
	const tries = 40
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
