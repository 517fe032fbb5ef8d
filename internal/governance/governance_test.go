package governance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/policy"
)

// testConfig has one rule per action; the Cedar files sit in a sub-directory of the config's
// so that relative resolution is exercised.
const testConfig = `schema: 1
sources:
  - {id: primary, kind: mcp, url: "http://127.0.0.1:1/mcp"}
governance:
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve, approval: slow}
    - {match: "drop_*", action: deny}
    - {match: "transfer_*", action: policy, policy_id: financial}
    - {match: "admin_*", action: policy, policy_id: admin}
    - {match: "boom_*", action: policy, policy_id: boom}
approval:
  slow: {timeout: 1h}
cedar: {policies: [policies/financial.cedar, policies/other.cedar]}
task_annotation_overrides: {force_required: [audit_log]}
`

const financialPolicy = `@id("financial.forbid_huge")
forbid (principal, action == Action::"tools/call", resource)
when {
  context.policy_id == "financial" &&
  resource.arguments has amount && resource.arguments.amount > 100000
};

@id("financial.approve_large")
@decision("approve")
permit (principal, action == Action::"tools/call", resource)
when {
  context.policy_id == "financial" &&
  resource.arguments has amount && resource.arguments.amount >= 1000
};

@id("financial.forward_small")
permit (principal, action == Action::"tools/call", resource)
when { context.policy_id == "financial" && context.source_id == "primary" };
`

// other.cedar: a principal check, and a policy whose evaluation can fail on the arguments
// (missing attribute, integer overflow).
const otherPolicy = `@id("admin.alice_only")
permit (principal == User::"alice", action == Action::"tools/call", resource)
when { context.policy_id == "admin" };

@id("boom.unguarded")
permit (principal, action == Action::"tools/call", resource)
when { context.policy_id == "boom" && resource.arguments.amount + 1 > 0 };
`

