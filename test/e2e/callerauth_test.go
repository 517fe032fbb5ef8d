package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/demo"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// callerAuthConfig: tokens of issuer iss; deletes need approval; alice runs agent-alice.
func callerAuthConfig(iss string) string {
	return `server:
  caller_auth:
    type: jwt
    issuer: ` + iss + `
governance:
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve}
approval:
  default: {}
approvers:
  - {name: alice, token_env: ALICE_TOKEN, email: alice@example.com, subjects: [agent-alice]}
  - {name: bob, token_env: BOB_TOKEN}
tasks:
  hold_budget: 300ms
`
}

func withBearer(c *testkit.RPC, tok string) *testkit.RPC {
	c.Header = http.Header{"Authorization": {"Bearer " + tok}}
	return c
}

// TestCallerAuthChallenge: without a token, or with a bad one, /mcp answers 401 with the
// RFC 9728 challenge in both eras; the metadata it names says which authorization server
// issues tokens for which resource; the reasons are counted.
func TestCallerAuthChallenge(t *testing.T) {
	_, upURL := testkit.StartDemo(t)
	is := testkit.StartIssuer(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, callerAuthConfig(is.URL)), approverEnv, nil)
	g.WaitReady(t)

	legacy := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	modern := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
	post := func(body, auth string, modernEra bool) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, g.MCP, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if modernEra {
			req.Header.Set("MCP-Protocol-Version", "2026-07-28")
			req.Header.Set("Mcp-Method", "tools/list")
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := testkit.HTTPClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	wantMeta := strings.TrimSuffix(g.MCP, "/mcp") + "/.well-known/oauth-protected-resource/mcp"
	for _, tc := range []struct {
		name, auth, reason string
		modern             bool
	}{
		{"no token, 2025-11-25", "", "missing", false},
		{"no token, 2026-07-28", "", "missing", true},
		{"garbage, 2025-11-25", "Bearer not-a-token", "malformed", false},
		{"other audience, 2026-07-28", "Bearer " + is.Token(t, "https://other.example.com/mcp", map[string]any{"sub": "x"}), "audience", true},
		{"basic", "Basic YWxpY2U6c2VjcmV0", "malformed", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := legacy
			if tc.modern {
				body = modern
			}
			resp, b := post(body, tc.auth, tc.modern)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("HTTP %d, want 401: %s", resp.StatusCode, b)
			}
			ch := resp.Header.Get("WWW-Authenticate")
			if !strings.HasPrefix(ch, `Bearer resource_metadata="`+wantMeta+`"`) {
				t.Errorf("WWW-Authenticate %q, want resource_metadata %s", ch, wantMeta)
			}
			if tc.auth != "" && !strings.Contains(ch, `error="invalid_token"`) {
				t.Errorf("WWW-Authenticate %q lacks error=invalid_token for a sent token", ch)
			}
			if tc.auth == "" && strings.Contains(ch, "error=") {
				t.Errorf("WWW-Authenticate %q has an error for a request without a token (RFC 6750 §3.1)", ch)
			}
			if !strings.Contains(b, `"reason":"`+tc.reason+`"`) || !strings.Contains(b, `"error":"Unauthorized"`) {
				t.Errorf("body %s, want error Unauthorized with reason %s", b, tc.reason)
			}
		})
	}

	resp, err := testkit.HTTPClient.Get(wantMeta)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var md struct {
		Resource string   `json:"resource"`
		Servers  []string `json:"authorization_servers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&md); err != nil || md.Resource != g.MCP || len(md.Servers) != 1 || md.Servers[0] != is.URL {
		t.Fatalf("metadata %+v (%v), want resource %s and server %s", md, err, g.MCP, is.URL)
	}
	if n := metricValue(t, g, `tollgate_caller_auth_failures_total{reason="missing"}`); n != 2 {
		t.Errorf("missing tokens counted %v, want 2", n)
	}
	if n := metricValue(t, g, `tollgate_caller_auth_failures_total{reason="audience"}`); n != 1 {
		t.Errorf("wrong audiences counted %v, want 1", n)
	}
	if strings.Contains(g.Logs.String(), "not-a-token") {
		t.Error("a sent token reached the log")
	}
}

// TestCallerAuthOwners: the verified subject owns tasks across sessions: another subject
// cannot see them, the same subject's identical retry from a new session attaches to the
// pending approval, and the approver whose agent the subject is cannot approve it.
func TestCallerAuthOwners(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	is := testkit.StartIssuer(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, callerAuthConfig(is.URL)), approverEnv, nil)
	g.WaitReady(t)
	aliceAgent := is.Token(t, g.MCP, map[string]any{"sub": "agent-alice"})
	other := is.Token(t, g.MCP, map[string]any{"sub": "agent-carol"})

	s1 := withBearer(&testkit.RPC{T: t, URL: g.MCP}, aliceAgent)
	s1.Initialize()
	tid := s1.CallTask(1, "delete_user", `{"user_id":"u-002"}`)

	// Another subject: the task is not found, not listed.
	c := withBearer(&testkit.RPC{T: t, URL: g.MCP}, other)
	c.Initialize()
	if m := c.TaskRPC(2, "tasks/get", tid).Message(t); testkit.Dig(m, "error", "data", "error") != "TaskNotFound" {
		t.Errorf("another subject's tasks/get: %v, want TaskNotFound", m)
	}
	if m := c.Post(`{"jsonrpc":"2.0","id":3,"method":"tasks/list"}`).Message(t); strings.Contains(mustJSON(m), tid) {
		t.Errorf("another subject lists %s: %v", tid, m)
	}
	// The same subject in a new session sees it.
	s2 := withBearer(&testkit.RPC{T: t, URL: g.MCP}, aliceAgent)
	s2.Initialize()
	if m := s2.TaskRPC(4, "tasks/get", tid).Message(t); testkit.Dig(m, "result", "taskId") != tid {
		t.Errorf("the same subject's new session: tasks/get %v", m)
	}

	// A plain held call, and its identical retry from another session: one approval.
	first := s1.Call(5, "delete_user", map[string]any{"user_id": "u-003"}, 0)
	held := namedTaskID(t, first)
	retry := s2.Call(6, "delete_user", map[string]any{"user_id": "u-003"}, 0)
	if got := namedTaskID(t, retry); got != held {
		t.Errorf("retry from a second session made task %s, want it attached to %s", got, held)
	}

	// alice's agent made the calls: alice may not approve them; bob may.
	if st, body := g.AdminRequest(t, "POST", "/api/v1/approvals/"+held+"/approve", "alice-secret-token", `{}`); st != http.StatusForbidden || body["error"] != "self_approval" {
		t.Errorf("alice approves her agent's call: %d %v, want 403 self_approval", st, body)
	}
	if st, body := g.AdminRequest(t, "POST", "/api/v1/approvals/"+held+"/approve", "bob-secret-token", `{}`); st != http.StatusOK {
		t.Fatalf("bob approves: %d %v", st, body)
	}
	waitFor(t, "the approved delete ran once", func() bool { return d.Calls("delete_user") == 1 })
}

// namedTaskID is the task a held call's "awaiting approval" result names.
func namedTaskID(t *testing.T, m map[string]any) string {
	t.Helper()
	s := mustJSON(m)
	i := strings.Index(s, "tg_")
	if i < 0 {
		t.Fatalf("no task named in %s", s)
	}
	j := i + 3
	for j < len(s) && (s[j] == '-' || s[j] >= '0' && s[j] <= '9' || s[j] >= 'a' && s[j] <= 'f') {
		j++
	}
	return s[i:j]
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestCallerRulesAndToolView: rules narrowed to callers decide differently for a finance
// caller and another one (the finance caller's transfer is forwarded, the other's held), and
// each caller's tools/list leaves out what it can never call, in both eras; a hidden tool's
// call is still refused.
func TestCallerRulesAndToolView(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	is := testkit.StartIssuer(t)
	cfg := `server:
  caller_auth: {type: jwt, issuer: ` + is.URL + `}
governance:
  defaults: {action: forward}
  rules:
    - {match: "transfer_*", action: forward, callers: ["group:finance"]}
    - {match: "transfer_*", action: approve}
    - {match: "drop_*", action: forward, callers: ["user:dba"]}
    - {match: "drop_*", action: deny}
approval:
  default: {}
approvers:
  - {name: bob, token_env: BOB_TOKEN}
tasks:
  hold_budget: 300ms
`
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, cfg), approverEnv, nil)
	g.WaitReady(t)
	fin := withBearer(&testkit.RPC{T: t, URL: g.MCP}, is.Token(t, g.MCP, map[string]any{"sub": "ann", "groups": []string{"finance"}}))
	fin.Initialize()
	other := withBearer(&testkit.RPC{T: t, URL: g.MCP}, is.Token(t, g.MCP, map[string]any{"sub": "carl", "groups": []string{"sales"}}))
	other.Initialize()
	dba := withBearer(&testkit.RPC{T: t, URL: g.MCP}, is.Token(t, g.MCP, map[string]any{"sub": "dba"}))
	dba.Initialize()

	names := func(c *testkit.RPC) string {
		m := c.Post(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`).Message(t)
		var out []string
		for _, tl := range testkit.Dig(m, "result", "tools").([]any) {
			out = append(out, tl.(map[string]any)["name"].(string))
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		c        *testkit.RPC
		who      string
		wantDrop bool
	}{{fin, "finance", false}, {other, "sales", false}, {dba, "dba", true}} {
		// twice: the second listing comes from the view's memo
		for range 2 {
			got := names(tc.c)
			if strings.Contains(got, "drop_table") != tc.wantDrop {
				t.Errorf("%s lists %s; drop_table shown = %v, want %v", tc.who, got, !tc.wantDrop, tc.wantDrop)
			}
			if !strings.Contains(got, "transfer_funds") || !strings.Contains(got, "read_file") {
				t.Errorf("%s lists %s, want transfer_funds and read_file", tc.who, got)
			}
		}
	}
	// The hidden tool's call is refused all the same.
	if m := other.Call(10, "drop_table", map[string]any{"table": "orders"}, 0); testkit.Dig(m, "error", "data", "error") != "PolicyDenied" {
		t.Errorf("hidden drop_table called: %v, want PolicyDenied", m)
	}
	// finance transfers without approval; sales is held.
	args := map[string]any{"from_account": "acc-payroll", "to_account": "acc-savings", "amount": 5, "currency": "USD"}
	if m := fin.Call(11, "transfer_funds", args, 0); testkit.Dig(m, "result", "isError") == true || strings.Contains(mustJSON(m), "tg_") {
		t.Errorf("finance transfer not forwarded: %v", m)
	}
	if m := other.Call(12, "transfer_funds", args, 0); !strings.Contains(mustJSON(m), "tg_") {
		t.Errorf("sales transfer not held for approval: %v", m)
	}
	if n := len(d.Transfers()); n != 1 {
		t.Errorf("upstream transfers = %d, want 1 (finance's)", n)
	}

	// 2026-07-28: the same view.
	modern := `{"jsonrpc":"2.0","id":13,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
	for _, tc := range []struct {
		c        *testkit.RPC
		wantDrop bool
	}{{other, false}, {dba, true}} {
		c := &testkit.RPC{T: t, URL: g.MCP, Header: tc.c.Header.Clone()}
		c.Header.Set("MCP-Protocol-Version", "2026-07-28")
		c.Header.Set("Mcp-Method", "tools/list")
		r := c.Post(modern)
		if r.Status != http.StatusOK {
			t.Fatalf("modern tools/list: HTTP %d %s", r.Status, r.Body)
		}
		if strings.Contains(string(r.Body), `"drop_table"`) != tc.wantDrop {
			t.Errorf("modern tools/list %s: drop_table shown, want %v", r.Body, tc.wantDrop)
		}
	}
}

// TestAdminTokenIssuer: approvers use the approvals API with their own access tokens
// (server.admin_auth.token_issuer): the subject names the approver exactly, the token's groups
// admit it to a workflow listing group:finance; a look-alike subject and a token for another
// audience decide nothing.
func TestAdminTokenIssuer(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	is := testkit.StartIssuer(t)
	cfg := `server:
  admin_auth:
    token_issuer: {issuer: ` + is.URL + `, audience: tollgate-admin}
