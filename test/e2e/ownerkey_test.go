package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// TestModernOwnerKeySecretAndDurable: without TOLLGATE_OWNER_HASH_KEY the owner of a
// 2026-07-28 caller's task was an HMAC under a published constant, and approvers saw an unkeyed
// hash of it: both checkable offline against guessed credentials. The key is now secret and
// kept with the file store, so the caller still owns its task after a restart.
func TestModernOwnerKeySecretAndDurable(t *testing.T) {
	_, upURL := testkit.StartDemo(t)
	env := map[string]string{"TOLLGATE_DATA_DIR": t.TempDir(), "ALICE_TOKEN": "alice-secret-token", "BOB_TOKEN": "bob-secret-token"}
	cfg := testkit.BasicConfig(upURL, approvalRules)
	const cred = "Bearer guessable-credential"

	first := testkit.StartGateway(t, cfg, env, nil)
	first.WaitReady(t)
	c := &modernClient{t: t, url: first.MCP, tasks: true, hdr: http.Header{"Authorization": {cred}}}
	m := c.call(1, "tools/call", map[string]any{"name": "delete_user", "arguments": map[string]any{"user_id": "u-key"}})
	tid, _ := testkit.Dig(m, "result", "taskId").(string)
	if !strings.HasPrefix(tid, "tg_") {
		t.Fatalf("no task: %v", m)
	}
	_, view := first.AdminRequest(t, "GET", "/api/v1/approvals/"+tid, "alice-secret-token", "")
	mac := hmac.New(sha256.New, []byte("tollgate owner v1"))
	mac.Write([]byte(cred))
	public := sha256.Sum256([]byte("auth:" + hex.EncodeToString(mac.Sum(nil)[:16])))
	if owner, _ := view["owner"].(string); owner == "" || owner == hex.EncodeToString(public[:6]) {
		t.Fatalf("the owner hash shown to approvers (%q) can be computed from the credential alone", owner)
	}
	first.Stop()

	second := testkit.StartGateway(t, cfg, env, nil)
	second.WaitReady(t)
	c.url = second.MCP
	if s := testkit.Dig(c.call(2, "tasks/get", map[string]any{"taskId": tid}), "result", "status"); s != "working" {
		t.Fatalf("after a restart the caller no longer owns its task: status %v", s)
	}
	other := &modernClient{t: t, url: second.MCP, tasks: true, hdr: http.Header{"Authorization": {"Bearer someone-else"}}}
	if r := other.call(3, "tasks/get", map[string]any{"taskId": tid}); testkit.Dig(r, "error") == nil {
		t.Errorf("another credential sees the task: %v", r)
	}
}
