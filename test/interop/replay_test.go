//go:build unix

package interop

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// replayRules hold delete_* for approval; a held call settles after a second, well within the
// SDKs' 60 s request timeout.
const replayRules = `governance:
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve}
approval:
  default: {timeout: 10m, on_timeout: deny}
`

// TestTSClientReplayOnlyUntilDelivered (issue 29): the replay rule of docs/contract.md §3 as
// the official TypeScript SDK's plain callTool sees it, in both eras — SDK 1.x for 2025-11-25,
// SDK 2.x (@modelcontextprotocol/client, pinned) for 2026-07-28, which 1.x does not speak. A
// held call settles undecided; once approved, its retry gets the one result (the upstream ran
// once); after that delivery the same call is a new approval and runs again (twice). A
// rejected call's retry is told the rejection; after that delivery the same call is a new
// pending approval whose previousRejection names the rejected task.
func TestTSClientReplayOnlyUntilDelivered(t *testing.T) {
	tc := needNode(t)
	d, upURL := testkit.StartDemo(t)
	g := startGateway(t, basicConfig(upURL, replayRules, "hold_budget: 1s"), nil)

	// onAwait answers replay.mjs's "await" steps: decide the named task (which must be the
	// only pending approval), wait until Tollgate recorded the delivery of the named task, or
	// (inspect) keep the approval's view, then reject it so nothing stays pending.
	onAwait := func(t *testing.T, inspected *map[string]any) func(event) string {
		return func(e event) string {
			if e.name() != "await" {
				return ""
			}
			step, _ := e["step"].(string)
			id, _ := e["taskId"].(string)
			if !strings.HasPrefix(id, "tg_") {
				t.Errorf("step %s: the settled answer named no task (%v)", step, e)
				return "no task"
			}
			switch step {
			case "approve", "reject":
				if ids := pending(t, g); len(ids) != 1 || ids[0] != id {
					t.Errorf("pending approvals %v, want only %s", ids, id)
				}
				st, _ := g.AdminRequest(t, http.MethodPost, "/api/v1/approvals/"+id+"/"+step, testkit.AdminToken, `{"reason":"interop"}`)
				return step + " " + http.StatusText(st)
			case "delivered":
				for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
					if _, v := g.AdminRequest(t, http.MethodGet, "/api/v1/approvals/"+id, testkit.AdminToken, ""); v["deliveredAt"] != nil {
						return "delivered"
					}
				}
				t.Errorf("the delivery of %s was not recorded within 15s", id)
				return "not delivered"
			case "inspect":
				_, v := g.AdminRequest(t, http.MethodGet, "/api/v1/approvals/"+id, testkit.AdminToken, "")
				*inspected = v
				st, _ := g.AdminRequest(t, http.MethodPost, "/api/v1/approvals/"+id+"/reject", testkit.AdminToken, `{"reason":"cleanup"}`)
				return "inspected, reject " + http.StatusText(st)
			}
			return "unknown step"
		}
	}

	for _, c := range []struct{ era, sdk string }{{"2025-11-25", "sdk1"}, {"2026-07-28", "sdk2"}} {
		t.Run(c.era+" "+c.sdk, func(t *testing.T) {
			run := func(scenario, user string, inspected *map[string]any) *scriptRun {
				r := runScript(t, tc, "replay.mjs", []string{g.MCP, c.sdk, scenario, "delete_user", `{"user_id":"` + user + `"}`}, onAwait(t, inspected))
				if t.Failed() {
					r.dump(t)
				}
				if v, _ := r.find("connected")["protocolVersion"].(string); v != c.era {
					t.Errorf("the client spoke %q, want %s", v, c.era)
				}
				return r
			}
			settledID := func(r *scriptRun, name string) string {
				e := r.find(name)
				id, _ := e["taskId"].(string)
				if !strings.HasPrefix(id, "tg_") || dig(e, "result", "_meta", "io.tollgate/approval", "state") != "awaiting_approval" {
					t.Fatalf("%s: want a held call settled awaiting approval, got %v (error: %v)", name, e, r.find(name+"Error"))
				}
				return id
			}

			t.Run("approved: the retry gets the one result; after delivery the call runs again", func(t *testing.T) {
				user := "u-replay-" + c.sdk
				before := d.Calls("delete_user")
				r := run("approve", user, nil)
				first := settledID(r, "settled")
				retry := r.find("retry")
				if retry == nil || !strings.Contains(textOf(retry["result"]), user) ||
					dig(retry, "result", "_meta", "io.modelcontextprotocol/related-task", "taskId") != first {
					t.Errorf("retry after the approval: %v / %v; want the result of %s", retry, r.find("retryError"), first)
				}
				again := settledID(r, "again")
				if again == first {
					t.Errorf("the call after delivery replayed %s", first)
				}
				if last := r.find("againRetry"); last == nil || !strings.Contains(textOf(last["result"]), user) ||
					dig(last, "result", "_meta", "io.modelcontextprotocol/related-task", "taskId") != again {
					t.Errorf("retry of the new call: %v / %v", last, r.find("againRetryError"))
				}
				if n := d.Calls("delete_user") - before; n != 2 {
					t.Errorf("upstream ran %d times, want 2 (once per delivered call)", n)
				}
			})

			t.Run("rejected: after delivery the same call is a new approval naming the rejection", func(t *testing.T) {
				before := d.Calls("delete_user")
				var view map[string]any
				r := run("reject", "u-rejected-"+c.sdk, &view)
				rejected := settledID(r, "settled")
				if e := r.find("retryError"); e == nil || e["code"] != float64(-32007) || dig(e, "data", "error") != "ApprovalRejected" {
					t.Errorf("retry after the rejection: %v / %v; want -32007 ApprovalRejected", e, r.find("retry"))
				}
				again := settledID(r, "again")
				if again == rejected {
					t.Errorf("the re-request after the delivered rejection was answered from %s", rejected)
				}
				pr, _ := view["previousRejection"].(map[string]any)
				if view["state"] != "awaiting_approval" || pr["taskId"] != rejected || pr["by"] == nil || pr["reason"] != "interop" {
					t.Errorf("approval view of the re-request: %v; want previousRejection naming %s", view, rejected)
				}
				if d.Calls("delete_user") != before {
					t.Error("a rejected call ran")
				}
			})
		})
	}
}
