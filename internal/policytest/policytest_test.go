package policytest

import (
	"strings"
	"testing"
)

// TestParseRefuses: unknown keys anywhere in a case, a missing tool or action, an unknown
// action or annotation hint are errors naming file and line; nothing is run.
func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"unknown top key", "cases: []\nconfg: x\n", `c.yaml:2: unknown key "confg"`},
		{"unknown case key", "cases:\n  - tool: t\n    argumnts: {}\n    expect: {action: deny}\n", `c.yaml:3: unknown key "argumnts"`},
		{"unknown expect key", "cases:\n  - tool: t\n    expect: {action: deny, ruel: x}\n", `c.yaml:3: unknown key "ruel"`},
		{"no tool", "cases:\n  - expect: {action: deny}\n", "c.yaml:2: cases[0]: tool is required"},
		{"no action", "cases:\n  - tool: t\n", "c.yaml:2: cases[0]: expect.action is required"},
		{"bad action", "cases:\n  - tool: t\n    expect: {action: allow}\n", `expect.action must be forward, approve or deny, got "allow"`},
		{"bad would", "cases:\n  - tool: t\n    expect: {action: forward, would: hold}\n", `expect.would must be deny, approve`},
		{"bad hint", "cases:\n  - tool: t\n    annotations: {destructive: true}\n    expect: {action: deny}\n", `unknown hint "destructive"`},
		{"no cases", "config: x.yaml\n", "c.yaml: no cases"},
		{"empty", "", "c.yaml: no cases"},
		{"a configuration", "schema: 1\nsources: []\n", "c.yaml: a Tollgate configuration, not a case file: name it with a case file's config: key or with --config"},
		{"not yaml", "cases: [\n", "c.yaml: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// FuzzParse: no case file makes Parse panic; an accepted file has cases with a tool and an
// action.
func FuzzParse(f *testing.F) {
	f.Add([]byte("cases:\n  - tool: t\n    arguments: {a: 1}\n    expect: {action: deny, policies: []}\n"))
	f.Add([]byte("config: x\ncases: [{tool: t, expect: {action: forward}}]\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		file, err := Parse("f.yaml", src)
		if err != nil {
			return
		}
		for _, c := range file.Cases {
			if c.Tool == "" || c.Expect.Action == "" {
				t.Fatalf("accepted %+v", c)
			}
		}
	})
}
