package intercept

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/session"
)

// annotationConfig decides by the upstream's tool annotations (governance.rules[].match_annotations).
const annotationConfig = `schema: 1
sources:
  - {id: upstream, kind: mcp, url: "http://127.0.0.1:1/mcp"}
governance:
  defaults: {action: forward}
  rules:
    - {match: "*", match_annotations: {readOnlyHint: true}, action: forward}
    - {match: "*", match_annotations: {destructiveHint: true, openWorldHint: false}, action: deny}
    - {match: "*", match_annotations: {destructiveHint: true}, action: approve}
tasks: {default_ttl: 10m, max_ttl: 1h, sync_approval: error}
`

// TestMatchAnnotations: rules read the annotations the upstream lists (spec 2025-11-25
// ToolAnnotations), with the spec defaults for absent hints, in tools/list and tools/call alike.
func TestMatchAnnotations(t *testing.T) {
	h := newHarness(t, annotationConfig)
	h.initUpstream(t, false)
	out := h.listTools(t, `[
		{"name":"ls","annotations":{"readOnlyHint":true,"destructiveHint":true}},
		{"name":"append","annotations":{"destructiveHint":false}},
		{"name":"wipe_local","annotations":{"destructiveHint":true,"openWorldHint":false}},
		{"name":"rm"},
		{"name":"odd","annotations":"not an object"}]`)
	m, err := jsonrpc.Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Tools []struct {
			Name      string `json:"name"`
			Execution struct {
				TaskSupport string `json:"taskSupport"`
			} `json:"execution"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(m.Result, &r); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, tl := range r.Tools {
		got[tl.Name] = tl.Execution.TaskSupport
	}
	want := map[string]string{"ls": "forbidden", "append": "forbidden", "wipe_local": "forbidden", "rm": "required", "odd": "required"}
	for name, ts := range want {
		if got[name] != ts {
			t.Errorf("%s taskSupport = %q, want %q (all %v)", name, got[name], ts, got)
		}
	}

	sess := &session.Session{ID: "s1"}
	for _, tt := range []struct {
		tool string
		want string // forward | deny code | required
	}{
		{"ls", "forward"},          // read-only wins over its declared destructiveHint
		{"append", "forward"},      // no rule matches: defaults
		{"wipe_local", "-32003"},   // destructive, closed world: denied
		{"rm", "-32601"},           // no annotations: destructive by default → approval (task required)
		{"never_listed", "-32601"}, // unknown tool: no annotations either
	} {
		res := h.route(t, sess, callRequest(`{"name":"`+tt.tool+`","arguments":{}}`))
		switch {
		case tt.want == "forward":
			if res.Forward == nil {
				t.Errorf("%s: not forwarded: %s", tt.tool, res.Reply)
			}
		default:
			e := replyError(t, res)
			if code := strconv.Itoa(e.Code); code != tt.want {
				t.Errorf("%s: error %d %s, want %s", tt.tool, e.Code, e.Message, tt.want)
			}
		}
	}
}
