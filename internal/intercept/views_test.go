package intercept

import (
	"context"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/governance"
	"github.com/tollgate-mcp/tollgate/internal/identity"
)

// TestRecomputeCallerViews: a reload that changes only what some callers may call (a rule
// narrowed to callers) changes no annotation of view 0, yet those callers' listings change:
// Recompute reports the tools as changed, so list_changed goes out. Without caller-dependent
// rules, a reload that changes nothing reports nothing (fails on the old Recompute: it
// compared view 0 only).
func TestRecomputeCallerViews(t *testing.T) {
	h := newHarness(t, unitConfig)
	h.listTools(t, `[{"name":"drop_x","inputSchema":{"type":"object"}},{"name":"read_x","inputSchema":{"type":"object"}}]`)
	h.gw.Recompute(h.snaps.Load())
	build := func(yaml string) *governance.Snapshot {
		t.Helper()
		snap, err := governance.Build(parseUnitConfig(t, yaml), nil)
		if err != nil {
			t.Fatal(err)
		}
		h.snaps.Store(snap)
		return snap
	}
	if changed := h.gw.Recompute(build(unitConfig)); len(changed) != 0 {
		t.Fatalf("an unchanged reload reported %v", changed)
	}
	// drop_* becomes forwarded for the dba alone: view 0 still sees it denied.
	narrowed := strings.Replace(unitConfig, `    - {match: "drop_*", action: deny}`,
		"    - {match: \"drop_*\", action: forward, callers: [\"user:dba\"]}\n    - {match: \"drop_*\", action: deny}", 1)
	if changed := h.gw.Recompute(build(narrowed)); len(changed) == 0 {
		t.Fatal("a reload that changed the dba's listing reported no change (no list_changed)")
	}
	// Back to rules without callers: the dba's view changes again.
	if changed := h.gw.Recompute(build(unitConfig)); len(changed) == 0 {
		t.Fatal("a reload that removed a callers rule reported no change")
	}
}

const cedarViewConfig = `schema: 1
server:
  caller_auth: {type: jwt, issuer: "https://issuer.example"}
sources:
  - {id: upstream, kind: mcp, url: "http://127.0.0.1:1/mcp"}
governance:
  defaults: {action: forward}
  rules:
    - {match: "*", action: policy, policy_id: all}
cedar: {policies: [contractors.cedar]}
tasks: {sync_approval: hold}
`

