package intercept

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/disclose"
	"github.com/tollgate-mcp/tollgate/internal/era"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// modernExchange builds a 2026-07-28 exchange as the proxy would: headers mirrored from the
// body, era.Classify applied. caps is the clientCapabilities JSON; hdr adds headers.
func modernExchange(t testing.TB, method, params, caps string, hdr ...string) *Exchange {
	t.Helper()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}`
	if params == "" {
		params = "{" + meta + "}"
	} else {
		params = strings.TrimSuffix(params, "}") + "," + meta + "}"
	}
	body := `{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":` + params + `}`
	m, err := jsonrpc.Parse([]byte(body))
	if err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	r.Header.Set(era.HeaderProtocolVersion, era.Modern)
	r.Header.Set(era.HeaderMethod, method)
	for _, k := range []string{"name", "uri", "taskId"} {
		var p map[string]any
		_ = json.Unmarshal(m.Params, &p)
		if v, ok := p[k].(string); ok {
			r.Header.Set(era.HeaderName, era.EncodeHeaderValue(v))
		}
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	req, rej := era.Classify(r.Header, m)
	if rej != nil {
		t.Fatalf("%s refused: %s", body, rej.Err.Message)
	}
	return &Exchange{HTTP: r, Body: []byte(body), Msg: m, Modern: req}
}

const (
	tasksCaps = `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`
	noCaps    = `{}`
)

// modernUpstream makes the gateway believe the upstream serves 2026-07-28 (no probe).
func (h *gwHarness) modernUpstream() {
	h.gw.br.mu.Lock()
	h.gw.br.known, h.gw.br.modern, h.gw.br.checked = true, true, time.Now()
	h.gw.br.mu.Unlock()
}

func (h *gwHarness) routeModern(x *Exchange) Result {
	return h.router.Route(context.Background(), x)
}

// TestModernToolsCallGovernance pins governance of a modern tools/call per the tasks
// extension ("Capability Negotiation": MUST NOT return CreateTaskResult to a client that did
// not declare the extension; -32021 with requiredCapabilities when a task is needed) and
// docs/contract.md §3 (deny never reaches the upstream).
func TestModernToolsCallGovernance(t *testing.T) {
	cases := []struct {
		name, tool, caps, sync string
		want                   string // forward | deny | missing | task | promoted
	}{
		{"forward rule passes through", "read_file", tasksCaps, "error", "forward"},
		{"forward without the extension passes too", "read_file", noCaps, "error", "forward"},
		{"deny rule is -32003 whatever the caps", "drop_table", tasksCaps, "error", "deny"},
		{"approve with the extension is a tg_ task", "delete_user", tasksCaps, "error", "task"},
		{"approve without the extension is -32021", "delete_user", noCaps, "error", "missing"},
		{"approve without the extension, sync_approval promote", "delete_user", noCaps, "promote", "promoted"},
		{"force_required with the extension is a tg_ task", "audit_log", tasksCaps, "error", "task"},
		{"force_required without the extension is -32021", "audit_log", noCaps, "error", "missing"},
		// As TaskRequired in 2025-11-25: force_required admits no hold fallback.
		{"force_required behind an approve rule, without the extension, under hold, is -32021", "delete_audit", noCaps, "hold", "missing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, strings.Replace(unitConfig, "sync_approval: error}", "sync_approval: "+tc.sync+"}", 1))
			h.modernUpstream()
			x := modernExchange(t, "tools/call", `{"name":"`+tc.tool+`","arguments":{"id":1}}`, tc.caps)
			res := h.routeModern(x)
			switch tc.want {
			case "forward":
				if res.Forward == nil {
					t.Fatalf("not forwarded: %s", res.Reply)
				}
			case "deny", "missing":
				e := replyError(t, res)
				want, status := -32003, 200
				if tc.want == "missing" {
					want, status = -32021, 400
					if _, ok := e.Data["requiredCapabilities"].(map[string]any)["extensions"].(map[string]any)[era.TasksExtension]; !ok {
						t.Errorf("requiredCapabilities = %v", e.Data["requiredCapabilities"])
					}
				}
				if e.Code != want || statusOf(res) != status {
					t.Fatalf("code %d HTTP %d, want %d %d", e.Code, statusOf(res), want, status)
				}
			case "task":
				var r map[string]any
				_ = json.Unmarshal(replyResult(t, res.Reply), &r)
				if r["resultType"] != "task" || !strings.HasPrefix(r["taskId"].(string), tasks.IDPrefix) || r["task"] != nil ||
					r["ttlMs"] == nil || r["pollIntervalMs"] == nil || r["inputRequests"] != nil || r["result"] != nil {
					t.Fatalf("CreateTaskResult = %v", r)
				}
				if res.After != nil {
					res.After()
				}
			case "promoted":
				var r map[string]any
				_ = json.Unmarshal(replyResult(t, res.Reply), &r)
				if r["resultType"] != "complete" || r["content"] == nil {
					t.Fatalf("promoted result = %v", r)
				}
			}
			if tc.want != "forward" {
				for _, m := range h.up.methods() {
					if m == "tools/call" && tc.want != "task" {
						t.Fatalf("upstream saw tools/call")
					}
				}
			}
		})
	}
}

