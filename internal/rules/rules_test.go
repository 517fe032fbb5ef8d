package rules

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func rule(match string, action config.Action) config.Rule {
	return config.Rule{Match: match, Action: action}
}

func mustCompile(t testing.TB, gov config.Governance, force ...string) *Engine {
	t.Helper()
	e, err := Compile(gov, force)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return e
}

// TestAnnotationSeedRows covers the annotation rows of REQ-CORE-007 §9.1 and the matrix of
// docs/contract.md §2 (which wins where the two differ).
func TestAnnotationSeedRows(t *testing.T) {
	fwd := Decision{Action: config.ActionForward, Rule: -1}
	approve := Decision{Action: config.ActionApprove, Rule: 0, Workflow: "default"}
	deny := Decision{Action: config.ActionDeny, Rule: 0}
	pol := Decision{Action: config.ActionPolicy, Rule: 0, PolicyID: "p"}
	forced := func(d Decision) Decision { d.ForceRequired = true; return d }

	tests := []struct {
		name          string
		d             Decision
		upstreamTasks bool
		upstream      TaskSupport
		sync          string
		want          TaskSupport
	}{
		{"upstream no tasks + no approval", fwd, false, "", config.SyncApprovalError, Forbidden},
		{"upstream no tasks + no approval, upstream value ignored", fwd, false, Required, "", Forbidden},
		{"upstream no tasks + approval possible (approve)", approve, false, "", "", Required},
		{"upstream no tasks + approval possible (policy)", pol, false, "", "", Required},
		{"upstream has tasks + no approval preserves optional", fwd, true, Optional, "", Optional},
		{"upstream has tasks + no approval preserves required", fwd, true, Required, "", Required},
		// docs/contract.md §2: absent/forbidden become optional (accelerated approve, F-005.6).
		{"upstream has tasks + no approval, absent becomes optional", fwd, true, "", "", Optional},
		{"upstream has tasks + no approval, forbidden becomes optional", fwd, true, Forbidden, "", Optional},
		{"upstream has tasks + no approval, unknown value becomes optional", fwd, true, "sometimes", "", Optional},
		{"forbidden + no approval (upstream without tasks)", fwd, false, Forbidden, "", Forbidden},
		{"forbidden + no approval (deny)", deny, true, Forbidden, "", Forbidden},
		{"deny with upstream tasks optional", deny, true, Optional, "", Forbidden},
		{"forbidden + approval possible (policy)", pol, true, Forbidden, "", Required},
		{"forbidden + approval possible (approve)", approve, true, Forbidden, "", Required},
		{"force_required override on forward", forced(fwd), false, Forbidden, "", Required},
		{"force_required override on deny", forced(deny), true, "", "", Required},
		{"force_required override ignores sync_approval promote", forced(approve), false, "", config.SyncApprovalPromote, Required},
		{"sync_approval promote makes approve optional", approve, false, "", config.SyncApprovalPromote, Optional},
		{"sync_approval block makes policy optional", pol, true, "", config.SyncApprovalBlock, Optional},
		{"sync_approval error keeps approve required", approve, true, "", config.SyncApprovalError, Required},
		{"sync_approval hold makes approve optional", approve, false, "", config.SyncApprovalHold, Optional},
		{"force_required override ignores sync_approval hold", forced(approve), false, "", config.SyncApprovalHold, Required},
		{"sync_approval does not touch forward", fwd, false, "", config.SyncApprovalPromote, Forbidden},
		{"sync_approval does not touch deny", deny, false, "", config.SyncApprovalBlock, Forbidden},
		{"unknown action fails closed", Decision{Action: "bogus"}, true, Optional, "", Forbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Annotation(tt.d, tt.upstreamTasks, tt.upstream, tt.sync); got != tt.want {
				t.Errorf("Annotation = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestAnnotationFromConfig runs the seed's F-002.5 log examples end to end: config → Decide →
// Annotation.
func TestAnnotationFromConfig(t *testing.T) {
	gov := config.Governance{
		Defaults: config.Defaults{Action: config.ActionForward},
		Rules: []config.Rule{
			rule("delete_*", config.ActionApprove),
			rule("drop_*", config.ActionDeny),
			{Match: "transfer_*", Action: config.ActionPolicy, PolicyID: "financial_transfer"},
		},
	}
	e := mustCompile(t, gov, "read_secret")
	tests := []struct {
		tool          string
		upstreamTasks bool
		want          TaskSupport
	}{
		{"delete_user", false, Required},
		{"read_file", true, Optional},
		{"read_config", false, Forbidden},
		{"drop_table", true, Forbidden},
		{"transfer_funds", false, Required},
		{"read_secret", false, Required},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			if got := Annotation(e.Decide(tt.tool), tt.upstreamTasks, "", ""); got != tt.want {
				t.Errorf("annotation(%s) = %q, want %q", tt.tool, got, tt.want)
			}
		})
	}
}

func TestDecideFirstMatchWinsAndDefaults(t *testing.T) {
	gov := config.Governance{
		Defaults: config.Defaults{Action: config.ActionDeny, Approval: "fallback"},
		Rules: []config.Rule{
			{Match: "delete_logs", Action: config.ActionForward},
			{Match: "delete_*", Action: config.ActionApprove, Approval: "admins"},
			{Match: "*", Action: config.ActionApprove},
			{Match: "transfer_*", Action: config.ActionPolicy, PolicyID: "never_reached"},
		},
	}
	e := mustCompile(t, gov, "delete_user")
	tests := []struct {
		tool string
		want Decision
	}{
		{"delete_logs", Decision{Action: config.ActionForward, Rule: 0, Match: "delete_logs", Workflow: "default"}},
		{"delete_user", Decision{Action: config.ActionApprove, Rule: 1, Match: "delete_*", Workflow: "admins", ForceRequired: true}},
		{"delete_", Decision{Action: config.ActionApprove, Rule: 1, Match: "delete_*", Workflow: "admins"}},
		{"transfer_funds", Decision{Action: config.ActionApprove, Rule: 2, Match: "*", Workflow: "default"}},
		{"", Decision{Action: config.ActionApprove, Rule: 2, Match: "*", Workflow: "default"}},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			for range 2 { // second call comes from the cache
				if got := e.Decide(tt.tool); got != tt.want {
					t.Fatalf("Decide(%q) = %+v, want %+v", tt.tool, got, tt.want)
				}
			}
		})
	}

	noRules := mustCompile(t, config.Governance{Defaults: config.Defaults{Action: config.ActionDeny, Approval: "fallback"}})
	want := Decision{Action: config.ActionDeny, Rule: -1, Workflow: "fallback"}
	if got := noRules.Decide("anything"); got != want {
		t.Errorf("defaults: got %+v, want %+v", got, want)
	}
	empty := mustCompile(t, config.Governance{})
	if got := empty.Decide("x"); got.Action != config.ActionForward || got.Rule != -1 || got.Match != "" {
		t.Errorf("empty defaults: got %+v, want forward from defaults", got)
	}
}

func TestGlobSemantics(t *testing.T) {
	tests := []struct {
		pattern string
		match   []string
		nomatch []string
	}{
		{"delete_*", []string{"delete_", "delete_user", "delete_a/b.c"}, []string{"delete", "xdelete_user", "Delete_user"}},
		{"{get,list}*", []string{"get", "get_user", "listings"}, []string{"put_user", "aget"}},
		{"drop_?", []string{"drop_a", "drop_1"}, []string{"drop_", "drop_ab"}},
		{"db_[a-c]*", []string{"db_alpha", "db_c"}, []string{"db_delta", "db_"}},
		{"db_[!a-c]*", []string{"db_delta"}, []string{"db_alpha", "db_"}},
		{"tool[xy]", []string{"toolx", "tooly"}, []string{"toolz", "tool"}},
		{"exact_name", []string{"exact_name"}, []string{"exact_name2", "exact"}},
		{`lit\*`, []string{"lit*"}, []string{"literal"}},
		{"*.admin.*", []string{"a.admin.b", "x.y.admin.z"}, []string{"admin.b"}},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			e := mustCompile(t, config.Governance{
				Defaults: config.Defaults{Action: config.ActionForward},
				Rules:    []config.Rule{rule(tt.pattern, config.ActionDeny)},
			})
			for _, s := range tt.match {
				if d := e.Decide(s); d.Rule != 0 {
					t.Errorf("%q should match %q", tt.pattern, s)
				}
			}
			for _, s := range tt.nomatch {
				if d := e.Decide(s); d.Rule != -1 {
					t.Errorf("%q should not match %q", tt.pattern, s)
				}
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name string
		gov  config.Governance
		want []string
	}{
		{"unclosed brace", config.Governance{Rules: []config.Rule{rule("ok_*", config.ActionDeny), rule("{a,b", config.ActionDeny)}},
			[]string{"governance.rules[1].match"}},
		{"unclosed class", config.Governance{Rules: []config.Rule{rule("[abc", config.ActionDeny)}},
			[]string{"governance.rules[0].match"}},
		{"unknown action", config.Governance{Rules: []config.Rule{rule("x", "allow")}},
			[]string{"governance.rules[0].action"}},
		{"every problem reported", config.Governance{
			Defaults: config.Defaults{Action: "maybe"},
			Rules:    []config.Rule{rule("{", config.ActionDeny), rule("y", "")},
		}, []string{"governance.rules[0].match", "governance.rules[1].action", "governance.defaults.action"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(tt.gov, nil)
			if err == nil {
				t.Fatal("Compile succeeded, want error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

func TestForceRequiredTrimsNames(t *testing.T) {
	e := mustCompile(t, config.Governance{}, " transfer_funds ", "", "delete_user")
	for tool, want := range map[string]bool{"transfer_funds": true, "delete_user": true, "": false, "transfer_*": false} {
		if got := e.Decide(tool).ForceRequired; got != want {
			t.Errorf("ForceRequired(%q) = %v, want %v", tool, got, want)
		}
	}
}

func TestDecideCacheConcurrent(t *testing.T) {
	e := mustCompile(t, config.Governance{
		Defaults: config.Defaults{Action: config.ActionForward},
		Rules:    []config.Rule{rule("even_*", config.ActionDeny), rule("odd_*", config.ActionApprove)},
	})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				name := fmt.Sprintf("even_%d", (i+g)%50)
				want := config.ActionDeny
				if i%2 == 1 {
					name = fmt.Sprintf("odd_%d", (i+g)%50)
					want = config.ActionApprove
				}
				if got := e.Decide(name); got.Action != want {
					t.Errorf("Decide(%q) = %q, want %q", name, got.Action, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := e.cached.Load(); n != 100 {
		t.Errorf("cached = %d, want 100 distinct names", n)
	}
}

func TestDecideCacheIsBounded(t *testing.T) {
	e := mustCompile(t, config.Governance{Rules: []config.Rule{rule("t_*", config.ActionDeny)}})
	for i := range MaxCachedTools + 100 {
		e.Decide(fmt.Sprintf("t_%d", i))
	}
	if n := e.cached.Load(); n != MaxCachedTools {
		t.Errorf("cached = %d, want cap %d", n, MaxCachedTools)
	}
	// Past the cap decisions stay correct.
	if d := e.Decide("t_beyond"); d.Action != config.ActionDeny || d.Rule != 0 {
		t.Errorf("uncached decision = %+v", d)
	}
	if _, ok := e.cache.Load("t_beyond"); ok {
		t.Error("tool cached beyond the cap")
	}
}

// Long names are decided correctly but never cached: the cache holds at most
// MaxCachedTools × MaxCachedNameBytes bytes of client-chosen names.
func TestDecideCacheSkipsLongNames(t *testing.T) {
	e := mustCompile(t, config.Governance{Rules: []config.Rule{rule("t_*", config.ActionDeny)}})
	long := "t_" + strings.Repeat("x", MaxCachedNameBytes)
	for range 3 {
		if d := e.Decide(long); d.Action != config.ActionDeny || d.Rule != 0 {
			t.Fatalf("decision for a long name = %+v", d)
		}
	}
	if n := e.cached.Load(); n != 0 {
		t.Errorf("cached = %d, want 0", n)
	}
	e.Decide(long[:MaxCachedNameBytes])
	if n := e.cached.Load(); n != 1 {
		t.Errorf("a name of exactly %d bytes: cached = %d, want 1", MaxCachedNameBytes, n)
	}
}

func thousandRules() config.Governance {
	gov := config.Governance{Defaults: config.Defaults{Action: config.ActionForward}}
	for i := range 1000 {
		var m string
		switch i % 4 {
		case 0:
			m = fmt.Sprintf("svc%d_*", i)
		case 1:
			m = fmt.Sprintf("{get,list}_%d_*", i)
		case 2:
			m = fmt.Sprintf("tool_%d_?", i)
		default:
			m = fmt.Sprintf("db_[a-f]%d*", i)
		}
		gov.Rules = append(gov.Rules, config.Rule{Match: m, Action: config.ActionApprove})
	}
	return gov
}

// BenchmarkCompileAndMatch1000 compiles 1000 rules and decides 1000 distinct tools (a cold
// cache, as after a reload). NF-001.4 wants < 100 ms; Tollgate targets ≤ 10 ms.
func BenchmarkCompileAndMatch1000(b *testing.B) {
	gov := thousandRules()
	tools := make([]string, 1000)
	// Names that share first bytes and prefixes with many rules, so the index cannot
	// skip them all; most still fall through to the defaults.
	for i := range tools {
		tools[i] = fmt.Sprintf([]string{"unmatched_tool_%d", "svc_x_%d", "tool_%d_xx", "get_%d_y"}[i%4], i)
	}
	tools[999] = "db_c999x"
	b.ReportAllocs()
	for b.Loop() {
		e, err := Compile(gov, nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, tool := range tools {
			e.Decide(tool)
		}
	}
}

func BenchmarkDecideWarm(b *testing.B) {
	e, err := Compile(thousandRules(), []string{"transfer_funds"})
	if err != nil {
		b.Fatal(err)
	}
	e.Decide("unmatched_tool")
	b.ReportAllocs()
	for b.Loop() {
		e.Decide("unmatched_tool")
	}
}

func BenchmarkCompile1000(b *testing.B) {
	gov := thousandRules()
	for b.Loop() {
		if _, err := Compile(gov, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func TestLiteralPrefixes(t *testing.T) {
	tests := []struct {
		pattern string
		want    []string
	}{
		{"delete_*", []string{"delete_"}},
		{"exact", []string{"exact"}},
		{"{get,list}_*", []string{"get_", "list_"}},
		{"x{a,{b,c}d}y*", []string{"xay", "xbdy", "xcdy"}},
		{"{,x}abc", []string{"abc", "xabc"}},
		{`\*lit*`, []string{"*lit"}},
		{"{[,}]x,y}", []string{"", "y"}},
		{"{[\\]],z}q", []string{"", "zq"}},
		{"*_admin", []string{""}},
		{"ab?x", []string{"ab"}},
		{"{a,*}", []string{"a", ""}},
		{"", []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			if got := literalPrefixes(tt.pattern, 0); !slices.Equal(got, tt.want) {
				t.Errorf("literalPrefixes(%q) = %q, want %q", tt.pattern, got, tt.want)
			}
		})
	}
}

// TestIndexMatchesLinearScan checks that the first-byte index never changes which rule wins.
func TestIndexMatchesLinearScan(t *testing.T) {
	patterns := []string{
		"{get,list}_*", "a*", "*_x", "get_[a-c]*", "{,d}rop", "\\{x}", "l?st_*", "[!g]*",
		"{[,}]x,y}*", "{a,{b,c}x}y", "delete_*", "drop", "*", "{g*,h}", "\\*star",
		"x{a,{b,c}d}y*", "{lis,li}t_*", "{{a,b},{c,d}}{e,f}",
	}
	tools := []string{
		"", "get_a", "get_z", "list_1", "lost_2", "a", "ab_x", "drop", "rop", "{x}", "[x",
		"xx", ",x", "}x", "bxy", "ay", "cxy", "delete_me", "h", "hh", "*star", "zzz", "yes",
		"xay", "xbdy1", "xcd", "list_", "lit_", "ae", "df", "cf", "bg",
	}
	// Every rotation of the pattern list, so each pattern gets to be first and last.
	for shift := range patterns {
		var gov config.Governance
		for i := range patterns {
			gov.Rules = append(gov.Rules, config.Rule{Match: patterns[(i+shift)%len(patterns)], Action: config.ActionDeny})
		}
		e := mustCompile(t, gov)
		for _, tool := range tools {
			want := -1
			for i := range e.rules {
				if e.rules[i].pattern.Match(tool) {
					want = i
					break
				}
			}
			if got := e.Decide(tool).Rule; got != want {
				t.Errorf("shift %d tool %q: rule %d, linear scan says %d", shift, tool, got, want)
			}
		}
	}
}
