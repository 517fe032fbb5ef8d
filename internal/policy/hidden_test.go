package policy

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/rules"
)

const hidingPolicies = `
@id("contractors_no_delete")
forbid (principal in Group::"contractors", action == Action::"tools/call", resource == ToolCall::"delete_file");

@id("mallory_nothing")
forbid (principal == User::"mallory", action, resource);

@id("prod_only_by_args")
forbid (principal, action, resource == ToolCall::"deploy")
when { resource.arguments has env && resource.arguments.env == "prod" };

@id("args_or_group")
forbid (principal, action, resource == ToolCall::"wire")
when { principal in Group::"interns" || resource.arguments.amount > 100 };

@id("args_and_group")
forbid (principal, action, resource == ToolCall::"refund")
when { principal in Group::"support" && resource.arguments.amount > 100 };

@id("night")
forbid (principal, action, resource == ToolCall::"page_oncall")
when { context.time.hour < 6 };

@id("scoped")
forbid (principal, action, resource == ToolCall::"admin_reset")
unless { context.scopes.contains("admin") };

@id("destructive_for_guests")
forbid (principal in Group::"guests", action, resource)
when { context.annotations.destructiveHint };

@id("email_err")
forbid (principal, action, resource == ToolCall::"mail")
when { principal.email like "*@example.net" };

@id("allow_all")
permit (principal, action, resource);
`

// TestForbiddenRegardless: a tool counts as never callable only when a forbid holds without
// reading the arguments or the time (partial evaluation with both unknown); a forbid that
// needs them, or fails to evaluate, never hides a tool. Each hidden case is also denied by the
// full evaluation with arguments (the listing never says less than the call).
func TestForbiddenRegardless(t *testing.T) {
	e := loadString(t, hidingPolicies)
	if !e.HasForbid() {
		t.Fatal("HasForbid = false")
	}
	var destructive rules.Hints // no annotations: the spec's defaults (destructive)
	readOnly := rules.ParseHints([]byte(`{"readOnlyHint":true,"destructiveHint":false}`))
	cases := []struct {
		name string
		req  Request
		want []string
		args string // arguments for the check that the full evaluation agrees
	}{
		{"contractor delete", Request{Principal: "bob", Groups: []string{"contractors"}, Tool: "delete_file", Annotations: readOnly}, []string{"contractors_no_delete"}, `{"path":"/x"}`},
		{"employee delete", Request{Principal: "alice", Groups: []string{"staff"}, Tool: "delete_file", Annotations: readOnly}, nil, `{}`},
		{"principal scope", Request{Principal: "mallory", Tool: "read_file", Annotations: readOnly}, []string{"mallory_nothing"}, `{}`},
		{"arguments decide", Request{Principal: "alice", Tool: "deploy", Annotations: readOnly}, nil, `{"env":"prod"}`},
		{"or: group settles it", Request{Principal: "ivy", Groups: []string{"interns"}, Tool: "wire", Annotations: readOnly}, []string{"args_or_group"}, `{"amount":1}`},
		{"or: arguments needed", Request{Principal: "alice", Tool: "wire", Annotations: readOnly}, nil, `{"amount":500}`},
		{"and: arguments needed", Request{Principal: "sam", Groups: []string{"support"}, Tool: "refund", Annotations: readOnly}, nil, `{"amount":500}`},
		{"time is unknown", Request{Principal: "alice", Tool: "page_oncall", Annotations: readOnly}, nil, `{}`},
		{"scopes lacking", Request{Principal: "alice", Tool: "admin_reset", Annotations: readOnly}, []string{"scoped"}, `{}`},
		{"scopes granted", Request{Principal: "alice", Tool: "admin_reset", Scopes: []string{"admin"}, Annotations: readOnly}, nil, `{}`},
		{"annotations", Request{Principal: "gus", Groups: []string{"guests"}, Tool: "rm", Annotations: destructive}, []string{"destructive_for_guests"}, `{}`},
		{"annotations read-only", Request{Principal: "gus", Groups: []string{"guests"}, Tool: "ls", Annotations: readOnly}, nil, `{}`},
		{"evaluation error", Request{Principal: "alice", Tool: "mail", Annotations: readOnly}, nil, `{}`},
		{"session principal", Request{SessionID: "s1", Tool: "read_file", Annotations: readOnly}, nil, `{}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := e.ForbiddenRegardless(c.req)
			if !slices.Equal(got, c.want) {
				t.Fatalf("ForbiddenRegardless = %v, want %v", got, c.want)
			}
			if len(c.want) == 0 {
				return
			}
			full := c.req
			full.Arguments = json.RawMessage(c.args)
			d, _ := e.Decide(full)
			if d.Outcome != Deny {
				t.Fatalf("hidden, yet the call with %s is %s (%s)", c.args, d.Outcome, d.Reason)
			}
		})
	}
}

// TestForbiddenRegardlessWithoutForbids: a set of permits alone hides nothing.
func TestForbiddenRegardlessWithoutForbids(t *testing.T) {
	e := loadString(t, `permit (principal, action, resource) when { resource.arguments.a == 1 };`)
	if e.HasForbid() {
		t.Fatal("HasForbid = true for permits only")
	}
	if got := e.ForbiddenRegardless(Request{Principal: "a", Tool: "x"}); len(got) != 0 {
		t.Fatalf("ForbiddenRegardless = %v", got)
	}
}

// BenchmarkForbiddenRegardless: the per-tool cost of the listing's Cedar check (one Prober per
// listing), for a tool only the set's unscoped forbids concern and one a group forbid settles.
func BenchmarkForbiddenRegardless(b *testing.B) {
	e := loadString(b, hidingPolicies)
	for name, req := range map[string]Request{
		"other_tool":   {Principal: "bob", Groups: []string{"contractors"}, Tool: "read_file"},
		"group_forbid": {Principal: "bob", Groups: []string{"contractors"}, Tool: "delete_file"},
	} {
		b.Run(name, func(b *testing.B) {
			p := e.Prober(req) // one per listing
			b.ReportAllocs()
			for b.Loop() {
				_ = p.Forbidden(req.Tool, "", req.Annotations)
			}
		})
	}
}