func statusOf(r Result) int {
	if r.Status == 0 {
		return 200
	}
	return r.Status
}

// TestModernTasksMethods: tasks extension "Supported Methods", "Error Handling",
// "Reservations": tasks/result and tasks/list are gone (-32601, HTTP 404), tasks/* need the
// extension declared (-32021), unknown ids are -32602, acks carry resultType "complete", and
// tasks/get inlines the outcome.
func TestModernTasksMethods(t *testing.T) {
	h := newHarness(t, unitConfig)
	h.modernUpstream()
	for _, m := range []string{"tasks/result", "tasks/list", "initialize", "ping", "logging/setLevel", "resources/subscribe"} {
		res := h.routeModern(modernExchange(t, m, `{"taskId":"tg_x"}`, tasksCaps))
		if e := replyError(t, res); e.Code != -32601 || statusOf(res) != 404 {
			t.Errorf("%s: code %d HTTP %d", m, e.Code, statusOf(res))
		}
	}
	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		res := h.routeModern(modernExchange(t, m, `{"taskId":"tg_x"}`, noCaps))
		if e := replyError(t, res); e.Code != -32021 || statusOf(res) != 400 {
			t.Errorf("%s without the extension: code %d HTTP %d", m, e.Code, statusOf(res))
		}
		res = h.routeModern(modernExchange(t, m, `{"taskId":"tg_00000000-0000-4000-8000-000000000000"}`, tasksCaps))
		if e := replyError(t, res); e.Code != -32602 {
			t.Errorf("%s of an unknown task: code %d", m, e.Code)
		}
	}

	// A task created, read, cancelled.
	x := modernExchange(t, "tools/call", `{"name":"delete_user","arguments":{}}`, tasksCaps)
	var created map[string]any
	_ = json.Unmarshal(replyResult(t, h.routeModern(x).Reply), &created)
	id := created["taskId"].(string)
	var got map[string]any
	_ = json.Unmarshal(replyResult(t, h.routeModern(modernExchange(t, "tasks/get", `{"taskId":"`+id+`"}`, tasksCaps)).Reply), &got)
	if got["resultType"] != "complete" || got["status"] != "working" || got["statusMessage"] != "Awaiting approval by a human (workflow default): approve in the approvals console or with `tollgate approvals approve "+id+"`" {
		t.Fatalf("tasks/get = %v", got)
	}
	for _, m := range []string{"tasks/update", "tasks/cancel", "tasks/cancel"} { // a second cancel acks too
		var ack map[string]any
		_ = json.Unmarshal(replyResult(t, h.routeModern(modernExchange(t, m, `{"taskId":"`+id+`","inputResponses":{}}`, tasksCaps)).Reply), &ack)
		if ack["resultType"] != "complete" || len(ack) != 1 {
			t.Fatalf("%s ack = %v", m, ack)
		}
	}
	_ = json.Unmarshal(replyResult(t, h.routeModern(modernExchange(t, "tasks/get", `{"taskId":"`+id+`"}`, tasksCaps)).Reply), &got)
	if got["status"] != "cancelled" {
		t.Fatalf("after cancel: %v", got)
	}
}

