package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// monday10 is Monday 2026-03-02 10:30 UTC.
var monday10 = time.Date(2026, 3, 2, 10, 30, 0, 0, time.UTC)

const testPolicies = `
@id("forbid_drop")
forbid (principal, action == Action::"tools/call", resource == ToolCall::"drop_table");

@id("approve_big")
@decision("approve")
permit (principal, action, resource)
when { resource.arguments has n && resource.arguments.n > 10 };

@id("permit_all")
permit (principal, action == Action::"tools/call", resource)
when { context.policy_id == "p" };

@id("explicit_forward")
@decision("forward")
permit (principal, action, resource == ToolCall::"explicit");

@id("admins_only")
permit (principal == User::"alice", action, resource == ToolCall::"admin_tool");

@id("session_tool")
permit (principal == Session::"s-1", action, resource == ToolCall::"session_tool");

@id("business_hours")
@decision("approve")
permit (principal, action, resource == ToolCall::"clock")
when { context.time.weekday == 1 && context.time.hour == 10 && context.time.unix > 0 && context.source_id == "up" };

@id("name_attr")
permit (principal, action, resource)
when { resource.name == "by_name" && context.policy_id == "named" };
`

func loadString(t testing.TB, src string) *Engine {
	t.Helper()
	e, err := LoadFS(fstest.MapFS{"p.cedar": {Data: []byte(src)}}, []string{"p.cedar"}, "")
	if err != nil {
		t.Fatalf("LoadFS: %v", err)
	}
	return e
}

