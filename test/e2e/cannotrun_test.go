//go:build unix

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/slack"
	"github.com/tollgate-mcp/tollgate/internal/slack/slacktest"
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

// TestStdioRestartUpdatesSlackRequest: the Slack request of a pending call whose stdio process
// was killed is updated (chat.update, checked against Slack's documented shapes by the
// stand-in) to say it cannot run any more, with Reject alone. Fails on main (no update).
func TestStdioRestartUpdatesSlackRequest(t *testing.T) {
	bin, err := stdioFixture()
	if err != nil {
		t.Fatalf("building the stdio fixture: %v", err)
	}
	recv := slacktest.NewReceiver(t, "xoxb-e2e-token")
	cfg := fmt.Sprintf(`schema: 1
sources:
  - id: local
    kind: mcp
    command: %q
    env: {NOTES_FILE: %q}
governance:
  defaults: {action: forward}
  rules:
    - {match: "write_note", action: approve, approval: pay}
approval:
  pay:
    destination: {type: slack, channel: "#approvals"}
    timeout: 10m
approvers:
  - {name: alice, token_env: ALICE_TOKEN, slack_user_id: U0ALICE}
`, bin, filepath.Join(t.TempDir(), "notes"))
	g := testkit.StartGateway(t, cfg, slackEnv(recv), nil)
	g.WaitReady(t)
	c := g.NewClient(t)
	c.CallTask(1, "write_note", `{"text":"doomed"}`)
	post := recv.Wait(t, "chat.postMessage", 1)[0].Body
	if raw, _ := json.Marshal(post); !strings.Contains(string(raw), slack.ActionApprove) || strings.Contains(slacktest.Text(post), "Cannot run") {
		t.Fatalf("posted while its process runs: %s", raw)
	}
	killProcessOf(t, c, 2)
	upd := recv.Wait(t, "chat.update", 1)[0].Body
	if text := slacktest.Text(upd); !strings.Contains(text, "Cannot run any more") || !strings.Contains(text, "stdio_process_exited") {
		t.Errorf("the update does not say the call cannot run:\n%s", text)
	}
	if raw, _ := json.Marshal(upd); strings.Contains(string(raw), slack.ActionApprove) || !strings.Contains(string(raw), slack.ActionReject) {
		t.Errorf("the updated request offers Approve (or lost Reject): %s", raw)
	}
}
