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
// log lines — 100 calls with 1 MB names made /metrics 100 MB — and cost seconds of rule
// matching each. Now a name longer than 128 bytes (MCP's bound) is refused with -32602 before
// anything reads it; of the names that pass, only tools the upstream lists (and Tollgate's own)
// are labels, everything else counts as "other", and the per-call WARN is rate-limited.
func TestLongToolNames(t *testing.T) {
	up := startTypedUpstream(t)
	g := startPolicyGateway(t, up)
	c := g.NewClient(t)
	base := len(scrape(t, g))

	const calls, size = 40, 64 << 10
	for i := range calls {
		name := fmt.Sprintf("zz%03d", i) + strings.Repeat("n", size)
		m := c.Post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, i+1, name)).Message(t)
		e, _ := m["error"].(map[string]any)
		if code, _ := e["code"].(float64); code != -32602 {
			t.Fatalf("call %d with a %d-byte name: %v, want -32602", i, size+5, m)
		}
	}
	start := time.Now()
	for i := range calls {
		name := fmt.Sprintf("yy%03d", i) + strings.Repeat("n", 128-5) // at the bound: passes
		m := c.Post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, i+100, name)).Message(t)
		if m["error"] == nil && m["result"] == nil {
			t.Fatalf("call %d: %v", i, m)
		}
	}
	// A listed tool still gets its own label.
	c.Post(`{"jsonrpc":"2.0","id":999,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
	elapsed := time.Since(start)

	body := scrape(t, g)
	if strings.Contains(body, "zz000") || strings.Contains(body, "yy000") {
		t.Errorf("a caller-chosen tool name became a label value")
	}
	if grew := len(body) - base; grew > 16<<10 {
		t.Errorf("/metrics grew by %d bytes after %d calls with long names", grew, 2*calls)
	}
	if !strings.Contains(body, fmt.Sprintf(`tollgate_tool_calls_total{action="forward",tool="other"} %d`, calls)) {
		t.Errorf("unlisted tools are not counted as other (or refused ones are):\n%s", grepLines(body, "tollgate_tool_calls_total"))
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
		if strings.Contains(line, "zz000") {
			t.Errorf("a refused name was logged: %.300s…", line)
		}
		if strings.Contains(line, "tool not in annotation cache") {
			warns++
		}
	}
	// At most the sampler's burst plus one per second elapsed (see logcap).
	if limit := 10 + int(math.Ceil(elapsed.Seconds())); warns > limit || warns == 0 {
		t.Errorf("%d on-demand WARNs for %d calls in %v, want 1..%d", warns, calls, elapsed, limit)
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