// TestModernOwner: ownership without sessions — identity header, else a keyed hash of the
// Authorization credential (never the credential itself), else the id is the capability.
func TestModernOwner(t *testing.T) {
	h := newHarness(t, unitConfig+"server: {identity_header: X-User}\n")
	owner := func(hdr ...string) string {
		x := modernExchange(t, "tools/list", "", noCaps, hdr...)
		var got string
		g := h.gw
		g.identified(func(_ context.Context, x *Exchange) Result { got = g.modernOwner(x); return Result{} })(context.Background(), x)
		return got
	}
	if got := owner("X-User", "alice", "Authorization", "Bearer s3cret"); got != "user:alice" {
		t.Errorf("identity: %q", got)
	}
	a := owner("Authorization", "Bearer s3cret")
	if !strings.HasPrefix(a, "auth:") || strings.Contains(a, "s3cret") || a != owner("Authorization", "Bearer s3cret") {
		t.Errorf("credential owner %q: want a stable hash without the secret", a)
	}
	if a == owner("Authorization", "Bearer other") {
		t.Error("two credentials share an owner")
	}
	h.gw.d.OwnerKey = "another key"
	if a == owner("Authorization", "Bearer s3cret") {
		t.Error("TOLLGATE_OWNER_HASH_KEY does not key the hash")
	}
	if got := owner(); got != tasks.Anonymous {
		t.Errorf("anonymous: %q", got)
	}
}

// TestModernUpstreamTaskBinding: an upstream task id is routable only for the caller whose
// tools/call created it; a tg_-looking upstream id stays the upstream's.
func TestModernUpstreamTaskBinding(t *testing.T) {
	h := newHarness(t, unitConfig)
	h.modernUpstream()
	call := modernExchange(t, "tools/call", `{"name":"read_file","arguments":{}}`, tasksCaps, "Authorization", "Bearer a")
	res := h.routeModern(call)
	for _, id := range []string{"up-1", "tg_upstream"} {
		applyTransform(t, res.Forward, call, `{"jsonrpc":"2.0","id":7,"result":{"resultType":"task","taskId":"`+id+`","status":"working","createdAt":"x","lastUpdatedAt":"x","ttlMs":60000}}`)
		if r := h.routeModern(modernExchange(t, "tasks/get", `{"taskId":"`+id+`"}`, tasksCaps, "Authorization", "Bearer a")); r.Forward == nil {
			t.Errorf("%s: creator not forwarded: %s", id, r.Reply)
		}
		for _, other := range [][]string{{"Authorization", "Bearer b"}, nil} {
			if e := replyError(t, h.routeModern(modernExchange(t, "tasks/get", `{"taskId":"`+id+`"}`, tasksCaps, other...))); e.Code != -32602 {
				t.Errorf("%s: other caller %v got code %d", id, other, e.Code)
			}
		}
	}
	// An id nobody bound: identified callers get not-found, an anonymous one is passed on
	// (the id is its capability; the upstream decides).
	if e := replyError(t, h.routeModern(modernExchange(t, "tasks/get", `{"taskId":"up-unknown"}`, tasksCaps, "Authorization", "Bearer a"))); e.Code != -32602 {
		t.Errorf("unbound id for an identified caller: %d", e.Code)
	}
	if r := h.routeModern(modernExchange(t, "tasks/get", `{"taskId":"up-unknown"}`, tasksCaps)); r.Forward == nil {
		t.Errorf("unbound id for an anonymous caller was not forwarded")
	}
}