func TestDecideOutcomes(t *testing.T) {
	e := loadString(t, testPolicies)
	if e.Len() != 8 {
		t.Fatalf("Len = %d, want 8", e.Len())
	}
	tests := []struct {
		name string
		req  Request
		want Decision
	}{
		{"forbid beats permit", Request{Tool: "drop_table", PolicyID: "p"},
			Decision{Deny, []string{"forbid_drop"}, ReasonForbid}},
		{"plain permit forwards", Request{Tool: "read", PolicyID: "p", Arguments: json.RawMessage(`{"n":1}`)},
			Decision{Forward, []string{"permit_all"}, ReasonPermit}},
		{"approve permit beats plain permit", Request{Tool: "read", PolicyID: "p", Arguments: json.RawMessage(`{"n":11}`)},
			Decision{Approve, []string{"approve_big"}, ReasonApprove}},
		{"approve alone", Request{Tool: "read", PolicyID: "other", Arguments: json.RawMessage(`{"n":11}`)},
			Decision{Approve, []string{"approve_big"}, ReasonApprove}},
		{"nothing matches denies", Request{Tool: "read", PolicyID: "other"},
			Decision{Deny, nil, ReasonNoMatch}},
		{"decision forward is a plain permit", Request{Tool: "explicit"},
			Decision{Forward, []string{"explicit_forward"}, ReasonPermit}},
		{"user principal", Request{Tool: "admin_tool", Principal: "alice", SessionID: "s-1"},
			Decision{Forward, []string{"admins_only"}, ReasonPermit}},
		{"other user", Request{Tool: "admin_tool", Principal: "bob"},
			Decision{Deny, nil, ReasonNoMatch}},
		{"session principal when unauthenticated", Request{Tool: "session_tool", SessionID: "s-1"},
			Decision{Forward, []string{"session_tool"}, ReasonPermit}},
		{"authenticated caller is not the session", Request{Tool: "session_tool", Principal: "s-1", SessionID: "s-1"},
			Decision{Deny, nil, ReasonNoMatch}},
		{"context time and source", Request{Tool: "clock", SourceID: "up", Time: monday10.In(time.FixedZone("X", 5*3600))},
			Decision{Approve, []string{"business_hours"}, ReasonApprove}},
		{"context time other hour", Request{Tool: "clock", SourceID: "up", Time: monday10.Add(time.Hour)},
			Decision{Deny, nil, ReasonNoMatch}},
		{"resource name attribute", Request{Tool: "by_name", PolicyID: "named"},
			Decision{Forward, []string{"name_attr"}, ReasonPermit}},
		{"null arguments", Request{Tool: "read", PolicyID: "p", Arguments: json.RawMessage(`null`)},
			Decision{Forward, []string{"permit_all"}, ReasonPermit}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.req.Time.IsZero() {
				tt.req.Time = monday10
			}
			got, err := e.Decide(tt.req)
			if err != nil {
				t.Fatalf("Decide: %v", err)
			}
			if got.Outcome != tt.want.Outcome || got.Reason != tt.want.Reason || !slices.Equal(got.PolicyIDs, tt.want.PolicyIDs) {
				t.Errorf("Decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDecideFailsClosed(t *testing.T) {
	e := loadString(t, `
@id("unguarded")
permit (principal, action, resource) when { resource.arguments.amount < 100 };
@id("overflow")
forbid (principal, action, resource == ToolCall::"calc") when { resource.arguments.n + 1 > 0 };
`)
	tests := []struct {
		name    string
		req     Request
		reason  string
		errText []string
		noLeak  string
	}{
		{"missing attribute", Request{Tool: "t", Arguments: json.RawMessage(`{}`)}, ReasonEvalError,
			[]string{"unguarded at p.cedar:2:1", "missing attribute"}, ""},
		{"type error", Request{Tool: "t", Arguments: json.RawMessage(`{"amount":"lots"}`)}, ReasonEvalError,
			[]string{"unguarded", "type error"}, "lots"},
		{"decimal compared with long", Request{Tool: "t", Arguments: json.RawMessage(`{"amount":99.5}`)}, ReasonEvalError,
			[]string{"type error"}, "99.5"},
		{"overflow hides operands", Request{Tool: "calc", Arguments: json.RawMessage(`{"amount":1,"n":9223372036854775807}`)}, ReasonEvalError,
			[]string{"overflow at p.cedar:4:1", "integer overflow"}, "9223372036854775807"},
		{"forged entity", Request{Tool: "t", Arguments: json.RawMessage(`{"amount":{"__entity":{"type":"User","id":"root"}}}`)}, ReasonBadArguments,
			[]string{"reserved key"}, "root"},
		{"arguments not an object", Request{Tool: "t", Arguments: json.RawMessage(`[1]`)}, ReasonNotAnObject,
			[]string{"JSON object"}, ""},
		{"malformed arguments", Request{Tool: "t", Arguments: json.RawMessage(`{"amount":`)}, ReasonBadArguments,
			[]string{"malformed"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.Decide(tt.req)
			if err == nil {
				t.Fatal("Decide returned no error")
			}
			if got.Outcome != Deny || got.Reason != tt.reason {
				t.Errorf("Decide = %+v, want deny / %q", got, tt.reason)
			}
			for _, w := range tt.errText {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tt.noLeak != "" && strings.Contains(err.Error(), tt.noLeak) {
				t.Errorf("error %q leaks argument value %q", err, tt.noLeak)
			}
		})
	}
}

var fileLineCol = regexp.MustCompile(`\S+\.cedar:\d+:\d+`)

func TestLoadErrors(t *testing.T) {
	fsys := fstest.MapFS{
		"ok.cedar":           {Data: []byte(`permit (principal, action, resource);`)},
		"syntax.cedar":       {Data: []byte("permit (principal, action, resource);\n\npermit (principal, action resource);\n")},
		"unterminated.cedar": {Data: []byte(`permit (principal, action, resource) when { "abc };`)},
		"typo.cedar":         {Data: []byte("\n  @decision(\"aprove\")\n  permit (principal, action, resource);")},
		"forbid_dec.cedar":   {Data: []byte(`@decision("approve") forbid (principal, action, resource);`)},
		"dup.cedar":          {Data: []byte("@id(\"x\") permit (principal, action, resource);\n@id(\"x\") forbid (principal, action, resource);")},
	}
	tests := []struct {
		name  string
		files []string
		want  []string
	}{
		{"syntax error", []string{"ok.cedar", "syntax.cedar"}, []string{"syntax.cedar:3:"}},
		{"unterminated string", []string{"unterminated.cedar"}, []string{"unterminated.cedar:1:"}},
		{"unknown decision", []string{"typo.cedar"}, []string{"typo.cedar:2:3", `"aprove"`}},
		{"decision on forbid", []string{"forbid_dec.cedar"}, []string{"forbid_dec.cedar:1:1", "permit"}},
		{"duplicate id", []string{"dup.cedar"}, []string{"dup.cedar:2:1", `"x"`, "dup.cedar:1:1"}},
		{"duplicate id across files", []string{"dup.cedar", "typo.cedar"}, []string{"dup.cedar:2:1", "typo.cedar:2:3"}},
		{"missing file", []string{"nope.cedar"}, []string{"nope.cedar"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadFS(fsys, tt.files, "")
			if err == nil {
				t.Fatal("LoadFS succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tt.name != "missing file" && !fileLineCol.MatchString(err.Error()) {
				t.Errorf("error %q has no file:line:col", err)
			}
		})
	}
}

func TestLoadFromDiskAndDefaultIDs(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.cedar")
	if err := os.WriteFile(a, []byte("permit (principal, action, resource == ToolCall::\"x\");\nforbid (principal, action, resource == ToolCall::\"y\");"), 0o600); err != nil {
		t.Fatal(err)
	}
	e, err := Load([]string{a}, "")
	if err != nil {
		t.Fatal(err)
	}
	for tool, want := range map[string]Decision{
		"x": {Forward, []string{"a.cedar#0"}, ReasonPermit},
		"y": {Deny, []string{"a.cedar#1"}, ReasonForbid},
	} {
		got, err := e.Decide(Request{Tool: tool})
		if err != nil || got.Outcome != want.Outcome || !slices.Equal(got.PolicyIDs, want.PolicyIDs) {
			t.Errorf("Decide(%s) = %+v, %v; want %+v", tool, got, err, want)
		}
	}
	bad := filepath.Join(dir, "bad.cedar")
	if err := os.WriteFile(bad, []byte("permit (principal, action, resource)"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load([]string{a, bad}, ""); err == nil || !strings.Contains(err.Error(), bad+":1:") {
		t.Errorf("Load(bad) error = %v, want it to name %s:line:col", err, bad)
	}
	empty, err := Load(nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if d, err := empty.Decide(Request{Tool: "x"}); err != nil || d.Outcome != Deny {
		t.Errorf("empty policy set: %+v, %v; want deny", d, err)
	}
}

const testSchema = `
entity User;
entity Session;
type Args = {
  amount?: Long,
  currency?: String,
};
entity ToolCall {
  name: String,
  arguments: Args,
};
action "tools/call" appliesTo {
  principal: [User, Session],
  resource: [ToolCall],
  context: {
    policy_id: String,
    source_id: String,
    annotations: { readOnlyHint: Bool, destructiveHint: Bool, idempotentHint: Bool, openWorldHint: Bool },
    time: { unix: Long, hour: Long, weekday: Long },
  },
};
`

func TestLoadWithSchema(t *testing.T) {
	fsys := fstest.MapFS{
		"schema.cedarschema":     {Data: []byte(testSchema)},
		"bad_schema.cedarschema": {Data: []byte(`entity User {`)},
		"good.cedar": {Data: []byte(`permit (principal, action == Action::"tools/call", resource)
when { resource.arguments has amount && resource.arguments.amount < 10 && context.time.hour < 18 };`)},
		"wrong_type.cedar": {Data: []byte(`permit (principal, action == Action::"tools/call", resource)
when { resource.arguments has currency && resource.arguments.currency < 10 };`)},
		"unknown_attr.cedar": {Data: []byte(`forbid (principal, action == Action::"tools/call", resource)
when { context.nope == 1 };`)},
		"annotations.cedar": {Data: []byte(`permit (principal, action == Action::"tools/call", resource)
when { context.annotations.readOnlyHint && !context.annotations.openWorldHint };`)},
		"annotation_typo.cedar": {Data: []byte(`permit (principal, action == Action::"tools/call", resource)
when { context.annotations.readonly };`)},
	}
	tests := []struct {
		name   string
		file   string
		schema string
		want   string // "" = success
	}{
		{"valid", "good.cedar", "schema.cedarschema", ""},
		{"annotations in context", "annotations.cedar", "schema.cedarschema", ""},
		{"unknown annotation attribute", "annotation_typo.cedar", "schema.cedarschema", "annotation_typo.cedar:1:1"},
		{"type mismatch", "wrong_type.cedar", "schema.cedarschema", "wrong_type.cedar:1:1"},
		{"unknown context attribute", "unknown_attr.cedar", "schema.cedarschema", "unknown_attr.cedar:1:1"},
		{"schema does not parse", "good.cedar", "bad_schema.cedarschema", "bad_schema.cedarschema"},
		{"schema missing", "good.cedar", "nope.cedarschema", "nope.cedarschema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadFS(fsys, []string{tt.file}, tt.schema)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("LoadFS: %v", err)
			case tt.want != "" && err == nil:
				t.Fatal("LoadFS succeeded, want error")
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Errorf("error %q lacks %q", err, tt.want)
			}
		})
	}
}

func TestDecideConcurrent(t *testing.T) {
	e := loadString(t, testPolicies)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				n := (i + g) % 20
				want := Forward
				if n > 10 {
					want = Approve
				}
				d, err := e.Decide(Request{Tool: "read", PolicyID: "p", Arguments: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))})
				if err != nil || d.Outcome != want {
					t.Errorf("n=%d: %+v, %v; want %s", n, d, err, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkDecide100Policies evaluates a realistic call against 100 generated policies and
// reports per-call p50/p99 (target p99 ≤ 50 µs).
func BenchmarkDecide100Policies(b *testing.B) {
	var src strings.Builder
	for i := range 100 {
		switch i % 4 {
		case 0:
			fmt.Fprintf(&src, "@id(\"p%d\")\nforbid (principal, action == Action::\"tools/call\", resource == ToolCall::\"tool_%d\")\nwhen { context.policy_id == \"pid_%d\" && resource.arguments has amount && resource.arguments.amount > %d };\n", i, i, i, i*100)
		case 1:
			fmt.Fprintf(&src, "@id(\"p%d\")\n@decision(\"approve\")\npermit (principal, action == Action::\"tools/call\", resource)\nwhen { context.policy_id == \"pid_%d\" && resource.arguments has amount && resource.arguments.amount > %d };\n", i, i, i)
		case 2:
			fmt.Fprintf(&src, "@id(\"p%d\")\npermit (principal, action == Action::\"tools/call\", resource)\nwhen { context.policy_id == \"pid_%d\" && resource.arguments has currency && [\"USD\", \"EUR\"].contains(resource.arguments.currency) };\n", i, i)
		default:
			fmt.Fprintf(&src, "@id(\"p%d\")\nforbid (principal, action, resource)\nwhen { context.policy_id == \"pid_%d\" && resource.arguments has to && resource.arguments.to like \"blocked-*\" };\n", i, i)
		}
	}
	e := loadString(b, src.String())
	req := Request{
		Principal: "alice",
		Tool:      "transfer_funds",
		Arguments: json.RawMessage(`{"amount":2500,"currency":"USD","to":"acct-42","memo":"invoice 17","meta":{"tags":["a","b"]}}`),
		PolicyID:  "pid_1",
		SourceID:  "upstream",
		Time:      monday10,
	}
	if d, err := e.Decide(req); err != nil || d.Outcome != Approve {
		b.Fatalf("setup decision %+v, %v", d, err)
	}
	durs := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		if _, err := e.Decide(req); err != nil {
			b.Fatal(err)
		}
		durs = append(durs, time.Since(start))
	}
	sort.Slice(durs, func(i, j int) bool { return durs[i] < durs[j] })
	pct := func(p float64) float64 {
		return float64(durs[int(p*float64(len(durs)-1))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}

func TestErrorClassNeverEchoes(t *testing.T) {
	for _, msg := range []string{
		"integer overflow while attempting to add `9223372036854775807` with `1`",
		"`ToolCall::\"secret\"` does not have the attribute `x`",
		"something new and unexpected: secret",
	} {
		if c := errorClass(msg); strings.Contains(c, "secret") || strings.Contains(c, "922") {
			t.Errorf("errorClass(%q) = %q echoes input", msg, c)
		}
	}
	if !errors.Is(fmt.Errorf("x: %w", ErrArguments), ErrArguments) {
		t.Fatal("ErrArguments must be matchable")
	}
}
