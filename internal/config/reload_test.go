package config

import (
	"strings"
	"testing"
)

func TestWeakens(t *testing.T) {
	base := "schema: 1\nsources: [{id: up, kind: mcp, url: \"http://127.0.0.1:1/mcp\"}]\n"
	running := base + `governance:
  defaults: {action: approve}
  rules:
    - {match: "read_*", action: forward}
    - {match: "delete_*", action: approve, approval: two}
    - {match: "drop_*", action: deny}
approval:
  two: {min_approvals: 2, approvers: [alice, bob, carol]}
approvers: [{name: alice, token_env: A}, {name: bob, token_env: B}, {name: carol, token_env: C}]
task_annotation_overrides: {force_required: [send_mail]}
server: {rate_limit: {requests_per_second: 5}}
`
	for _, tc := range []struct{ name, next, want string }{
		{"same", running, ""},
		{"prefix drops rules", strings.SplitAfter(running, "action: forward}\n")[0], "governance.rules[1] (match \"delete_*\") removed"},
		{"stricter action", strings.Replace(running, `"read_*", action: forward`, `"read_*", action: approve`, 1), ""},
		{"relaxed action", strings.Replace(running, `"drop_*", action: deny`, `"drop_*", action: approve`, 1), "relaxed from deny to approve"},
		{"laxer defaults", strings.Replace(running, "defaults: {action: approve}", "defaults: {action: forward}", 1), "governance.defaults.action"},
		{"appended forward rule under approve defaults", strings.Replace(running, "    - {match: \"drop_*\", action: deny}\n", "    - {match: \"drop_*\", action: deny}\n    - {match: \"x_*\", action: forward}\n", 1), "governance.rules[3]"},
		{"fewer approvals", strings.Replace(running, "min_approvals: 2", "min_approvals: 1", 1), "min_approvals lowered"},
		{"narrower approvers", strings.Replace(running, "[alice, bob, carol]}", "[alice, bob]}", 1), ""},
		{"approvers dropped", strings.Replace(running, ", approvers: [alice, bob, carol]}", "}", 1), "approvers widened"},
		{"override dropped", strings.Replace(running, "[send_mail]", "[]", 1), "force_required"},
		{"policy validation relaxed", running + "cedar: {validation: off}\n", "cedar.validation relaxed from warn to off"},
		{"policy validation tightened", running + "cedar: {validation: strict}\n", ""},
		{"rate limit lifted", strings.Replace(running, "requests_per_second: 5", "requests_per_second: 0", 1), "rate_limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := Parse([]byte(running), "", func(string) (string, bool) { return "", false })
			if err != nil {
				t.Fatal(err)
			}
			n, err := Parse([]byte(tc.next), "", func(string) (string, bool) { return "", false })
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(Weakens(o, n), "; ")
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("Weakens = %q, want %q", got, tc.want)
			}
		})
	}
}