// TestModernUpstreamTaskBindingExpires: a binding lasts for the upstream task's ttlMs, as the
// shared store's does: after it the creator gets "not found" from Tollgate, and the id may be
// bound anew by the caller whose CreateTaskResult carries it next.
func TestModernUpstreamTaskBindingExpires(t *testing.T) {
	h := newHarness(t, unitConfig)
	h.modernUpstream()
	created := func(cred, ttl string) {
		x := modernExchange(t, "tools/call", `{"name":"read_file","arguments":{}}`, tasksCaps, "Authorization", cred)
		applyTransform(t, h.routeModern(x).Forward, x, `{"jsonrpc":"2.0","id":7,"result":{"resultType":"task","taskId":"up-short","status":"working","createdAt":"x","lastUpdatedAt":"x","ttlMs":`+ttl+`}}`)
	}
	get := func(cred string) Result {
		return h.routeModern(modernExchange(t, "tasks/get", `{"taskId":"up-short"}`, tasksCaps, "Authorization", cred))
	}
	created("Bearer a", "50")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for get("Bearer a").Forward != nil { // forwarded while the binding lasts
		select {
		case <-ctx.Done():
			t.Fatal("the binding outlived its ttlMs")
		case <-time.After(10 * time.Millisecond): // the clock: no event to await
		}
	}
	if e := replyError(t, get("Bearer a")); e.Code != -32602 {
		t.Fatalf("after its ttlMs the creator got %d, want -32602", e.Code)
	}
	created("Bearer b", "60000")
	if get("Bearer b").Forward == nil || get("Bearer a").Forward != nil {
		t.Error("an expired id bound anew is not its new creator's alone")
	}
}

// TestModernUpstreamTaskBindingFair: one source creating upstream task after task (past the
// per-replica table's old total of 100 000) makes room only with its own bindings: another
// source's caller still reaches the upstream task it created (it was pushed out before, and
// got "not found").
func TestModernUpstreamTaskBindingFair(t *testing.T) {
	h := newHarness(t, unitConfig)
	h.modernUpstream()
	from := func(x *Exchange, addr string) *Exchange { x.HTTP.RemoteAddr = addr + ":4000"; return x }
	quiet := from(modernExchange(t, "tools/call", `{"name":"read_file","arguments":{}}`, tasksCaps, "Authorization", "Bearer quiet"), "192.0.2.10")
	applyTransform(t, h.routeModern(quiet).Forward, quiet, `{"jsonrpc":"2.0","id":7,"result":{"resultType":"task","taskId":"up-quiet","status":"working","createdAt":"x","lastUpdatedAt":"x","ttlMs":3600000}}`)

	flood := from(modernExchange(t, "tools/call", `{"name":"read_file","arguments":{}}`, tasksCaps, "Authorization", "Bearer flood"), "192.0.2.66")
	fwd := h.routeModern(flood).Forward
	began := time.Now()
	for i := range 100_001 {
		m := &jsonrpc.Message{Result: json.RawMessage(`{"resultType":"task","taskId":"up-` + strconv.Itoa(i) + `","ttlMs":3600000}`)}
		fwd.Transform(flood, m)
	}
	get := func(id, cred, addr string) Result {
		return h.routeModern(from(modernExchange(t, "tasks/get", `{"taskId":"`+id+`"}`, tasksCaps, "Authorization", cred), addr))
	}
	if r := get("up-quiet", "Bearer quiet", "192.0.2.10"); r.Forward == nil {
		t.Fatalf("the quiet caller's upstream task is no longer reachable: %s", r.Reply)
	}
	if r := get("up-100000", "Bearer flood", "192.0.2.66"); r.Forward == nil {
		t.Errorf("the flooding caller's newest upstream task is not reachable: %s", r.Reply)
	}
	if r := get("up-0", "Bearer flood", "192.0.2.66"); r.Forward != nil {
		t.Error("the flooding caller kept its oldest binding past its share")
	}
	// 99 001 bindings gave way: one warning a minute says so (more than one only when the flood
	// took longer than that, as under -race on a loaded machine), naming the source by its hash
	// only.
	most := 1 + int(time.Since(began)/upTasksWarnEvery)
	var warned []string
	for _, l := range strings.Split(h.logs.String(), "\n") {
		if strings.Contains(l, "upstream task bindings full") {
			warned = append(warned, l)
		}
	}
	if len(warned) < 1 || len(warned) > most {
		t.Errorf("%d warnings about evicted bindings, want 1 to %d (one a minute): %q", len(warned), most, warned)
	}
	for _, w := range warned {
		if !strings.Contains(w, "source_hash="+disclose.OwnerHash("ip:192.0.2.66")) ||
			!strings.Contains(w, "reason=source_share") || strings.Contains(w, "192.0.2.66") {
			t.Errorf("warning %q: want the flooding source hashed, reason source_share", w)
		}
	}
}

