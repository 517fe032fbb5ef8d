package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// replayRules hold delete_* for alice's approval; a held call settles after 300ms.
const replayRules = `governance:
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve}
approvers:
  - {name: alice, token_env: ALICE_TOKEN}
tasks:
  hold_budget: 300ms
`

// TestReplayOnlyUntilDelivered (issue 29), in both eras with raw clients that have no task
// support: a held call settles undecided; after the approval its retry gets the one result
// (the upstream ran once); the same call after that delivery is a new call with its own
// approval and runs again (twice). A rejected call's retry is told the rejection; the same call
// after that is a new pending approval that names the earlier rejection (API and CLI).
func TestReplayOnlyUntilDelivered(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, replayRules), approverEnv, nil)
	g.WaitReady(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(g.Logs.String())
		}
	})

	legacy := g.NewClient(t)
	legacy.Initialize()
	modern := &modernClient{t: t, url: g.MCP, hdr: http.Header{"Authorization": {"Bearer replay-holder"}}}
	n := 0
	eras := map[string]func(args map[string]any) map[string]any{
		"2025-11-25": func(args map[string]any) map[string]any {
			n++
			return legacy.Call(n, "delete_user", args, 0)
		},
		"2026-07-28": func(args map[string]any) map[string]any {
			n++
			return modern.call(n, "tools/call", map[string]any{"name": "delete_user", "arguments": args})
		},
	}
	for _, era := range []string{"2025-11-25", "2026-07-28"} {
		call := eras[era]
		t.Run(era, func(t *testing.T) {
			user := "u-replay-" + era
			args := map[string]any{"user_id": user}
			before := d.Calls("delete_user")

			first := settledTask(t, call(args))
			decide(t, g, first, "approve")
			waitRan(t, g, first)
			if got := d.Calls("delete_user") - before; got != 1 {
				t.Fatalf("upstream ran %d times after the approval, want 1", got)
			}
			// The retry collects the one result.
			m := call(args)
			if txt := contentJSON(m); !strings.Contains(txt, user) || testkit.Dig(m, "result", "_meta", "io.modelcontextprotocol/related-task", "taskId") != first {
				t.Fatalf("retry after the approval: %v; want the result of %s", m, first)
			}
			if got := d.Calls("delete_user") - before; got != 1 {
				t.Fatalf("upstream ran %d times after the retry, want 1 (replayed)", got)
			}
			// Delivered: the same call again is a new call, governed afresh.
			waitDelivered(t, g, first)
			third := settledTask(t, call(args))
			if third == first {
				t.Fatalf("the call after delivery replayed task %s", first)
			}
			if ids := pendingApprovals(t, g); len(ids) != 1 || ids[0] != third {
				t.Fatalf("pending approvals %v, want only the new %s", ids, third)
			}
			decide(t, g, third, "approve")
			waitRan(t, g, third)
			if m := call(args); !strings.Contains(contentJSON(m), user) {
				t.Fatalf("retry of the new call: %v", m)
			}
			if got := d.Calls("delete_user") - before; got != 2 {
				t.Errorf("upstream ran %d times, want 2 (once per delivered call)", got)
			}

			// Rejection: told once, then the same call is a new request naming it.
			rargs := map[string]any{"user_id": "u-rejected-" + era}
			rejected := settledTask(t, call(rargs))
			decide(t, g, rejected, "reject")
			if m := call(rargs); !strings.Contains(errorName(m), "ApprovalRejected") {
				t.Fatalf("retry after the rejection: %v; want ApprovalRejected", m)
			}
			again := settledTask(t, call(rargs))
			if again == rejected {
				t.Fatalf("the re-request after the delivered rejection was answered from %s", rejected)
			}
			st, v := g.AdminRequest(t, "GET", "/api/v1/approvals/"+again, "alice-secret-token", "")
			pr, _ := testkit.Dig(v, "previousRejection").(map[string]any)
			if st != 200 || testkit.Dig(v, "state") != "awaiting_approval" || pr["taskId"] != rejected || pr["by"] != "alice" || pr["reason"] != "e2e" {
				t.Fatalf("approval view of the re-request: HTTP %d %v; want previousRejection naming %s by alice", st, v, rejected)
			}
			if era == "2025-11-25" {
				out := approvalsCLI(t, g, "approvals", "show", again)
				if !strings.Contains(out, "Rejected before:") || !strings.Contains(out, rejected) || !strings.Contains(out, "by alice") {
					t.Errorf("tollgate approvals show:\n%s", out)
				}
			}
			decide(t, g, again, "reject") // leave nothing pending for the next era
			call(rargs)
			if got := d.Calls("delete_user") - before; got != 2 {
				t.Errorf("a rejected call ran: upstream ran %d times, want 2", got)
			}
		})
	}
}

// settledTask is the task a held call's settled answer names.
func settledTask(t *testing.T, m map[string]any) string {
	t.Helper()
	id, _ := testkit.Dig(m, "result", "_meta", "io.tollgate/approval", "taskId").(string)
	if !strings.HasPrefix(id, "tg_") || testkit.Dig(m, "result", "_meta", "io.tollgate/approval", "state") != "awaiting_approval" {
		t.Fatalf("want a held call settled awaiting approval, got %v", m)
	}
	return id
}

func contentJSON(m map[string]any) string {
	b, _ := json.Marshal(testkit.Dig(m, "result", "content"))
	return string(b)
}

func errorName(m map[string]any) string {
	b, _ := json.Marshal(m["error"])
	return string(b)
}

// approvalsCLI runs the tollgate CLI against g's admin API as alice.
func approvalsCLI(t *testing.T, g *testkit.Gateway, args ...string) string {
	t.Helper()
	cmd := exec.Command(buildBinary(t), args...)
	cmd.Env = append(os.Environ(), "TOLLGATE_ADMIN_URL="+g.Admin, "TOLLGATE_ADMIN_TOKEN=alice-secret-token")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tollgate %v: %v\n%s", args, err, out)
	}
	return string(out)
}
