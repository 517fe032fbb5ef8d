package approval

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

// TestWhoAmI: the console names who it is signed in as. A token names its approver and the
// approver_groups that list them by exact name (groups grant; "Bob" is not bob); a login-proxy
// sign-in adds the groups the proxy sent; without credentials the answer is 401.
func TestWhoAmI(t *testing.T) {
	cfg := signInConfig()
	cfg.ApproverGroups = map[string][]string{"finance": {"Bob"}, "ops": {"alice", "bob"}, "hr": {"carol"}}
	api := NewHandler(newFake(), testAuth(), Options{Config: func() *config.Config { return cfg }})
	h := ProxySignIn(api, ProxyOptions{SignIn: SignInFrom(func() *config.Config { return cfg })})
	get := func(remote string, hdr map[string][]string) (int, WhoAmI) {
		w := send(h, http.MethodGet, "/api/v1/approvals/whoami", remote, hdr)
		var out WhoAmI
		if w.Code == http.StatusOK {
			if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
				t.Fatalf("whoami body %s: %v", w.Body, err)
			}
		}
		return w.Code, out
	}
	if st, got := get("127.0.0.1:1", map[string][]string{"Authorization": {"Bearer " + bobToken}}); st != 200 ||
		got.Approver != "bob" || got.SignIn != "token" || !slices.Equal(got.Groups, []string{"ops"}) {
		t.Errorf("bob by token: %d %+v", st, got)
	}
	if st, got := get("10.0.0.5:4000", map[string][]string{config.DefaultUserHeader: {"alice"}, config.DefaultGroupsHeader: {"sre,ops"}}); st != 200 ||
		got.Approver != "alice" || got.SignIn != "login_proxy" || !slices.Equal(got.Groups, []string{"ops", "sre"}) {
		t.Errorf("alice through the login proxy: %d %+v", st, got)
	}
	if st, _ := get("127.0.0.1:1", nil); st != http.StatusUnauthorized {
		t.Errorf("no credentials: %d, want 401", st)
	}
}
