//go:build unix

package interop

import (
	"net/http"
	"strings"
	"testing"
)

// TestTSClientHeldProgress (issue 29): server-everything's trigger-long-running-operation held
// for approval, called by the TypeScript SDK 1.x plain callTool with onprogress (no task
// support). Once approved, every progress step of the upstream's reaches the SDK's onprogress
// on the held call's stream — the SDK accepts only its own token there — after Tollgate's own
// "awaiting approval" progress, each value greater than the last; then the tool's result.
func TestTSClientHeldProgress(t *testing.T) {
	tc := needNode(t)
	upURL := startEverything(t, tc)
	g := startGateway(t, basicConfig(upURL, `governance:
  defaults: {action: forward}
  rules:
    - {match: "trigger-long-running-operation", action: approve}
approval:
  default: {timeout: 10m, on_timeout: deny}
`, "hold_budget: 50s"), nil)
	run := runTS(t, tc, g.MCP, "holdInTime", func(e event) string {
		if e.name() != "awaitApproval" {
			return ""
		}
		return "approved " + http.StatusText(approve(t, g, pendingTask(t, g, "trigger-long-running-operation")))
	}, "trigger-long-running-operation", `{"duration":2,"steps":4}`)
	upstream, last := 0, -1.0
	for _, e := range run.all("progress") {
		v, _ := dig(e, "progress", "progress").(float64)
		if v <= last {
			t.Errorf("progress %v after %v (must increase): %v", v, last, e)
		}
		last = v
		if dig(e, "progress", "total") != nil {
			upstream++
		}
	}
	res := run.find("result")
	if upstream != 4 || res == nil || !strings.Contains(textOf(res["result"]), "completed") {
		run.dump(t)
		t.Errorf("the held caller got %d of the upstream's 4 progress steps; result %v", upstream, res)
	}
}
