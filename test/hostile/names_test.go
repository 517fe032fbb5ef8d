package hostile

import (
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

func scrape(t *testing.T, g *testkit.Gateway) string {
	t.Helper()
	resp, err := testkit.HTTPClient.Get(g.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestLongToolNames: attacker-chosen tool names used to become metric label values and whole
// log lines — 100 calls with 1 MB names made /metrics 100 MB. Now only tools the upstream
// lists (and Tollgate's own) are labels, everything else counts as "other"; names in logs are
// clipped to 128 bytes with their length; the per-call WARN is rate-limited.
func TestLongToolNames(t *testing.T) {
	up := startTypedUpstream(t)
	g := startPolicyGateway(t, up)
	c := g.NewClient(t)
	base := len(scrape(t, g))

	const calls, size = 40, 64 << 10
	start := time.Now()
	for i := range calls {
		name := fmt.Sprintf("zz%03d", i) + strings.Repeat("n", size)
		m := c.Post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, i+1, name)).Message(t)
		if m["error"] == nil && m["result"] == nil {
			t.Fatalf("call %d: %v", i, m)
		}
	}
	// A listed tool still gets its own label.
	c.Post(`{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
	elapsed := time.Since(start)

	body := scrape(t, g)
	if strings.Contains(body, strings.Repeat("n", 200)) {
		t.Errorf("a long tool name became a label value")
	}
	if grew := len(body) - base; grew > 16<<10 {
		t.Errorf("/metrics grew by %d bytes after %d calls with %d-byte names", grew, calls, size)
	}
	if !strings.Contains(body, `tollgate_tool_calls_total{action="forward",tool="other"} 40`) {
		t.Errorf("unlisted tools are not counted as other:\n%s", grepLines(body, "tollgate_tool_calls_total"))
	}
	if !strings.Contains(body, `tollgate_tool_calls_total{action="forward",tool="echo"} 1`) {
		t.Errorf("the listed tool echo has no label of its own:\n%s", grepLines(body, "tollgate_tool_calls_total"))
	}

	logs := g.Logs.String()
	warns := 0
	for _, line := range strings.Split(logs, "\n") {
		if len(line) > 8<<10 {
			t.Errorf("log line of %d bytes: %.300s…", len(line), line)
		}
		if strings.Contains(line, "tool not in annotation cache") {
			warns++
		}
	}
	// At most the sampler's burst plus one per second elapsed (see logcap).
	if limit := 10 + int(math.Ceil(elapsed.Seconds())); warns > limit || warns == 0 {
		t.Errorf("%d on-demand WARNs for %d calls in %v, want 1..%d", warns, calls, elapsed, limit)
	}
	if !strings.Contains(logs, fmt.Sprintf(`(%d bytes)`, size+5)) {
		t.Errorf("clipped names do not carry their original length")
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
