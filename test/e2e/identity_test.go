package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// TestSelfApprovalByLookalikeIdentity: a caller whose identity header is a confusable variant
// of an approver's name ("alıce", Cyrillic "alicе") cannot approve their own call with that
// approver's token; a name with invisible code points ("alice" + U+200B, a soft hyphen
// inside) is refused at the door with InvalidIdentity and creates no task.
func TestSelfApprovalByLookalikeIdentity(t *testing.T) {
	_, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, approvalRules+"server:\n  identity_header: X-Forwarded-User\n"), approverEnv, nil)
	g.WaitReady(t)
	as := func(user string) *testkit.RPC {
		c := &testkit.RPC{T: t, URL: g.MCP}
		c.Initialize()
		c.Header = http.Header{"X-Forwarded-User": {user}}
		return c
	}
	for _, user := range []string{"alıce", "alic\u0435", "Alıce"} {
		tid := as(user).CallTask(1, "delete_user", `{"user_id":"u-002"}`)
		if st, body := g.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/approve", "alice-secret-token", `{}`); st != http.StatusForbidden {
			t.Errorf("alice approving the call of %q: HTTP %d %v, want 403 self_approval", user, st, body)
		}
		if st, _ := g.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/reject", "bob-secret-token", `{}`); st != http.StatusOK {
			t.Errorf("bob deciding the call of %q: HTTP %d", user, st)
		}
	}
	for _, user := range []string{"alice\u200b", "ali\u00adce", "al\u2060ice", "alice\ufe0f", "\ufeffalice"} {
		r := as(user).Post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_user","arguments":{"user_id":"u-002"},"task":{"ttl":60000}}}`)
		_, name := testkit.ErrorOf(r.Message(t))
		if r.Status != http.StatusBadRequest || name != "InvalidIdentity" {
			t.Errorf("identity %q: HTTP %d %s, want 400 InvalidIdentity\n%s", user, r.Status, name, r.Body)
		}
	}
	if n := len(pendingApprovals(t, g)); n != 0 {
		t.Errorf("%d approvals pending, want none", n)
	}
	if strings.Contains(g.Logs.String(), "\u200b") {
		t.Error("an invisible code point reached the log unescaped")
	}
}
