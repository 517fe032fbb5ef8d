package audit

import (
	"bytes"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

// TestDecisionLines: a decision line carries the caller, tool, rule, policies, outcome and
// correlation id and no task id; audit.forward governs forward lines only.
func TestDecisionLines(t *testing.T) {
	var b bytes.Buffer
	l := New(&b)
	deny := Event{Tool: "drop_table", Owner: "0a1b2c", Actor: "alice", Outcome: OutcomeDeny, Rule: "drop_*", CorrelationID: "c1"}
	l.Decision(deny, config.AuditForwardNone)
	l.Decision(Event{Tool: "echo", Outcome: OutcomeForward, Rule: "defaults"}, config.AuditForwardNone)
	l.Decision(Event{Tool: "delete_file", Outcome: OutcomeHold, Rule: "delete_*", Policies: []string{"p1"}, Workflow: "default"}, config.AuditForwardNone)
	l.Decision(Event{Tool: "echo", Outcome: OutcomeForward, Rule: "defaults"}, config.AuditForwardAll)
	es := decode(t, b.Bytes())
	if len(es) != 3 {
		t.Fatalf("lines: %s", b.String())
	}
	if e := es[0]; e.Kind != KindDecision || e.Owner != "0a1b2c" || e.Actor != "alice" || e.Rule != "drop_*" || e.Outcome != "deny" || e.CorrelationID != "c1" || e.TaskID != "" {
		t.Errorf("deny line: %+v", e)
	}
	if e := es[1]; e.Outcome != "hold" || len(e.Policies) != 1 || e.Policies[0] != "p1" || e.Workflow != "default" {
		t.Errorf("hold line: %+v", e)
	}
	if e := es[2]; e.Outcome != "forward" || e.Tool != "echo" {
		t.Errorf("forward line: %+v", e)
	}
	if bytes.Contains(b.Bytes(), []byte(`"task_id"`)) {
		t.Errorf("decision lines name no task: %s", b.String())
	}
}

// TestForwardSampled: audit.forward: sampled writes at most ForwardSampleRate forward lines a
// second, and the next line written says how many were left out; denials always go through.
func TestForwardSampled(t *testing.T) {
	var b bytes.Buffer
	l := New(&b)
	fwd := Event{Tool: "echo", Outcome: OutcomeForward, Time: t0}
	for range ForwardSampleRate + 5 {
		l.Decision(fwd, config.AuditForwardSampled)
	}
	l.Decision(Event{Tool: "drop", Outcome: OutcomeDeny, Time: t0}, config.AuditForwardSampled)
	next := fwd
	next.Time = t0.Add(1e9)
	l.Decision(next, config.AuditForwardSampled)
	es := decode(t, b.Bytes())
	if len(es) != ForwardSampleRate+2 {
		t.Fatalf("%d lines, want %d:\n%s", len(es), ForwardSampleRate+2, b.String())
	}
	if e := es[ForwardSampleRate]; e.Outcome != OutcomeDeny {
		t.Errorf("deny line missing: %+v", e)
	}
	if e := es[len(es)-1]; e.SkippedForwards != 5 {
		t.Errorf("skipped_forwards = %d, want 5", e.SkippedForwards)
	}
}

// TestRecent: the last RecentDecisions non-forward decisions are kept, newest first, and
// would=true keeps audit mode's only.
func TestRecent(t *testing.T) {
	l := New(&bytes.Buffer{})
	l.Decision(Event{Tool: "echo", Outcome: OutcomeForward}, config.AuditForwardAll)
	for i := range RecentDecisions + 3 {
		e := Event{Tool: "drop", Outcome: OutcomeDeny, Actor: string(rune('a' + i%26))}
		if i%2 == 1 {
			e.Outcome, e.Mode = OutcomeWouldDeny, config.ModeAudit
		}
		l.Decision(e, config.AuditForwardAll)
	}
	all := l.Recent(false, 1000, nil)
	if len(all) != RecentDecisions {
		t.Fatalf("kept %d, want %d", len(all), RecentDecisions)
	}
	last := RecentDecisions + 2 // the newest: even, a deny
	if all[0].Actor != string(rune('a'+last%26)) || all[0].Outcome != OutcomeDeny {
		t.Errorf("newest = %+v", all[0])
	}
	would := l.Recent(true, 5, nil)
	if len(would) != 5 || would[0].Actor != string(rune('a'+(last-1)%26)) {
		t.Errorf("would = %+v", would)
	}
	for _, e := range would {
		if e.Outcome != OutcomeWouldDeny {
			t.Errorf("would-be list holds %+v", e)
		}
	}
}

// TestRecentFairPerSource: one caller's flood of denials pushes out its own entries, never the
// few of other callers (fails on the plain ring, which kept the last 512 whoever made them).
func TestRecentFairPerSource(t *testing.T) {
	l := New(&bytes.Buffer{})
	for _, who := range []string{"alice", "bob"} {
		l.Decision(Event{Tool: "delete_user", Outcome: OutcomeHold, Workflow: "default", Actor: who}, config.AuditForwardAll)
	}
	l.Decision(Event{Tool: "drop", Outcome: OutcomeDeny, Owner: "0a1b2c3d4e5f"}, config.AuditForwardAll) // an unverified owner
	for range 10 * RecentDecisions {
		l.Decision(Event{Tool: "drop", Outcome: OutcomeDeny, Actor: "mallory"}, config.AuditForwardAll)
	}
	all := l.Recent(false, 1000, nil)
	if len(all) != RecentDecisions {
		t.Fatalf("kept %d, want %d", len(all), RecentDecisions)
	}
	kept := map[string]int{}
	for _, e := range all {
		kept[e.Actor+e.Owner]++
	}
	if kept["alice"] != 1 || kept["bob"] != 1 || kept["0a1b2c3d4e5f"] != 1 || kept["mallory"] != RecentDecisions-3 {
		t.Errorf("kept per source = %v, want alice, bob and the owner once each, mallory the rest", kept)
	}
	// A newcomer still gets in when the heaviest source gives way.
	l.Decision(Event{Tool: "drop", Outcome: OutcomeDeny, Actor: "carol"}, config.AuditForwardAll)
	if got := l.Recent(false, 1, nil); len(got) != 1 || got[0].Actor != "carol" {
		t.Errorf("newest = %+v, want carol's", got)
	}
}

// BenchmarkDecisionForward: one forward decision line written to a file (audit.forward: all),
// the cost every forwarded tools/call pays.
func BenchmarkDecisionForward(b *testing.B) {
	l, err := Open(b.TempDir() + "/audit.log")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	e := Event{Tool: "read_file", Owner: "9b1f0c2a7d44", Actor: "alice", Outcome: OutcomeForward, Rule: "read_*", CorrelationID: "3f9c0a7e51d2b804"}
	b.ReportAllocs()
	for b.Loop() {
		l.Decision(e, config.AuditForwardAll)
	}
}
