package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// twoPersonRules: delete_* needs two distinct approvers (approval.<name>.min_approvals).
const twoPersonRules = `governance:
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve, approval: two}
approval:
  two: {timeout: 10m, min_approvals: 2}
approvers:
  - {name: alice, token_env: ALICE_TOKEN}
  - {name: bob, token_env: BOB_TOKEN}
  - {name: carol, token_env: CAROL_TOKEN}
server:
  identity_header: X-Forwarded-User
`

// TestTwoPersonRule: a min_approvals 2 call approved by alice alone stays held — a plain
// client's call keeps waiting, a task client's tasks/get says "1 of 2 approvals" — and bob's
// approval runs it exactly once (the demo upstream's call count); alice approving twice is
// 409 and does not count; the requester's approval is 403; a reject by either ends it.
func TestTwoPersonRule(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	env := map[string]string{"CAROL_TOKEN": "carol-secret-token"}
	for k, v := range approverEnv {
		env[k] = v
	}
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, twoPersonRules), env, nil)
	g.WaitReady(t)
	const alice, bob, carol = "alice-secret-token", "bob-secret-token", "carol-secret-token"
	approve := func(t *testing.T, token, id string) (int, map[string]any) {
		t.Helper()
		return g.AdminRequest(t, "POST", "/api/v1/approvals/"+id+"/approve", token, `{"reason":"e2e"}`)
	}

	t.Run("plain call held until the second approval", func(t *testing.T) {
		c := mcpGoClient(t, g.MCP)
		before := d.Calls("delete_user")
		type answer struct {
			r   *mcp.CallToolResult
			err error
		}
		done := make(chan answer, 1)
		go func() {
			r, err := callTool(c, "delete_user", map[string]any{"user_id": "u-002"})
			done <- answer{r, err}
		}()
		waitFor(t, "the held call's approval", func() bool { return len(pendingApprovals(t, g)) == 1 })
		id := pendingApprovals(t, g)[0]

		st, v := approve(t, alice, id)
		if st != 200 || testkit.Dig(v, "state") != "awaiting_approval" || testkit.Dig(v, "requiredApprovals") != float64(2) ||
			first(testkit.Dig(v, "approvals"), "by") != "alice" ||
			!strings.Contains(fmt.Sprint(testkit.Dig(v, "statusMessage")), "(workflow two, 1 of 2 approvals)") {
			t.Fatalf("alice's approval: %d %v", st, v)
		}
		select {
		case a := <-done:
			t.Fatalf("the call returned after one of two approvals: %v %v", a.r, a.err)
		default: // still held
		}
		if st, v := approve(t, alice, id); st != http.StatusConflict || testkit.Dig(v, "error") != "already_approved" {
			t.Errorf("alice again: %d %v", st, v)
		}
		if n := d.Calls("delete_user") - before; n != 0 {
			t.Fatalf("upstream called %d times after one of two approvals", n)
		}

		if st, v := approve(t, bob, id); st != 200 || testkit.Dig(v, "decision", "by") != "bob" {
			t.Fatalf("bob's approval: %d %v", st, v)
		}
		a := <-done
		if a.err != nil || a.r.IsError || !strings.Contains(resultText(a.r), "u-002") {
			t.Fatalf("held call: %v %v", a.r, a.err)
		}
		if n := d.Calls("delete_user") - before; n != 1 {
			t.Errorf("upstream executions = %d, want 1", n)
		}
	})

	t.Run("task client polls k of N; requester excluded", func(t *testing.T) {
		c := &testkit.RPC{T: t, URL: g.MCP}
		c.Initialize()
		c.Header = http.Header{"X-Forwarded-User": {"carol"}}
		before := d.Calls("delete_user")
		tid := c.CallTask(1, "delete_user", `{"user_id":"u-003"}`)
		if st, v := approve(t, carol, tid); st != http.StatusForbidden {
			t.Errorf("the requester's approval: %d %v", st, v)
		}
		if st, _ := approve(t, alice, tid); st != 200 {
			t.Fatalf("alice: %d", st)
		}
		m := c.TaskRPC(2, "tasks/get", tid).Message(t)
		want := "Awaiting approval by a human (workflow two, 1 of 2 approvals): approve in the console at " + g.Admin + "/approvals or with `tollgate approvals approve " + tid + "`"
		if testkit.Dig(m, "result", "status") != "working" || testkit.Dig(m, "result", "statusMessage") != want {
			t.Errorf("tasks/get after one approval: %v", m)
		}
		if st, _ := approve(t, bob, tid); st != 200 {
			t.Fatalf("bob: %d", st)
		}
		res := c.TaskRPC(3, "tasks/result", tid).Message(t)
		if text, _ := first(testkit.Dig(res, "result", "content"), "text").(string); !strings.Contains(text, "u-003") {
			t.Errorf("result %v", res)
		}
		if n := d.Calls("delete_user") - before; n != 1 {
			t.Errorf("upstream executions = %d, want 1", n)
		}
	})

	for _, tc := range []struct{ name, rejecter string }{{"reject by the second approver", bob}, {"reject by the first approver", alice}} {
		t.Run(tc.name, func(t *testing.T) {
			c := &testkit.RPC{T: t, URL: g.MCP}
			c.Initialize()
			before := d.Calls("delete_user")
			tid := c.CallTask(1, "delete_user", `{"user_id":"u-004"}`)
			if st, _ := approve(t, alice, tid); st != 200 {
				t.Fatalf("alice: %d", st)
			}
			if st, v := g.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/reject", tc.rejecter, `{"reason":"no"}`); st != 200 || testkit.Dig(v, "state") != "rejected" {
				t.Fatalf("reject: %d %v", st, v)
			}
			if code, name := testkit.ErrorOf(c.TaskRPC(2, "tasks/result", tid).Message(t)); code != -32007 || name != "ApprovalRejected" {
				t.Errorf("rejected result: %v %q", code, name)
			}
			if st, _ := approve(t, carol, tid); st != http.StatusConflict {
				t.Errorf("approval after the reject: %d", st)
			}
			if n := d.Calls("delete_user") - before; n != 0 {
				t.Errorf("rejected call executed %d times", n)
			}
		})
	}
}

// first is key of the first element of the JSON array list (nil when there is none).
func first(list any, key string) any {
	arr, _ := list.([]any)
	if len(arr) == 0 {
		return nil
	}
	return testkit.Dig(arr[0], key)
}
