package intercept

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/execution"
	"github.com/tollgate-mcp/tollgate/internal/governance"
	"github.com/tollgate-mcp/tollgate/internal/gwtools"
	"github.com/tollgate-mcp/tollgate/internal/rules"
	"github.com/tollgate-mcp/tollgate/internal/session"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

// newRewriteGateway wires a Gateway as newHarness does, once per fuzz target (newHarness
// needs a *testing.T and a stub upstream; rewriting a tools/list page contacts nothing).
func newRewriteGateway(tb testing.TB) *Gateway {
	tb.Helper()
	cfg := parseUnitConfig(tb, unitConfig)
	snap, err := governance.Build(cfg, nil)
	if err != nil {
		tb.Fatalf("governance: %v", err)
	}
	snaps := &governance.Holder{}
	snaps.Store(snap)
	uc, err := upstream.New("http://127.0.0.1:1/mcp", upstream.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	proms, sessions := execution.NewPromotions(), session.NewRegistry(0, nil)
	br := NewBridge(uc, nil)
	ann := NewAnnotations(snaps, uc, br, nil)
	runner := execution.New(execution.Options{Upstream: uc, Sessions: sessions, Promotions: proms, Modern: br.ExecuteModern})
	tc := cfg.Tasks
	mgr := tasks.NewManager(store.NewMemory(), runner, ann.Recheck, tasks.Options{
		DefaultTTL: tc.DefaultTTL.D(), MaxTTL: tc.MaxTTL.D(), PollInterval: tc.PollInterval.D(),
		Quotas: tc.Quotas, Workflow: snaps.Workflow,
	})
	tb.Cleanup(func() { _ = mgr.Close() })
	return NewGateway(Deps{Snapshots: snaps, Upstream: uc, Sessions: sessions, Promotions: proms,
		Tasks: mgr, Tools: gwtools.New(mgr, nil, proms, gwtools.Options{}), Annotations: ann, Bridge: br})
}

// rewriteSeeds are tools/list results covering the shapes upstreams send.
var rewriteSeeds = []string{
	`{"tools":[]}`,
	`{"tools":[{"name":"read_file","inputSchema":{"type":"object"}}]}`,
	`{"tools":[{"name":"delete_repo","execution":null}]}`,
	`{"tools":[{"name":"delete_repo","execution":{}}]}`,
	`{"tools":[{"name":"delete_repo","execution":{ }}]}`,
	`{"tools":[{"name":"transfer_funds","execution":{"x-vendor":{"a":[1,2]},"ttlHint":5}}]}`,
	`{"tools":[{"name":"drop_table","execution":{"taskSupport":"required"}}]}`,
	`{"tools":[{"name":"read_file","execution":{"taskSupport":"optional","other":true}}]}`,
	`{"tools":[{"name":"read_file","execution":{"other":true,"taskSupport":"forbidden"}}]}`,
	`{"tools":[{"name":"read_file","execution":{"taskSupport":"sometimes"}}]}`,
	`{"tools":[{"name":"read_file","execution":{"taskSupport":7}}]}`,
	`{"tools":[{"name":"audit_log"},{"name":"delete_x"},{"name":"drop_y"},{"name":"transfer_z"}],"nextCursor":"p2"}`,
	`{"tools":[{"name":"x"}],"nextCursor":null,"_meta":{"k":"v"}}`,
	`{"tools":[{"name":"del\u0065te_x"},{"name":"drop\"quoted\""},{"name":"a\\b\/c"}]}`,
	`{"tools":[{"name":"outil_été","title":"日本語ツール","description":"emoji 🚀 \u2028"}]}`,
	"{ \"tools\" : [ { \"name\" : \"delete_x\" , \"execution\" : { \"taskSupport\" : \"optional\" } } , {\"name\":\"y\"}\n\t] }",
	"{\"tools\":[{\"name\":\"x\",\"execution\":{\"a\":1 }\n}]}",
	`{"tools":[{"name":"tollgate_list_tasks","description":"shadow"},{"name":"tollgate_other"}]}`,
	`{"tools":[{"name":"x","name":"delete_y"}]}`,
	`{"tools":[{"name":"x","execution":{"taskSupport":"forbidden","taskSupport":"required"}}]}`,
	`{"tools":[{"name":"x","annotations":{"taskSupport":"required"}}]}`,
	`{"tools":[{"name":"x","execution":[]}]}`,
	`{"tools":[{"name":1}]}`,
	`{"tools":[1,"s",null,[],{}]}`,
	`{"tools":{}}`,
	`{"nope":[]}`,
	`[]`,
	``,
	`{"tools":[{"name":"x"`,
}

// FuzzRewriteTools: the tools/list rewrite never panics, and on a well-formed page it sets a
// valid execution.taskSupport on every upstream tool while leaving every other byte the
// upstream sent as it was (REQ-CORE-007 F-002; spec 2025-11-25 tasks: taskSupport is
// forbidden|optional|required).
func FuzzRewriteTools(f *testing.F) {
	for _, s := range rewriteSeeds {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	g := newRewriteGateway(f)
	var defs [][]byte
	for _, d := range g.d.Tools.Definitions() {
		defs = append(defs, d)
	}
	f.Fuzz(func(t *testing.T, result []byte, upTasks bool) {
		g.ann.setUpstreamTasks(upTasks)
		out, err := g.rewriteTools(result, true, listView{})
		if err != nil {
			return
		}
		if json.Valid(result) && !json.Valid(out) {
			t.Fatalf("valid page rewritten to invalid JSON:\n in: %s\nout: %s", result, out)
		}
		in, ok := wellFormedPage(result)
		if !ok {
			return
		}
		checkRewrite(t, g, in, result, out, upTasks, defs)
	})
}

// page is a tools/list result decoded member by member.
type page struct {
	members map[string]json.RawMessage
	tools   []map[string]json.RawMessage
	names   []string
}

// wellFormedPage decodes a result whose tools are objects with string names and an execution
// member that is absent, null or an object (spec 2025-11-25 schema: Tool.execution is
// ToolExecution). Duplicate keys are refused: their meaning is not defined (RFC 8259 §4).
func wellFormedPage(result []byte) (page, bool) {
	var p page
	if !json.Valid(result) || hasDuplicateKeys(result) || json.Unmarshal(result, &p.members) != nil {
		return p, false
	}
	var raw []json.RawMessage
	if json.Unmarshal(p.members["tools"], &raw) != nil {
		return p, false
	}
	for _, r := range raw {
		var tool map[string]json.RawMessage
		var name string
		if json.Unmarshal(r, &tool) != nil || tool == nil || json.Unmarshal(tool["name"], &name) != nil || tool["name"] == nil {
			return p, false
		}
		if ex, has := tool["execution"]; has && string(ex) != "null" && ex[0] != '{' {
			return p, false
		}
		p.tools = append(p.tools, tool)
		p.names = append(p.names, name)
	}
	return p, true
}

// hasDuplicateKeys reports whether any object in the JSON text repeats a key.
func hasDuplicateKeys(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	var walk func() bool // reports a duplicate in the next value
	walk = func() bool {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return false
				}
				if seen[k.(string)] {
					return true
				}
				seen[k.(string)] = true
				if walk() {
					return true
				}
			}
			_, _ = dec.Token()
		case json.Delim('['):
			for dec.More() {
				if walk() {
					return true
				}
			}
			_, _ = dec.Token()
		}
		return false
	}
	return walk()
}

