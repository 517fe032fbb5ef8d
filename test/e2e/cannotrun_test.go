//go:build unix

package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// TestStdioRestartFlagsPendingApproval: a pending write_note whose stdio server process was
// restarted (killed; the next session runs a new process) is flagged in the approvals API
// before anyone approves it — cannotRun {reason: stdio_process_exited} in the detail view and
// in the list — while its twin on a live process is not; approving it still fails clearly
// (SessionGone) and nothing runs. Fails on main (no cannotRun field).
func TestStdioRestartFlagsPendingApproval(t *testing.T) {
	g, notes := startStdioGateway(t, "", stdioRules)
	c, live := g.NewClient(t), g.NewClient(t)
	tid := c.CallTask(1, "write_note", `{"text":"must not be written"}`)
	other := live.CallTask(1, "write_note", `{"text":"on a live process"}`)
	show := func(id string) map[string]any {
		t.Helper()
		st, v := g.AdminRequest(t, "GET", "/api/v1/approvals/"+id, "alice-secret-token", "")
		if st != 200 {
			t.Fatalf("GET approval %s: %d %v", id, st, v)
		}
		return v
	}
	if cr := show(tid)["cannotRun"]; cr != nil {
		t.Fatalf("flagged while its process runs: %v", cr)
	}

	killProcessOf(t, c, 2)
	// The server is started again by the next session: a new process, without c's session.
	if p := text(t, g.NewClient(t).Call(1, "pid", map[string]any{}, 0)); p == "" {
		t.Fatal("no new process after the kill")
	}
	var v map[string]any
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if v = show(tid); v["cannotRun"] != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pending approval of a dead process not flagged within 10s: %v", v)
		}
	}
	if r := testkit.Dig(v, "cannotRun", "reason"); r != "stdio_process_exited" || v["state"] != "awaiting_approval" {
		t.Fatalf("cannotRun %v (state %v), want stdio_process_exited on a pending approval", v["cannotRun"], v["state"])
	}
	if m, _ := testkit.Dig(v, "cannotRun", "message").(string); !strings.Contains(m, "SessionGone") {
		t.Errorf("cannotRun message %q does not say what approving does", m)
	}
	if cr := show(other)["cannotRun"]; cr != nil {
		t.Errorf("the call on a live process is flagged: %v", cr)
	}
	st, list := g.AdminRequest(t, "GET", "/api/v1/approvals", "alice-secret-token", "")
	rows, _ := list["approvals"].([]any)
	flagged := map[string]any{}
	for _, r := range rows {
		m, _ := r.(map[string]any)
		flagged[fmt.Sprint(m["taskId"])] = testkit.Dig(m, "cannotRun", "reason")
	}
	if st != 200 || flagged[tid] != "stdio_process_exited" || flagged[other] != nil {
		t.Errorf("list: %d, cannotRun per task %v", st, flagged)
	}

	// Approving is unchanged: it fails clearly and never runs.
	decide(t, g, tid, "approve")
	if st, view := waitTaskDone(t, g, tid); st != "failed" || !strings.Contains(fmt.Sprint(view), "SessionGone") {
		t.Fatalf("approved after the restart: %s %v", st, view)
	}
	if b, err := os.ReadFile(notes); err == nil {
		t.Fatalf("the call ran after its process was restarted: %q", b)
	}
}