// TestDiscoverRewrite: server/discover lists both eras and adds the tasks extension, keeping
// everything else (spec 2026-07-28 server/discover; tasks extension "Capability Negotiation").
func TestDiscoverRewrite(t *testing.T) {
	out, err := discoverResult([]byte(`{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true},"extensions":{"x/y":{"a":1}}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up","version":"1"}},"ttlMs":5,"cacheScope":"public"}`))
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	_ = json.Unmarshal(out, &r)
	caps := r["capabilities"].(map[string]any)
	ext := caps["extensions"].(map[string]any)
	if ext[era.TasksExtension] == nil || ext["x/y"] == nil || caps["tools"] == nil || r["ttlMs"] != float64(5) || r["cacheScope"] != "public" ||
		len(r["supportedVersions"].([]any)) != len(era.Supported) || r["_meta"] == nil {
		t.Fatalf("rewritten: %s", out)
	}

	syn, err := synthesiseDiscover([]byte(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"tasks":{"list":{}}},"serverInfo":{"name":"old","version":"2"},"instructions":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(syn, &r)
	caps = r["capabilities"].(map[string]any)
	if caps["tasks"] != nil || caps["tools"] == nil || caps["extensions"].(map[string]any)[era.TasksExtension] == nil ||
		r["resultType"] != "complete" || r["instructions"] != "hi" || r["_meta"].(map[string]any)[era.MetaServerInfo] == nil || r["protocolVersion"] != nil {
		t.Fatalf("synthesised: %s", syn)
	}
}

// TestExecutionMeta: an approved call runs with the caller's _meta less the tasks extension,
// so the upstream answers it instead of creating a task of its own.
func TestExecutionMeta(t *testing.T) {
	got := executionMeta(json.RawMessage(`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{},"x/y":{}}},"k":1}`))
	var m map[string]any
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatal(err)
	}
	caps := m[era.MetaClientCapabilities].(map[string]any)
	if caps["elicitation"] == nil || caps["extensions"].(map[string]any)["x/y"] == nil || caps["extensions"].(map[string]any)[era.TasksExtension] != nil || m["k"] == nil {
		t.Fatalf("executionMeta = %s", got)
	}
	if string(executionMeta(nil)) != ownMeta {
		t.Fatalf("no _meta: %s", executionMeta(nil))
	}
}

// TestLegacyBody: a bridged request loses exactly the modern _meta keys.
func TestLegacyBody(t *testing.T) {
	m, _ := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":3}}}`))
	out, err := jsonrpc.Parse(legacyBody(m))
	if err != nil {
		t.Fatal(err)
	}
	if string(out.ID) != `"a"` || out.Method != "tools/call" || strings.Contains(string(out.Params), "protocolVersion") || !strings.Contains(string(out.Params), `"progressToken":3`) {
		t.Fatalf("legacyBody = %s", out.Raw)
	}
}

// TestWithResultType: results Tollgate makes carry resultType "complete"; one already set is
// kept (spec 2026-07-28 schema Result).
func TestWithResultType(t *testing.T) {
	for in, want := range map[string]string{
		`{}`:                              `complete`,
		`{"content":[]}`:                  `complete`,
		`{"resultType":"input_required"}`: `input_required`,
	} {
		var r map[string]any
		_ = json.Unmarshal(withResultType([]byte(in)), &r)
		if r["resultType"] != want {
			t.Errorf("%s → %v", in, r)
		}
	}
}

// TestCacheHints: results Tollgate makes or bridges carry the CacheableResult members (spec
// 2026-07-28 schema CacheableResult: ttlMs and cacheScope required); the upstream's are kept.
func TestCacheHints(t *testing.T) {
	for in, want := range map[string]string{
		`{"tools":[]}`: `{"tools":[],"ttlMs":0,"cacheScope":"private"}`,
		`{"tools":[],"ttlMs":60000,"cacheScope":"public"}`: `{"tools":[],"ttlMs":60000,"cacheScope":"public"}`,
	} {
		if got := string(withCacheHints([]byte(in), "private")); got != want {
			t.Errorf("%s → %s, want %s", in, got, want)
		}
	}
}