func checkRewrite(t *testing.T, g *Gateway, in page, result, out []byte, upTasks bool, defs [][]byte) {
	t.Helper()
	var got map[string]json.RawMessage
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("output is not an object: %v\n%s", err, out)
	}
	// Members other than tools are untouched.
	for k, v := range in.members {
		if k != "tools" && !bytes.Equal(got[k], v) {
			t.Fatalf("member %q changed: %s -> %s", k, v, got[k])
		}
	}
	if len(got) != len(in.members) {
		t.Fatalf("members added or lost: %s -> %s", result, out)
	}
	var outTools []json.RawMessage
	if err := json.Unmarshal(got["tools"], &outTools); err != nil {
		t.Fatalf("tools: %v", err)
	}
	// Upstream tools with Tollgate's reserved tollgate_ prefix are dropped; Tollgate's own
	// follow on the last page.
	var kept []int
	for i, name := range in.names {
		if !strings.HasPrefix(name, gwtools.Prefix) {
			kept = append(kept, i)
		}
	}
	want := len(kept)
	if lastPage(result) {
		want += len(defs)
	}
	if len(outTools) != want {
		t.Fatalf("%d tools out, want %d upstream + own:\n in: %s\nout: %s", len(outTools), want, result, out)
	}
	for j, d := range outTools[len(kept):] {
		if !bytes.Equal(d, defs[j]) {
			t.Fatalf("own tool %d is %s, want %s", j, d, defs[j])
		}
	}
	s := g.d.Snapshots.Load()
	for j, i := range kept {
		src := in.tools[i]
		var dst map[string]json.RawMessage
		if err := json.Unmarshal(outTools[j], &dst); err != nil {
			t.Fatalf("tool %d: %v: %s", j, err, outTools[j])
		}
		if len(dst) != len(src)+boolInt(src["execution"] == nil) {
			t.Fatalf("tool %d members %d -> %d:\n in: %s\nout: %s", j, len(src), len(dst), result, out)
		}
		for k, v := range src {
			if k != "execution" && !bytes.Equal(dst[k], v) {
				t.Fatalf("tool %d member %q changed: %s -> %s", j, k, v, dst[k])
			}
		}
		var srcEx, dstEx map[string]json.RawMessage
		_ = json.Unmarshal(src["execution"], &srcEx) // absent or null: nil
		if err := json.Unmarshal(dst["execution"], &dstEx); err != nil || dstEx == nil {
			t.Fatalf("tool %d execution %s is not an object", j, dst["execution"])
		}
		for k, v := range srcEx {
			if k != "taskSupport" && !bytes.Equal(dstEx[k], v) {
				t.Fatalf("tool %d execution.%s changed: %s -> %s", j, k, v, dstEx[k])
			}
		}
		if len(dstEx) != len(srcEx)+boolInt(srcEx["taskSupport"] == nil) {
			t.Fatalf("tool %d execution members %d -> %d", j, len(srcEx), len(dstEx))
		}
		var ann string
		if err := json.Unmarshal(dstEx["taskSupport"], &ann); err != nil {
			t.Fatalf("tool %d taskSupport %s: %v", j, dstEx["taskSupport"], err)
		}
		switch rules.TaskSupport(ann) {
		case rules.Forbidden, rules.Optional, rules.Required:
		default:
			t.Fatalf("tool %d taskSupport %q", j, ann)
		}
		// The annotation is the one governance gives the decoded name and the upstream's own
		// support (a string taskSupport; anything else counts as absent).
		var own string
		_ = json.Unmarshal(srcEx["taskSupport"], &own)
		name := in.names[i]
		if exp := rules.Annotation(s.Rules.Decide(name), upTasks, rules.TaskSupport(own), s.Config.Tasks.SyncApproval); rules.TaskSupport(ann) != exp {
			t.Fatalf("tool %q annotated %q, want %q", name, ann, exp)
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestRewriteSeeds runs the fuzz property over the seeds in a plain test run.
func TestRewriteSeedsWellFormed(t *testing.T) {
	g := newRewriteGateway(t)
	defs := g.d.Tools.Definitions()
	wellFormed := 0
	for _, s := range rewriteSeeds {
		in, ok := wellFormedPage([]byte(s))
		if !ok {
			continue
		}
		wellFormed++
		for _, up := range []bool{false, true} {
			g.ann.setUpstreamTasks(up)
			out, err := g.rewriteTools([]byte(s), true, listView{})
			if err != nil {
				t.Fatalf("%s: %v", s, err)
			}
			var d [][]byte
			for _, x := range defs {
				d = append(d, x)
			}
			checkRewrite(t, g, in, []byte(s), out, up, d)
		}
	}
	if wellFormed < 15 {
		t.Fatalf("only %d seeds are well formed; the property is barely exercised", wellFormed)
	}
}

// FuzzListCursor: decodeCursor never panics, and every cursor it accepts re-encodes to one it
// accepts again with the same meaning.
func FuzzListCursor(f *testing.F) {
	for _, c := range []listCursor{{}, {TG: 50}, {Ph: 1}, {Ph: 1, Up: json.RawMessage(`"up-2"`)},
		{Ph: 1, Up: json.RawMessage(`{"a":[1,2]}`)}, {Ph: 1, Up: json.RawMessage(`"<&>"`)}} {
		f.Add(encodeCursor(c))
	}
	for _, s := range []string{"", "e30", "eyJwaCI6Mn0", "eyJ0ZyI6LTF9", "not base64!", "eyJ1cCI6bnVsbH0",
		"eyJ0ZyI6MSwidGciOjJ9", "eyJwaCI6MSwidXAiOiB7ICJhIiA6IDEgfSB9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, ok := decodeCursor(s)
		if !ok {
			return
		}
		if c.TG < 0 || c.Ph < 0 || c.Ph > 1 {
			t.Fatalf("accepted out-of-range cursor %+v", c)
		}
		again, ok := decodeCursor(encodeCursor(c))
		if !ok {
			t.Fatalf("cursor %q accepted as %+v but its re-encoding %q is not", s, c, encodeCursor(c))
		}
		if again.TG != c.TG || again.Ph != c.Ph || !sameJSON(t, again.Up, c.Up) {
			t.Fatalf("cursor %+v re-decoded as %+v", c, again)
		}
	})
}

// sameJSON compares two raw JSON values by meaning (encoding compacts and escapes).
func sameJSON(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b) || string(a)+string(b) == "null"
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// TestCursorRoundTripLongUpstreamCursor: the upstream's nextCursor travels inside Tollgate's
// tasks/list cursor (F-006.5); every upstream cursor Tollgate accepts to carry (up to
// maxUpstreamCursor) must round-trip, escaping-prone bytes included.
func TestCursorRoundTripLongUpstreamCursor(t *testing.T) {
	for _, up := range []string{strings.Repeat("a", 4090), strings.Repeat("<", 700), strings.Repeat("&", maxUpstreamCursor-2)} {
		c := listCursor{Ph: 1, Up: json.RawMessage(`"` + up + `"`)}
		if _, ok := decodeCursor(encodeCursor(c)); !ok {
			t.Errorf("cursor with a %d-byte upstream cursor does not round-trip", len(up))
		}
	}
}

// TestRewriteMalformedExecution: a tool whose execution is not an object still gets
// execution.taskSupport (REQ-CORE-007 F-002: every tool is annotated); absent would read as
// "forbidden" even for a task-required tool.
func TestRewriteMalformedExecution(t *testing.T) {
	g := newRewriteGateway(t)
	for _, ex := range []string{`[]`, `"x"`, `5`, `true`} {
		out, err := g.rewriteTools([]byte(`{"tools":[{"name":"delete_x","execution":`+ex+`}],"nextCursor":"n"}`), true, listView{})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(out, []byte(`"taskSupport"`)) {
			t.Errorf("execution %s: tool not annotated: %s", ex, out)
		}
	}
}
