package e2e

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// TestAnonymousCallersKeptApart: 2026-07-28 callers with neither an identity nor an
// Authorization credential are not one owner. One anonymous caller's held task never shows up
// in another's tollgate_list_tasks or tollgate_await_activity, yet stays reachable through its
// id; an approval the caller itself would give (destination elicitation) needs an identified
// caller (docs/SECURITY.md "Owners").
func TestAnonymousCallersKeptApart(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, modernRules), nil, nil)
	g.WaitReady(t)
	victim := &modernClient{t: t, url: g.MCP, tasks: true}
	attacker := &modernClient{t: t, url: g.MCP, tasks: true}

	m := victim.call(1, "tools/call", map[string]any{"name": "delete_user", "arguments": map[string]any{"user_id": "u-victim"}})
	tid, _ := testkit.Dig(m, "result", "taskId").(string)
	if !strings.HasPrefix(tid, "tg_") {
		t.Fatalf("victim's call: %v", m)
	}
	// A second pending task, decided now: its event is queued for whoever owns it.
	m = victim.call(2, "tools/call", map[string]any{"name": "delete_user", "arguments": map[string]any{"user_id": "u-victim-2"}})
	decided, _ := testkit.Dig(m, "result", "taskId").(string)
	if st, _ := g.AdminRequest(t, "POST", "/api/v1/approvals/"+decided+"/reject", testkit.AdminToken, `{"reason":"no"}`); st != 200 {
		t.Fatalf("reject: HTTP %d", st)
	}

	list := attacker.do(3, "tools/call", map[string]any{"name": "tollgate_list_tasks", "arguments": map[string]any{"include_finished": true}}, nil)
	if list.Status != 200 || strings.Contains(string(list.Body), tid) || strings.Contains(string(list.Body), decided) {
		t.Errorf("another anonymous caller's tollgate_list_tasks shows the victim's tasks: HTTP %d %s", list.Status, list.Body)
	}
	await := attacker.do(4, "tools/call", map[string]any{"name": "tollgate_await_activity", "arguments": map[string]any{"timeout_ms": 300}}, nil)
	if await.Status != 200 || strings.Contains(string(await.Body), tid) || strings.Contains(string(await.Body), decided) {
		t.Errorf("another anonymous caller's tollgate_await_activity shows the victim's tasks: HTTP %d %s", await.Status, await.Body)
	}

	// The id is the capability: the holder of it reads its task, anonymously.
	if s := testkit.Dig(victim.call(5, "tasks/get", map[string]any{"taskId": tid}), "result", "status"); s != "working" {
		t.Errorf("tasks/get by id: status %v", s)
	}
	// An identified caller does not reach an anonymous task, even with its id.
	named := &modernClient{t: t, url: g.MCP, tasks: true, hdr: http.Header{"Authorization": {"Bearer someone"}}}
	if code, _ := testkit.ErrorOf(named.call(6, "tasks/get", map[string]any{"taskId": tid})); code != -32602 {
		t.Errorf("identified caller read an anonymous task: code %v", code)
	}

	// Destination elicitation: the requester's answer would approve; anonymous is refused.
	m = attacker.call(7, "tools/call", map[string]any{"name": "transfer_funds", "arguments": map[string]any{"from": "a", "to": "b", "amount": 5}})
	if code, name := testkit.ErrorOf(m); code != -32600 || name != "IdentityRequired" {
		t.Errorf("anonymous call under destination elicitation: %v", m)
	}
	if n := d.Calls("transfer_funds") + d.Calls("delete_user"); n != 0 {
		t.Errorf("upstream called %d times", n)
	}
	// An identified caller still answers its own question.
	alice := &modernClient{t: t, url: g.MCP, tasks: true, hdr: http.Header{"X-User": {"alice"}}}
	m = alice.call(8, "tools/call", map[string]any{"name": "transfer_funds", "arguments": map[string]any{"from": "a", "to": "b", "amount": 5}})
	if testkit.Dig(m, "result", "status") != "input_required" {
		t.Errorf("identified caller under destination elicitation: %v", m)
	}
}

// fromAddr is an HTTP client whose connections come from local address ip (any 127/8
// address reaches a loopback listener on Linux), so one test can be several sources.
func fromAddr(ip string) *http.Client {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DialContext: dialer.DialContext}}
}

// TestPendingQuotaPerSource: one source that presents a new Authorization credential (a new
// owner) for every call fills its own share of pending approvals, not Tollgate's: a caller
// from another address still gets its approval, and the error names the limit that was hit.
func TestPendingQuotaPerSource(t *testing.T) {
	_, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, `governance:
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve}
tasks:
  quotas: {max_pending_per_owner: 100, max_pending_per_source: 20, max_pending_total: 30}
`), nil, nil)
	g.WaitReady(t)

	created, refused := 0, map[string]int{}
	for i := range 40 {
		c := &modernClient{t: t, url: g.MCP, tasks: true, http: fromAddr("127.0.0.1"),
			hdr: http.Header{"Authorization": {fmt.Sprintf("Bearer flood-%d", i)}}}
		m := c.call(i, "tools/call", map[string]any{"name": "delete_user", "arguments": map[string]any{"user_id": fmt.Sprint(i)}})
		if testkit.Dig(m, "result", "taskId") != nil {
			created++
			continue
		}
		if code, name := testkit.ErrorOf(m); code != -32013 || name != "CapacityExceeded" {
			t.Fatalf("call %d: %v", i, m)
		}
		lim, _ := testkit.Dig(m, "error", "data", "limit").(string)
		refused[lim]++
	}
	if created != 20 || refused["max_pending_per_source"] != 20 {
		t.Errorf("flood from one source: %d created, refused %v; want 20 created, 20 refused by max_pending_per_source", created, refused)
	}
	// Another source is served, in either era; so is an anonymous caller there.
	other := &modernClient{t: t, url: g.MCP, tasks: true, http: fromAddr("127.0.0.2"), hdr: http.Header{"Authorization": {"Bearer legit"}}}
	if m := other.call(100, "tools/call", map[string]any{"name": "delete_user", "arguments": map[string]any{"user_id": "legit"}}); testkit.Dig(m, "result", "taskId") == nil {
		t.Errorf("caller from another source refused: %v", m)
	}
	anon := &modernClient{t: t, url: g.MCP, tasks: true, http: fromAddr("127.0.0.3")}
	if m := anon.call(101, "tools/call", map[string]any{"name": "delete_user", "arguments": map[string]any{"user_id": "anon"}}); testkit.Dig(m, "result", "taskId") == nil {
		t.Errorf("anonymous caller from another source refused: %v", m)
	}
	legacy := &testkit.RPC{T: t, URL: g.MCP, Client: fromAddr("127.0.0.4")}
	legacy.Initialize()
	if tid := legacy.CallTask(102, "delete_user", `{"user_id":"legacy"}`); !strings.HasPrefix(tid, "tg_") {
		t.Errorf("legacy caller from another source: task %q", tid)
	}
}