// writeConfig writes the config and its policies to a temp dir and parses it.
func writeConfig(t *testing.T, yaml string, files map[string]string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "tollgate.yaml")
	cfg, err := config.Parse([]byte(yaml), path, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

func standardFiles() map[string]string {
	return map[string]string{"policies/financial.cedar": financialPolicy, "policies/other.cedar": otherPolicy}
}

func build(t *testing.T) *Snapshot {
	t.Helper()
	s, err := Build(writeConfig(t, testConfig, standardFiles()), []string{"probe_x"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestBuild(t *testing.T) {
	s := build(t)
	if s.Policy == nil || s.Policy.Len() != 5 {
		t.Fatalf("Policy = %v, want 5 policies from two files", s.Policy)
	}
	if s.Rules == nil || s.Built.IsZero() || s.Revision != 0 {
		t.Fatalf("snapshot %+v", s)
	}
	// force_required (exact tool names) comes from the config and from the caller.
	for tool, want := range map[string]bool{"audit_log": true, "probe_x": true, "probe_y": false, "read_x": false} {
		if got := s.Rules.Decide(tool).ForceRequired; got != want {
			t.Errorf("ForceRequired(%s) = %v, want %v", tool, got, want)
		}
	}
}

func TestBuildWithoutCedar(t *testing.T) {
	cfg := writeConfig(t, "schema: 1\nsources: [{id: s, kind: mcp, url: \"http://127.0.0.1:1/mcp\"}]\n", nil)
	s, err := Build(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Policy != nil {
		t.Error("an engine was built without Cedar policies")
	}
}

// Any failure leaves no snapshot (docs/contract.md §5.3: a reload keeps the old one).
func TestBuildErrors(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(t *testing.T, cfg *config.Config)
		wantErr string
	}{
		{"cedar syntax", func(t *testing.T, cfg *config.Config) {
			write(t, cfg.ResolvePath("policies/other.cedar"), "permit (principal, action, resource) when {")
		}, "loading cedar policies"},
		{"cedar file gone", func(t *testing.T, cfg *config.Config) {
			if err := os.Remove(cfg.ResolvePath("policies/financial.cedar")); err != nil {
				t.Fatal(err)
			}
		}, "loading cedar policies"},
		{"duplicate policy id", func(t *testing.T, cfg *config.Config) {
			write(t, cfg.ResolvePath("policies/other.cedar"), financialPolicy)
		}, "loading cedar policies"},
		{"bad glob", func(_ *testing.T, cfg *config.Config) {
			cfg.Governance.Rules[1].Match = "drop_[" // validated configs never get here; Build must still refuse
		}, "compiling rules"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := writeConfig(t, testConfig, standardFiles())
			tc.mutate(t, cfg)
			s, err := Build(cfg, nil)
			if err == nil || s != nil {
				t.Fatalf("Build = %v, %v; want no snapshot and an error", s, err)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not contain %q", err, tc.wantErr)
			}
		})
	}
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestHolder(t *testing.T) {
	var h Holder
	if h.Load() != nil {
		t.Fatal("empty holder has a snapshot")
	}
	if _, ok := h.Workflow(""); ok {
		t.Fatal("empty holder has a workflow")
	}
	s1, s2 := build(t), build(t)
	h.Store(s1)
	h.Store(s2)
	if h.Load() != s2 || s1.Revision != 1 || s2.Revision != 2 {
		t.Fatalf("revisions %d, %d; current is s2: %v", s1.Revision, s2.Revision, h.Load() == s2)
	}
	for _, tc := range []struct {
		name string
		ok   bool
	}{{"", true}, {config.DefaultWorkflow, true}, {"slow", true}, {"missing", false}} {
		w, ok := h.Workflow(tc.name)
		if ok != tc.ok {
			t.Errorf("Workflow(%q) ok = %v, want %v", tc.name, ok, tc.ok)
		}
		if tc.name == "slow" && w.Timeout.D().String() != "1h0m0s" {
			t.Errorf("Workflow(slow).Timeout = %v", w.Timeout)
		}
	}
}

// Readers never see a snapshot before its revision is stamped.
func TestHolderConcurrent(t *testing.T) {
	var h Holder
	snaps := make([]*Snapshot, 50)
	base := build(t)
	for i := range snaps {
		snaps[i] = &Snapshot{Config: base.Config, Rules: base.Rules, Policy: base.Policy, People: base.People, Built: base.Built}
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for _, s := range snaps {
			h.Store(s)
		}
	}()
	go func() {
		defer wg.Done()
		var last uint64
		for range 1000 {
			if s := h.Load(); s != nil {
				if s.Revision == 0 || s.Revision < last {
					t.Errorf("revision %d after %d", s.Revision, last)
					return
				}
				last = s.Revision
			}
			_, _ = h.Workflow("")
		}
	}()
	wg.Wait()
	if h.Load().Revision != uint64(len(snaps)) {
		t.Errorf("final revision %d", h.Load().Revision)
	}
}

func TestEvaluate(t *testing.T) {
	s := build(t)
	log := slog.New(slog.DiscardHandler)
	tests := []struct {
		name     string
		caller   Caller
		tool     string
		args     string
		action   config.Action
		policies []string // nil: no Cedar decision
		reason   string
	}{
		{"default forward", Caller{}, "read_file", `{}`, config.ActionForward, nil, ""},
		{"rule approve", Caller{}, "delete_x", `{}`, config.ActionApprove, nil, ""},
		{"rule deny", Caller{}, "drop_x", `{}`, config.ActionDeny, nil, ""},
		{"cedar forward", Caller{SessionID: "s1"}, "transfer_funds", `{"amount":5}`, config.ActionForward,
			[]string{"financial.forward_small"}, policy.ReasonPermit},
		{"cedar approve", Caller{SessionID: "s1"}, "transfer_funds", `{"amount":5000}`, config.ActionApprove,
			[]string{"financial.approve_large"}, policy.ReasonApprove},
		{"cedar deny", Caller{Subject: "alice"}, "transfer_funds", `{"amount":500000}`, config.ActionDeny,
			[]string{"financial.forbid_huge"}, policy.ReasonForbid},
		{"principal is the subject", Caller{Subject: "alice", SessionID: "s1"}, "admin_reset", `{}`, config.ActionForward,
			[]string{"admin.alice_only"}, policy.ReasonPermit},
		{"other subject", Caller{Subject: "bob"}, "admin_reset", `{}`, config.ActionDeny, []string{}, policy.ReasonNoMatch},
		{"session principal", Caller{SessionID: "alice"}, "admin_reset", `{}`, config.ActionDeny, []string{}, policy.ReasonNoMatch},
		{"null arguments", Caller{}, "transfer_funds", `null`, config.ActionForward,
			[]string{"financial.forward_small"}, policy.ReasonPermit},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := s.Evaluate(context.Background(), log, tc.caller, tc.tool, 0, json.RawMessage(tc.args))
			if e.Action != tc.action {
				t.Errorf("Action = %s, want %s", e.Action, tc.action)
			}
			if e.Decision != s.Rules.Decide(tc.tool) {
				t.Errorf("Decision = %+v, not the rule's", e.Decision)
			}
			if tc.policies == nil {
				if e.Policy != nil {
					t.Errorf("Cedar decided a %s rule: %+v", e.Decision.Action, e.Policy)
				}
				return
			}
			if e.Policy == nil {
				t.Fatal("no Cedar decision for a policy rule")
			}
			if fmt.Sprint(e.Policy.PolicyIDs) != fmt.Sprint(tc.policies) || e.Policy.Reason != tc.reason {
				t.Errorf("Cedar decision %+v, want %v %q", e.Policy, tc.policies, tc.reason)
			}
		})
	}
}

// A policy rule without a Cedar engine cannot be decided: deny.
func TestEvaluateWithoutEngine(t *testing.T) {
	s := build(t)
	s.Policy = nil
	e := s.Evaluate(context.Background(), slog.New(slog.DiscardHandler), Caller{}, "transfer_funds", 0, json.RawMessage(`{"amount":1}`))
	if e.Action != config.ActionDeny || e.Policy != nil || e.Decision.Action != config.ActionPolicy {
		t.Errorf("Evaluate = %+v, want a deny of the policy rule", e)
	}
}

// Evaluation errors fail closed and are logged with the policy ids, never with the arguments
// (docs/contract.md §5.4).
func TestEvaluateErrorFailsClosed(t *testing.T) {
	const secret = "hunter2-s3cr3t"
	tests := []struct {
		name     string
		tool     string
		args     string
		policies string // must appear in the log
	}{
		{"missing attribute", "boom_x", `{"password":"` + secret + `"}`, "boom.unguarded"},
		{"overflow", "boom_x", `{"amount":9223372036854775807,"token":"` + secret + `"}`, "boom.unguarded"},
		{"arguments not an object", "transfer_funds", `["` + secret + `"]`, "financial"},
		{"arguments a string", "transfer_funds", `"` + secret + `"`, "financial"},
	}
	s := build(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
			e := s.Evaluate(context.Background(), log, Caller{Subject: "alice"}, tc.tool, 0, json.RawMessage(tc.args))
			if e.Action != config.ActionDeny || e.Policy == nil || e.Policy.Outcome != policy.Deny {
				t.Fatalf("Evaluate = %+v, want a Cedar deny", e)
			}
			if e.Policy.Reason != "evaluation error" {
				t.Errorf("Reason = %q", e.Policy.Reason)
			}
			out := buf.String()
			if !strings.Contains(out, "cedar evaluation failed") || !strings.Contains(out, tc.policies) {
				t.Errorf("log does not name the failure and %s: %s", tc.policies, out)
			}
			for _, leak := range []string{secret, "9223372036854775807", "922337203685477580"} {
				if strings.Contains(out, leak) {
					t.Errorf("log leaks an argument value %q: %s", leak, out)
				}
			}
			// The decision is audited too; it must not carry arguments either.
			if d := fmt.Sprintf("%+v", *e.Policy); strings.Contains(d, secret) {
				t.Errorf("decision leaks an argument value: %s", d)
			}
		})
	}
}

