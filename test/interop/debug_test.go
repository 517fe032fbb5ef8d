//go:build unix

package interop

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

func TestDebugLogs(t *testing.T) {
	if os.Getenv("DBG") == "" {
		t.Skip()
	}
	tc := needNode(t)
	upURL := startEverything(t, tc)
	url := upURL
	if os.Getenv("DBG") == "gw" {
		g := startGateway(t, basicConfig(upURL, everythingRules), nil)
		url = g.MCP
	}
	if os.Getenv("HOLD") != "" {
		os.WriteFile("/tmp/gwurl", []byte(url), 0o644)
		time.Sleep(25 * time.Second)
		return
	}
	n := &notes{}
	c := mcpGoClient(t, url, n)
	time.Sleep(500 * time.Millisecond)
	if _, err := c.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "toggle-simulated-logging"}}); err != nil {
		t.Fatal(err)
	}
	got := n.wait("notifications/message", nil, 2, 7*time.Second)
	t.Logf("got %d: %v", len(got), got)
	n.mu.Lock()
	for _, x := range n.list { t.Logf("note %s", x.Method) }
	n.mu.Unlock()
}