governance:
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve, approval: payments}
approval:
  payments: {approvers: ["group:finance"]}
approvers:
  - {name: alice, token_env: ALICE_TOKEN, subjects: [sso-alice]}
  - {name: bob, token_env: BOB_TOKEN, subjects: [sso-bob]}
approver_groups:
  finance: [bob]
`
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, cfg), approverEnv, nil)
	g.WaitReady(t)
	tid := g.NewClient(t).CallTask(1, "delete_user", `{"user_id":"u-002"}`)
	approve := func(tok string) (int, map[string]any) {
		return g.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/approve", tok, `{}`)
	}
	if st, body := approve(is.Token(t, "tollgate-admin", map[string]any{"sub": "sso-alice"})); st != http.StatusForbidden || body["error"] != "not_authorized" {
		t.Errorf("alice (not in finance) by token: %d %v, want 403 not_authorized", st, body)
	}
	if st, body := approve(is.Token(t, "tollgate-admin", map[string]any{"sub": "SSO-alice", "groups": []string{"finance"}})); st != http.StatusForbidden || body["error"] != "unknown_approver" {
		t.Errorf("a look-alike subject: %d %v, want 403 unknown_approver", st, body)
	}
	if st, _ := approve(is.Token(t, g.MCP, map[string]any{"sub": "sso-alice", "groups": []string{"finance"}})); st != http.StatusUnauthorized {
		t.Errorf("a token for another audience: %d, want 401", st)
	}
	if n := d.Calls("delete_user"); n != 0 {
		t.Fatalf("ran %d times before an authorised approval", n)
	}
	// alice's token carries the IdP's group finance: admitted as the proxy's groups are.
	if st, body := approve(is.Token(t, "tollgate-admin", map[string]any{"sub": "sso-alice", "groups": []string{"finance"}})); st != http.StatusOK {
		t.Fatalf("alice with group finance by token: %d %v", st, body)
	}
	waitFor(t, "the approved call to run", func() bool { return d.Calls("delete_user") == 1 })
}

// TestUpstreamCredential: with caller auth, the upstream gets Tollgate's own credential
// (sources[0].credential, read from a file) on every request — the handshake, a forwarded call
// and an approved call run later — and never the caller's token.
func TestUpstreamCredential(t *testing.T) {
	d := demo.New()
	var mu sync.Mutex
	var seen []string
	rec := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		d.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(rec.Close)
	is := testkit.StartIssuer(t)
	cfg := "schema: 1\nsources:\n  - id: upstream\n    kind: mcp\n    url: " + rec.URL + "/mcp\n    credential: {value_file: upstream.cred}\n" +
		callerAuthConfig(is.URL)
	g := testkit.StartGateway(t, cfg, approverEnv, map[string]string{"upstream.cred": "Bearer tollgate-own-upstream-credential\n"})
	g.WaitReady(t)
	tok := is.Token(t, g.MCP, map[string]any{"sub": "agent-carol"})
	c := withBearer(&testkit.RPC{T: t, URL: g.MCP}, tok)
	c.Initialize()
	if m := c.Call(1, "read_file", map[string]any{"path": "/etc/motd"}, 0); m["error"] != nil {
		t.Fatalf("forwarded call: %v", m)
	}
	tid := c.CallTask(2, "delete_user", `{"user_id":"u-002"}`)
	if st, body := g.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/approve", "bob-secret-token", `{}`); st != http.StatusOK {
		t.Fatalf("approve: %d %v", st, body)
	}
	waitFor(t, "the approved call to run", func() bool { return d.Calls("delete_user") == 1 })
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < 3 {
		t.Fatalf("the upstream saw %d requests", len(seen))
	}
	for i, v := range seen {
		if v != "Bearer tollgate-own-upstream-credential" {
			t.Errorf("upstream request %d carried Authorization %q, want Tollgate's own credential", i, v)
		}
	}
}

// TestCedarToolView: a Cedar forbid that denies a group a tool whatever the arguments hides
// that tool from the group's members' listings, in both eras, and from no one else's; a
// forbid that depends on the arguments hides nothing; the hidden tool's call is refused and
// never reaches the upstream, while the other caller's same call runs.
func TestCedarToolView(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	is := testkit.StartIssuer(t)
	cfg := `server:
  caller_auth: {type: jwt, issuer: ` + is.URL + `}