func TestDeniedError(t *testing.T) {
	s := build(t)
	ctx, log := context.Background(), slog.New(slog.DiscardHandler)
	cedar := s.Evaluate(ctx, log, Caller{}, "transfer_x", 0, json.RawMessage(`{"amount":500000}`))
	defaults := s.Evaluate(ctx, log, Caller{}, "anything", 0, nil)
	defaults.Action = config.ActionDeny // as if defaults.action were deny
	tests := []struct {
		name     string
		tool     string
		e        Effective
		rule     string
		policies []string
		msg      string
	}{
		{"rule", "drop_table", s.Evaluate(ctx, log, Caller{}, "drop_table", 0, nil), "drop_*", nil, `rule "drop_*"`},
		{"defaults", "anything", defaults, "defaults", nil, `rule "defaults"`},
		{"cedar", "transfer_x", cedar, "transfer_*", []string{"financial.forbid_huge"}, "Cedar policy (forbid matched)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			je := DeniedError(tc.tool, tc.e)
			if je.Code != jsonrpc.CodePolicyDenied || jsonrpc.CodePolicyDenied != -32003 || je.Name() != "PolicyDenied" {
				t.Errorf("code %d name %q", je.Code, je.Name())
			}
			if !strings.HasPrefix(je.Message, "PolicyDenied: ") || !strings.Contains(je.Message, tc.msg) ||
				!strings.Contains(je.Message, fmt.Sprintf("%q", tc.tool)) {
				t.Errorf("message %q", je.Message)
			}
			// The client sees the data as JSON.
			b, err := json.Marshal(je)
			if err != nil {
				t.Fatal(err)
			}
			var wire struct {
				Data struct {
					Error    string   `json:"error"`
					Tool     string   `json:"tool"`
					Rule     string   `json:"rule"`
					Policies []string `json:"policies"`
				} `json:"data"`
			}
			if err := json.Unmarshal(b, &wire); err != nil {
				t.Fatal(err)
			}
			d := wire.Data
			if d.Error != "PolicyDenied" || d.Tool != tc.tool || d.Rule != tc.rule ||
				fmt.Sprint(d.Policies) != fmt.Sprint(tc.policies) {
				t.Errorf("data %+v", d)
			}
			if _, has := je.Data["policies"]; has != (tc.policies != nil) {
				t.Errorf("data.policies present = %v", has)
			}
		})
	}
}

// TestRecheck: the re-check before an approved call runs fails it with -32011 PolicyChanged
// only when the rule or policy denies it now (docs/contract.md §3).
func TestRecheck(t *testing.T) {
	s := build(t)
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		tool, args string
		denied     bool
	}{
		{"delete_user", `{}`, false},              // still needs approval: it was approved
		{"read_file", `{}`, false},                // forwarded
		{"drop_table", `{}`, true},                // a rule denies it now
		{"transfer_x", `{"amount":500000}`, true}, // Cedar forbids it now
		{"transfer_x", `{"amount":5000}`, false},  // Cedar asks for approval
	} {
		e := s.Recheck(context.Background(), log, Caller{Subject: "bob"}, tc.tool, 0, json.RawMessage(tc.args), "tg_1")
		if (e != nil) != tc.denied {
			t.Errorf("%s %s: Recheck = %v, want denied=%v", tc.tool, tc.args, e, tc.denied)
			continue
		}
		if e != nil && (e.Code != jsonrpc.CodePolicyChanged || e.Name() != "PolicyChanged" || e.Data["taskId"] != "tg_1" || e.Data["tool"] != tc.tool) {
			t.Errorf("%s: error %+v", tc.tool, e)
		}
	}
}