// TestCedarToolView: with per-caller tool views, a tool a Cedar forbid denies a caller
// whatever the arguments is left out of that caller's listing (both eras) and of no one
// else's; a forbid that reads the arguments hides nothing; the hidden tool's call is still
// refused. Two callers in one group share one remembered listing key, another caller gets
// its own. Fails on the old listing, which hid only rule denials.
func TestCedarToolView(t *testing.T) {
	h := newHarness(t, cedarViewConfig)
	const tools = `[{"name":"delete_file","inputSchema":{"type":"object"}},{"name":"wipe_disk","inputSchema":{"type":"object"}},{"name":"read_file","inputSchema":{"type":"object"}}]`
	contractor := &identity.Caller{Subject: "carl", Groups: []string{"contractors"}, Verified: true}
	employee := &identity.Caller{Subject: "emma", Groups: []string{"staff"}, Verified: true}
	as := func(c *identity.Caller, request string) *Exchange {
		x := exchange(t, nil, request)
		x.Subject, x.Caller = c.Subject, c
		return x
	}
	list := func(c *identity.Caller) string {
		t.Helper()
		x := as(c, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		res := h.router.Route(context.Background(), x)
		if res.Forward == nil {
			t.Fatal("tools/list not forwarded")
		}
		return string(applyTransform(t, res.Forward, x, `{"jsonrpc":"2.0","id":1,"result":{"tools":`+tools+`}}`))
	}
	for range 2 { // the second listing comes from the rewritten-page cache
		if got := list(contractor); strings.Contains(got, `"delete_file"`) || !strings.Contains(got, `"wipe_disk"`) || !strings.Contains(got, `"read_file"`) {
			t.Fatalf("contractor lists %s: want delete_file hidden, wipe_disk and read_file shown", got)
		}
		if got := list(employee); !strings.Contains(got, `"delete_file"`) || !strings.Contains(got, `"wipe_disk"`) {
			t.Fatalf("employee lists %s: want delete_file and wipe_disk", got)
		}
	}
	out, err := h.gw.appendOwnTools([]byte(`{"tools":`+tools+`}`), h.gw.listView(as(contractor, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)))
	if err != nil || strings.Contains(string(out), `"delete_file"`) {
		t.Fatalf("2026-07-28 contractor listing %s (%v): want delete_file hidden", out, err)
	}

	// The view key: what Cedar reads of the principal, so another contractor has a key of
	// its own (a forbid may name a subject), the same caller the same key.
	k1 := h.gw.listView(as(contractor, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`))
	k2 := h.gw.listView(as(&identity.Caller{Subject: "carl", Groups: []string{"contractors"}, Verified: true}, `{"jsonrpc":"2.0","id":4,"method":"tools/list"}`))
	k3 := h.gw.listView(as(employee, `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`))
	if k1.viewKey != k2.viewKey || k1.viewKey == k3.viewKey || k1.tag() == k3.tag() {
		t.Fatalf("view keys: same caller %v/%v, other caller %v", k1.viewKey, k2.viewKey, k3.viewKey)
	}

	// The hidden tool's call is refused by the call's own evaluation.
	res := h.router.Route(context.Background(), as(contractor, `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/tmp/x"}}}`))
	if e := replyError(t, res); e.Code != -32003 {
		t.Fatalf("hidden delete_file called: %+v, want -32003 PolicyDenied", e)
	}
}

// TestCedarToolViewOff: with tool_view: all, or an audit-mode rule, Cedar hides nothing.
func TestCedarToolViewOff(t *testing.T) {
	contractor := &identity.Caller{Subject: "carl", Groups: []string{"contractors"}, Verified: true}
	for name, yaml := range map[string]string{
		"tool_view all": strings.Replace(cedarViewConfig, `issuer: "https://issuer.example"}`, `issuer: "https://issuer.example", tool_view: all}`, 1),
		"audit mode":    strings.Replace(cedarViewConfig, `policy_id: all}`, `policy_id: all, mode: audit}`, 1),
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, yaml)
			x := exchange(t, nil, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
			x.Subject, x.Caller = contractor.Subject, contractor
			res := h.router.Route(context.Background(), x)
			got := string(applyTransform(t, res.Forward, x, `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"delete_file","inputSchema":{"type":"object"}}]}}`))
			if !strings.Contains(got, `"delete_file"`) {
				t.Fatalf("listing %s: delete_file hidden", got)
			}
		})
	}
}

// TestAuditModeDenyListed: a rule in audit mode records its deny and forwards the call, so a
// per-caller listing keeps the tool (the old listing hid it although its calls ran).
func TestAuditModeDenyListed(t *testing.T) {
	h := newHarness(t, `schema: 1
server:
  caller_auth: {type: jwt, issuer: "https://issuer.example"}
sources:
  - {id: upstream, kind: mcp, url: "http://127.0.0.1:1/mcp"}
governance:
  defaults: {action: forward}
  rules:
    - {match: "drop_*", action: deny, mode: audit}
    - {match: "wipe_*", action: deny}
`)
	c := &identity.Caller{Subject: "carl", Verified: true}
	x := exchange(t, nil, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	x.Subject, x.Caller = c.Subject, c
	res := h.router.Route(context.Background(), x)
	got := string(applyTransform(t, res.Forward, x, `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"drop_x","inputSchema":{"type":"object"}},{"name":"wipe_x","inputSchema":{"type":"object"}}]}}`))
	if !strings.Contains(got, `"drop_x"`) || strings.Contains(got, `"wipe_x"`) {
		t.Fatalf("listing %s: want drop_x (audit mode) shown, wipe_x (enforced deny) hidden", got)
	}
}
