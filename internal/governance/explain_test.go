package governance

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

// TestExplain: the rule, the satisfied and failing Cedar policies with positions, the outcome
// and what would change it, for each way a call can be decided.
func TestExplain(t *testing.T) {
	s := build(t)
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	ex := func(tool, args string) Explanation {
		return s.Explain(context.Background(), Caller{Subject: "bob"}, tool, 0, json.RawMessage(args), now)
	}
	for _, tc := range []struct {
		name, tool, args string
		outcome          config.Action
		rule             string
		policies         []string // "id:outcome"
		change           string
	}{
		{"rule deny", "drop_x", `{}`, config.ActionDeny, "drop_*", nil, `governance.rules[1] ("drop_*") is the first rule matching "drop_x"`},
		{"defaults", "echo", `{}`, config.ActionForward, "defaults", nil, "governance.defaults.action (forward) applies"},
		{"forbid", "transfer_x", `{"amount": 500000}`, config.ActionDeny, "transfer_*",
			[]string{"financial.approve_large:satisfied", "financial.forbid_huge:satisfied", "financial.forward_small:satisfied"}, "forbid financial.forbid_huge matched"},
		{"approve", "transfer_x", `{"amount": 5000}`, config.ActionApprove, "transfer_*",
			[]string{"financial.approve_large:satisfied", "financial.forward_small:satisfied"}, "without them, permit financial.forward_small would forward it"},
		{"no match", "admin_x", `{}`, config.ActionDeny, "admin_*", nil, `no policy matched (policy_id "admin")`},
		{"error", "boom_x", `{}`, config.ActionDeny, "boom_*", []string{"boom.unguarded:error"}, "evaluating boom.unguarded (missing attribute (guard it with `has`)) failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := ex(tc.tool, tc.args)
			if x.Outcome != tc.outcome || x.Rule.Match != tc.rule {
				t.Fatalf("outcome %s rule %s: %+v", x.Outcome, x.Rule.Match, x)
			}
			var got []string
			for _, p := range x.Policies {
				got = append(got, p.ID+":"+p.Outcome)
				if !strings.Contains(p.Position, "policies/") {
					t.Errorf("policy %s without file position: %q", p.ID, p.Position)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.policies, ",") {
				t.Errorf("policies %v, want %v", got, tc.policies)
			}
			if all := strings.Join(x.Changes, "\n"); !strings.Contains(all, tc.change) {
				t.Errorf("what would change it:\n%s\nwant %q", all, tc.change)
			}
		})
	}
	b, _ := json.Marshal(ex("transfer_x", `{"amount": 123457}`))
	if strings.Contains(string(b), "123457") {
		t.Errorf("an explanation carries an argument value: %s", b)
	}
}
