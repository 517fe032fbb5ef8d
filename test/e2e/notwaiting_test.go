package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// TestHeldCallNotWaitingShown: a held plain call that settled undecided (tasks.hold_budget)
// leaves a pending approval nobody waits for: the admin API says so (requesterNotWaiting, with
// resultKeptUntil = the task's expiry: approval timeout + tasks.replay_window) and the CLI
// too. Fails on main (no such field).
func TestHeldCallNotWaitingShown(t *testing.T) {
	_, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, replayRules), approverEnv, nil)
	g.WaitReady(t)
	c := g.NewClient(t)
	id := settledTask(t, c.Call(1, "delete_user", map[string]any{"user_id": "u-not-waiting"}, 0))
	var v map[string]any
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, v = g.AdminRequest(t, "GET", "/api/v1/approvals/"+id, "alice-secret-token", "")
		if v["requesterNotWaiting"] != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a settled held call is not shown as unwaited within 10s: %v", v)
		}
	}
	msg, _ := testkit.Dig(v, "requesterNotWaiting", "message").(string)
	if !strings.HasPrefix(msg, "Requester no longer waiting; the result will be kept for ") || v["state"] != "awaiting_approval" {
		t.Errorf("requesterNotWaiting %v (state %v)", v["requesterNotWaiting"], v["state"])
	}
	until, _ := testkit.Dig(v, "requesterNotWaiting", "resultKeptUntil").(string)
	ku, err1 := time.Parse(time.RFC3339Nano, until)
	exp, err2 := time.Parse(time.RFC3339Nano, v["expiresAt"].(string))
	if err1 != nil || err2 != nil || !ku.Equal(exp) {
		t.Errorf("resultKeptUntil %q, want the task's expiry %v", until, v["expiresAt"])
	}
	if out := approvalsCLI(t, g, "approvals", "show", id); !strings.Contains(out, "Requester no longer waiting") {
		t.Errorf("tollgate approvals show:\n%s", out)
	}
	decide(t, g, id, "reject") // nothing left pending
}
