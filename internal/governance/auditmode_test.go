package governance

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/rules"
)

// TestAuditMode: under governance.mode: audit a deny, an approve and a Cedar deny are
// recorded in Would and forwarded; a rule marked enforce keeps its action; a rule marked
// audit in an enforce config is audited alone; AuditMode says so.
func TestAuditMode(t *testing.T) {
	audited := strings.Replace(testConfig, "governance:\n", "governance:\n  mode: audit\n", 1)
	audited = strings.Replace(audited, `{match: "drop_*", action: deny}`, `{match: "drop_*", action: deny, mode: enforce}`, 1)
	s, err := Build(writeConfig(t, audited, standardFiles()), nil)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		tool, args  string
		action      config.Action
		would       config.Action
		annotations rules.TaskSupport
	}{
		{"delete_user", `{}`, config.ActionForward, config.ActionApprove, rules.Forbidden},
		{"drop_table", `{}`, config.ActionDeny, "", rules.Forbidden},
		{"transfer_funds", `{"amount": 500000}`, config.ActionForward, config.ActionDeny, rules.Forbidden},
		{"transfer_funds", `{"amount": 5}`, config.ActionForward, "", rules.Forbidden},
	} {
		eff := s.Evaluate(context.Background(), log, Caller{Subject: "bob"}, tc.tool, 0, json.RawMessage(tc.args))
		if eff.Action != tc.action || eff.Would != tc.would {
			t.Errorf("%s %s: action %s would %q, want %s would %q", tc.tool, tc.args, eff.Action, eff.Would, tc.action, tc.would)
		}
		if got := rules.Annotation(eff.Decision, false, "", config.SyncApprovalError); got != tc.annotations {
			t.Errorf("%s: taskSupport %s, want %s (forwarded as forward)", tc.tool, got, tc.annotations)
		}
	}
	if m := s.AuditMode(); !strings.Contains(m, "governance.mode is audit") || !strings.Contains(m, `"drop_*"`) {
		t.Errorf("AuditMode() = %q", m)
	}

	one := strings.Replace(testConfig, `{match: "drop_*", action: deny}`, `{match: "drop_*", action: deny, mode: audit}`, 1)
	s, err = Build(writeConfig(t, one, standardFiles()), nil)
	if err != nil {
		t.Fatal(err)
	}
	if eff := s.Evaluate(context.Background(), log, Caller{}, "drop_x", 0, nil); eff.Action != config.ActionForward || eff.Would != config.ActionDeny {
		t.Errorf("audit rule in enforce config: %+v", eff)
	}
	if eff := s.Evaluate(context.Background(), log, Caller{}, "delete_x", 0, nil); eff.Action != config.ActionApprove || eff.Would != "" {
		t.Errorf("other rules stay enforced: %+v", eff)
	}
	if m := s.AuditMode(); !strings.Contains(m, `governance.rules[1] "drop_*"`) {
		t.Errorf("AuditMode() = %q", m)
	}
	if m := build(t).AuditMode(); m != "" {
		t.Errorf("enforce config: AuditMode() = %q", m)
	}
}