governance:
  defaults: {action: forward}
  rules:
    - {match: "*", action: policy, policy_id: people}
cedar: {policies: [people.cedar]}
`
	policies := `@id("contractors.no_delete")
forbid (principal in Group::"contractors", action, resource == ToolCall::"delete_user");

@id("orders.keep")
forbid (principal, action, resource == ToolCall::"drop_table")
when { resource.arguments has table && resource.arguments.table == "orders" };

@id("allow")
permit (principal, action, resource) when { context.policy_id == "people" };
`
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, cfg), approverEnv, map[string]string{"people.cedar": policies})
	g.WaitReady(t)
	contractor := withBearer(&testkit.RPC{T: t, URL: g.MCP}, is.Token(t, g.MCP, map[string]any{"sub": "carl", "groups": []string{"contractors"}}))
	contractor.Initialize()
	employee := withBearer(&testkit.RPC{T: t, URL: g.MCP}, is.Token(t, g.MCP, map[string]any{"sub": "emma", "groups": []string{"staff"}}))
	employee.Initialize()

	names := func(c *testkit.RPC) string {
		m := c.Post(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`).Message(t)
		var out []string
		for _, tl := range testkit.Dig(m, "result", "tools").([]any) {
			out = append(out, tl.(map[string]any)["name"].(string))
		}
		return "," + strings.Join(out, ",") + ","
	}
	for range 2 { // the second listing of each comes from its view's memo
		if got := names(contractor); strings.Contains(got, ",delete_user,") || !strings.Contains(got, ",drop_table,") || !strings.Contains(got, ",read_file,") {
			t.Errorf("contractor lists %s: want delete_user hidden, drop_table and read_file shown", got)
		}
		if got := names(employee); !strings.Contains(got, ",delete_user,") || !strings.Contains(got, ",drop_table,") {
			t.Errorf("employee lists %s: want delete_user and drop_table", got)
		}
	}
	modern := `{"jsonrpc":"2.0","id":13,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
	for _, tc := range []struct {
		c    *testkit.RPC
		want bool
	}{{contractor, false}, {employee, true}} {
		c := &testkit.RPC{T: t, URL: g.MCP, Header: tc.c.Header.Clone()}
		c.Header.Set("MCP-Protocol-Version", "2026-07-28")
		c.Header.Set("Mcp-Method", "tools/list")
		r := c.Post(modern)
		if r.Status != http.StatusOK {
			t.Fatalf("modern tools/list: HTTP %d %s", r.Status, r.Body)
		}
		if strings.Contains(string(r.Body), `"delete_user"`) != tc.want {
			t.Errorf("modern tools/list %s: delete_user shown, want %v", r.Body, tc.want)
		}
	}
	// The hidden tool's call is refused by the call's own evaluation; the employee's runs.
	if m := contractor.Call(10, "delete_user", map[string]any{"user_id": "u-002"}, 0); testkit.Dig(m, "error", "data", "error") != "PolicyDenied" {
		t.Errorf("hidden delete_user called: %v, want PolicyDenied", m)
	}
	if n := d.Calls("delete_user"); n != 0 {
		t.Fatalf("the contractor's delete_user reached the upstream %d times", n)
	}
	if m := employee.Call(11, "delete_user", map[string]any{"user_id": "u-002"}, 0); m["error"] != nil || testkit.Dig(m, "result", "isError") == true {
		t.Errorf("employee delete_user: %v, want it run", m)
	}
	if n := d.Calls("delete_user"); n != 1 {
		t.Errorf("upstream delete_user calls = %d, want 1 (the employee's)", n)
	}
}
