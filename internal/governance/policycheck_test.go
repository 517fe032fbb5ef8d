package governance

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/demo"
	"github.com/tollgate-mcp/tollgate/internal/policyschema"
	"github.com/tollgate-mcp/tollgate/internal/rules"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
	"github.com/tollgate-mcp/tollgate/policies"
)

// demoTools reads the demo upstream's tools/list over MCP, as Tollgate's own session does.
func demoTools(t *testing.T) []policyschema.Tool {
	t.Helper()
	d := demo.New()
	url, stop, err := d.Start(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop(context.Background()) })
	up, err := upstream.New(url, upstream.Options{ConnectTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sess, err := up.Handshake(ctx, json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`), "")
	if err != nil {
		t.Fatal(err)
	}
	defer up.EndSession(sess)
	var tools []policyschema.Tool
	if _, err := up.Pages(ctx, sess.Header(), "tools/list", "t-", 10, nil, func(result json.RawMessage) error {
		page, err := policyschema.ParseTools(result)
		tools = append(tools, page...)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(tools) < 5 {
		t.Fatalf("demo tools: %v", tools)
	}
	return tools
}

// snapshotWith builds a snapshot whose cedar.policies are the given files (name → source)
// under cedar.validation mode, with one rule sending transfer_* to Cedar.
func snapshotWith(t *testing.T, mode string, files map[string]string) *Snapshot {
	t.Helper()
	dir := t.TempDir()
	yaml := "schema: 1\nsources: [{id: demo, kind: mcp, url: \"http://127.0.0.1:1/mcp\"}]\n" +
		"governance:\n  rules:\n    - {match: \"transfer_*\", action: policy, policy_id: financial_transfer}\n" +
		"cedar:\n  validation: " + mode + "\n  policies:\n"
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		yaml += "    - " + name + "\n"
	}
	path := filepath.Join(dir, "tollgate.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	s, err := Build(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCheckPoliciesAgainstDemoTools: policies validated against the live demo upstream's tools
// (cedar.validation) report each kind of mistake — all of which load without a schema — with
// its file:line; the shipped policies pass.
func TestCheckPoliciesAgainstDemoTools(t *testing.T) {
	tools := demoTools(t)
	digest := policyschema.Digest(tools)
	shipped := map[string]string{}
	for _, name := range []string{"financial.cedar", "delete_protection.cedar", "annotations.cedar"} {
		b, err := fs.ReadFile(policies.FS, name)
		if err != nil {
			t.Fatal(err)
		}
		shipped[name] = string(b)
	}
	if c := snapshotWith(t, "strict", shipped).CheckPolicies(tools, digest); c == nil || len(c.Problems) > 0 || c.Tools != len(tools) {
		t.Fatalf("shipped policies against the demo's tools: %+v", c)
	}

	// Each mistake is a policy starting on line 3 of its own file.
	for _, tc := range []struct{ name, policy, want string }{
		{"argument no tool has", `permit (principal, action, resource) when { resource.arguments.amout > 5 };`, "does not match schema"},
		{"string compared with a number", `forbid (principal, action, resource) when { resource.arguments has currency && resource.arguments.currency > 5 };`, "does not match schema"},
		{"optional argument read without has", `forbid (principal, action, resource) when { resource.arguments.to_account == "x" };`, "does not match schema"},
		{"unknown tool", `forbid (principal, action, resource == ToolCall::"transfer_fund");`, `ToolCall::"transfer_fund" names no tool`},
		{"unknown context attribute", `forbid (principal, action, resource) when { context.polcy_id == "x" };`, "does not match schema"},
		{"unknown annotation hint", `forbid (principal, action, resource) when { context.annotations.destructive };`, "does not match schema"},
		{"unknown principal attribute", `forbid (principal, action, resource) when { principal has email && principal.department == "ops" };`, "does not match schema"},
		{"unknown entity type", `forbid (principal in Grp::"ops", action, resource);`, "does not match schema"},
		{"guarded argument no tool has", `forbid (principal, action, resource) when { resource.arguments has amont && resource.arguments.amont > 5 };`, `no tool of the upstream has an argument "amont"`},
		{"number compared with a string", `forbid (principal, action, resource) when { resource.arguments has amount && resource.arguments.amount == "100" };`, "not compatible"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "// a policy with one mistake\n\n" + tc.policy + "\n"
			s := snapshotWith(t, "warn", map[string]string{"bad.cedar": src})
			c := s.CheckPolicies(tools, digest)
			if c == nil || len(c.Problems) == 0 {
				t.Fatalf("accepted: %s", tc.policy)
			}
			p := strings.Join(c.Problems, "\n")
			if !strings.Contains(p, "bad.cedar:3:") || !strings.Contains(p, tc.want) {
				t.Errorf("problems lack bad.cedar:3: or %q:\n%s", tc.want, p)
			}
			if err := c.Err(); err == nil || !strings.Contains(err.Error(), "bad.cedar:3:") {
				t.Errorf("Err() = %v", err)
			}
		})
	}
}

// TestStrictMismatchDenies: under strict validation, while the loaded policies do not match the
// upstream's tools, every call a rule sends to Cedar is denied (fail closed) — a forbid guarding
// an argument the tools renamed would otherwise never match; warn enforces them as loaded, and
// a check that passes again lets Cedar decide.
func TestStrictMismatchDenies(t *testing.T) {
	tools := demoTools(t)
	// transfer_funds renamed "amount" to "value": the forbid below can no longer match.
	var renamed []policyschema.Tool
	for _, tl := range tools {
		if tl.Name == "transfer_funds" {
			tl.InputSchema = json.RawMessage(strings.ReplaceAll(string(tl.InputSchema), `"amount"`, `"value"`))
		}
		renamed = append(renamed, tl)
	}
	src := `@id("cap") forbid (principal, action, resource) when { resource.arguments has amount && resource.arguments.amount > 100 };
@id("rest") permit (principal, action, resource);
`
	call := func(s *Snapshot) Effective {
		return s.Evaluate(context.Background(), nil, Caller{SessionID: "s"}, "transfer_funds", rules.ParseHints(nil), json.RawMessage(`{"value":5000}`))
	}
	for _, tc := range []struct {
		mode   string
		action config.Action
		reason string
	}{
		{"strict", config.ActionDeny, ReasonToolsMismatch},
		{"warn", config.ActionForward, "permit matched"},
		{"off", config.ActionForward, "permit matched"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			s := snapshotWith(t, tc.mode, map[string]string{"p.cedar": src})
			if e := call(s); e.Action != config.ActionForward {
				t.Fatalf("before the tools are known: %s", e.Action)
			}
			if c := s.CheckPolicies(tools, policyschema.Digest(tools)); c.Err() != nil {
				t.Fatalf("matching tools: %v", c.Err())
			}
			s.CheckPolicies(renamed, policyschema.Digest(renamed))
			e := call(s)
			if e.Action != tc.action || e.Policy == nil || e.Policy.Reason != tc.reason {
				t.Fatalf("after the rename: %s %+v, want %s (%s)", e.Action, e.Policy, tc.action, tc.reason)
			}
			if tc.mode == "off" && s.PolicyCheck() != nil {
				t.Errorf("off keeps a check: %+v", s.PolicyCheck())
			}
			if tc.mode == "strict" {
				if msg := DeniedError("transfer_funds", e).Message; !strings.Contains(msg, ReasonToolsMismatch) {
					t.Errorf("denial: %s", msg)
				}
				x := s.Explain(context.Background(), Caller{SessionID: "s"}, "transfer_funds", rules.ParseHints(nil), nil, time.Now())
				if x.Cedar != ReasonToolsMismatch {
					t.Errorf("explain: %+v", x)
				}
				s.CheckPolicies(tools, policyschema.Digest(tools)) // the tools come back
				if e := call(s); e.Action != config.ActionForward {
					t.Errorf("after the tools matched again: %s", e.Action)
				}
			}
		})
	}
}
