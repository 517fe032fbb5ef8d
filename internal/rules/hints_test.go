package rules

import (
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

func TestParseHintsAndValues(t *testing.T) {
	tests := []struct {
		name string
		ann  string
		want map[string]bool
	}{
		{"absent: spec defaults", ``, map[string]bool{"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true}},
		{"not an object", `[1]`, map[string]bool{"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true}},
		{"read-only implies not destructive, idempotent", `{"readOnlyHint":true}`, map[string]bool{"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": true}},
		{"read-only wins over a declared destructiveHint", `{"readOnlyHint":true,"destructiveHint":true,"idempotentHint":false}`, map[string]bool{"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": true}},
		{"declared values", `{"readOnlyHint":false,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false,"title":"x"}`, map[string]bool{"readOnlyHint": false, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}},
		{"non-boolean members count as absent", `{"destructiveHint":"no","openWorldHint":0}`, map[string]bool{"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ParseHints([]byte(tt.ann)).Values()
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
				}
			}
		})
	}
}

func TestDecideHints(t *testing.T) {
	e, err := Compile(config.Governance{
		Defaults: config.Defaults{Action: config.ActionForward},
		Rules: []config.Rule{
			{Match: "drop_*", Action: config.ActionDeny},
			{Match: "*", MatchAnnotations: map[string]bool{"readOnlyHint": true}, Action: config.ActionForward},
			{Match: "*", MatchAnnotations: map[string]bool{"destructiveHint": true, "openWorldHint": true}, Action: config.ActionApprove},
			{Match: "*", MatchAnnotations: map[string]bool{"destructiveHint": false}, Action: config.ActionPolicy},
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !e.UsesHints() {
		t.Fatal("UsesHints = false")
	}
	ro := Hints(0).With(ReadOnly, true)
	safe := Hints(0).With(Destructive, false)
	closed := Hints(0).With(OpenWorld, false)
	tests := []struct {
		tool   string
		h      Hints
		action config.Action
		rule   int
	}{
		{"drop_x", ro, config.ActionDeny, 0},               // name rule first
		{"list_things", ro, config.ActionForward, 1},       // read-only
		{"unannotated", 0, config.ActionApprove, 2},        // absent = destructive, open world
		{"closed_world", closed, config.ActionForward, -1}, // destructive but closed world: no rule 2; destructive so no rule 3
		{"additive", safe, config.ActionPolicy, 3},
	}
	for _, tt := range tests {
		// twice: the second answer comes from the cache and must be the same
		for range 2 {
			d := e.DecideHints(tt.tool, tt.h)
			if d.Action != tt.action || d.Rule != tt.rule {
				t.Errorf("DecideHints(%s, %08b) = %s rule %d, want %s rule %d", tt.tool, tt.h, d.Action, d.Rule, tt.action, tt.rule)
			}
		}
	}
	// The same name with other annotations is decided anew, not served from the cache.
	if d := e.DecideHints("tool", ro); d.Rule != 1 {
		t.Errorf("read-only tool: rule %d", d.Rule)
	}
	if d := e.DecideHints("tool", safe); d.Rule != 3 {
		t.Errorf("same tool, non-destructive annotations: rule %d", d.Rule)
	}
	if d := e.Decide("tool"); d.Rule != 2 {
		t.Errorf("Decide without annotations: rule %d, want 2 (spec defaults)", d.Rule)
	}

	if _, err := Compile(config.Governance{Rules: []config.Rule{{Match: "*", Action: config.ActionDeny, MatchAnnotations: map[string]bool{"bogus": true}}}}, nil); err == nil {
		t.Error("unknown annotation compiled")
	}
	plain, _ := Compile(config.Governance{Rules: []config.Rule{{Match: "*", Action: config.ActionDeny}}}, nil)
	if plain.UsesHints() || plain.DecideHints("x", ro) != plain.Decide("x") {
		t.Error("engine without match_annotations depends on annotations")
	}
}

// FuzzParseHints: whatever a tools/list entry's annotations hold, the four values follow the
// spec's rules, and matching never depends on anything but them.
func FuzzParseHints(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"readOnlyHint":true}`, `{"destructiveHint":false,"openWorldHint":false}`,
		`{"readOnlyHint":"true"}`, `[true]`, `{"idempotentHint":true,"readOnlyHint":false}`, `{"readOnlyHint":true,"readOnlyHint":false}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h := ParseHints([]byte(s))
		v := h.Values()
		if len(v) != 4 {
			t.Fatalf("%d values", len(v))
		}
		if v["readOnlyHint"] && (v["destructiveHint"] || !v["idempotentHint"]) {
			t.Fatalf("read-only tool with %v", v)
		}
		for i, n := range hintNames {
			if got, declared := h.Declared(Hint(i)); !declared && Hint(i) != Destructive && Hint(i) != Idempotent && v[n] != (Hint(i) == OpenWorld) {
				t.Fatalf("absent %s = %v", n, got)
			}
		}
		if h.With(ReadOnly, true).Value(Destructive) {
			t.Fatal("read-only tool counted destructive")
		}
	})
}