// TestInitializeFromDiscover: a legacy client in front of a modern-only upstream gets an
// InitializeResult made from the DiscoverResult (capabilities without the modern extensions,
// serverInfo from the result _meta).
func TestInitializeFromDiscover(t *testing.T) {
	b, err := initializeFromDiscover([]byte(`{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true},"extensions":{"io.modelcontextprotocol/tasks":{}}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up","version":"3"}},"instructions":"i"}`), "2025-06-18")
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	_ = json.Unmarshal(b, &r)
	caps := r["capabilities"].(map[string]any)
	if r["protocolVersion"] != "2025-06-18" || caps["tools"] == nil || caps["extensions"] != nil || r["serverInfo"].(map[string]any)["name"] != "up" || r["instructions"] != "i" {
		t.Fatalf("InitializeResult = %s", b)
	}
}

// TestModernBody: a legacy request sent to a modern-only upstream carries the modern _meta
// (spec 2026-07-28 basic/index "_meta": required on every request), keeps the caller's own
// _meta keys, and yields the Mcp-Name value.
func TestModernBody(t *testing.T) {
	for _, tc := range []struct{ in, name string }{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","arguments":{},"_meta":{"progressToken":"p"}}}`, "greet"},
		{`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"file:///a"}}`, "file:///a"},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`, ""},
	} {
		m, _ := jsonrpc.Parse([]byte(tc.in))
		b, name, err := modernBody(m, nil)
		if err != nil {
			t.Fatal(err)
		}
		out, err := jsonrpc.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		h.Set(era.HeaderProtocolVersion, era.Modern)
		h.Set(era.HeaderMethod, out.Method)
		if name != "" {
			h.Set(era.HeaderName, name)
		}
		if _, rej := era.Classify(h, out); rej != nil || name != tc.name || (strings.Contains(tc.in, "progressToken") && !strings.Contains(string(b), `"progressToken":"p"`)) {
			t.Fatalf("%s → %s (name %q): %v", tc.in, b, name, rej)
		}
	}
}

// TestParking: a parked bridged call is resumed only by the caller it was issued to, once; a
// shutdown cancels what is parked.
func TestParking(t *testing.T) {
	var p parking
	ctx, cancel := context.WithCancel(context.Background())
	tok, ok := p.put(&parkedCall{owner: "auth:a", cancel: cancel, pending: map[string]parkedRequest{}}, "ip:192.0.2.1")
	if !ok || !strings.HasPrefix(tok, requestStatePrefix) || len(tok) < 30 {
		t.Fatalf("requestState %q is not an unguessable token", tok)
	}
	if p.take(tok, "auth:b") != nil {
		t.Fatal("another owner resumed the call")
	}
	if p.take(tok, "auth:a") == nil || p.take(tok, "auth:a") != nil {
		t.Fatal("the owner must resume it exactly once")
	}
	p.put(&parkedCall{owner: "auth:a", cancel: cancel, pending: map[string]parkedRequest{}}, "ip:192.0.2.1")
	p.closeAll()
	if ctx.Err() == nil {
		t.Fatal("closeAll did not cancel the parked call")
	}
}

// TestModernToolsListHidesReservedPrefix: as in the legacy era (golden tools_list_shadowed), an
// upstream tool named with Tollgate's reserved prefix is left out of a 2026-07-28 tools/list,
// whether or not Tollgate serves that name, and Tollgate's own tools close the last page.
func TestModernToolsListHidesReservedPrefix(t *testing.T) {
	h := newHarness(t, unitConfig)
	out, err := h.gw.appendOwnTools([]byte(`{"tools":[{"name":"read_file","inputSchema":{"type":"object"}},{"name":"tollgate_custom","inputSchema":{"type":"object"}},{"name":"tollgate_get_task","inputSchema":{"type":"object"}}]}`), listView{})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Tools []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	names := map[string]int{}
	for _, tl := range got.Tools {
		names[tl.Name]++
	}
	if names["read_file"] != 1 || names["tollgate_custom"] != 0 || names["tollgate_get_task"] != 1 || names["tollgate_await_activity"] != 1 {
		t.Errorf("tools: %v", names)
	}
	// 2026-07-28 has no per-tool task support (docs/eras.md): Tollgate's own tools carry none.
	if strings.Contains(string(out), "taskSupport") {
		t.Errorf("a 2026-07-28 tools/list carries execution.taskSupport: %s", out)
	}
}
