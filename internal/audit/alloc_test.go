package audit

import (
	"io"
	"testing"
	"time"
)

// TestRecordReusesItsBuffer: writing an audit line reuses the Logger's encoding buffer; a
// buffer and encoder made anew per line (four allocations for a task's "created" line, two now)
// were garbage on every held call. Allocations are counted, not
// timed: allocations of one Record after the first.
func TestRecordReusesItsBuffer(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts vary under the race detector (sync.Pool drops items)")
	}
	l := New(io.Discard)
	e := Event{Time: time.Date(2026, 11, 26, 19, 0, 0, 0, time.UTC), Kind: KindCreated,
		TaskID: "tg_11111111-2222-4333-8444-555555555555", Tool: "approve_action", Workflow: "default",
		Owner: "3f2a9c0d5e6b7a8c", Actor: "carol", ArgsHash: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
	allocs := testing.AllocsPerRun(100, func() { l.Record(e) })
	t.Logf("%.0f allocations per Record", allocs)
	if allocs > 2 {
		t.Errorf("Record allocates %.0f times per line, want at most 2 (the time's encoding)", allocs)
	}
}

// BenchmarkRecord reports what writing one audit line allocates (-benchmem).
func BenchmarkRecord(b *testing.B) {
	l := New(io.Discard)
	e := Event{Time: time.Date(2026, 11, 26, 19, 0, 0, 0, time.UTC), Kind: KindCreated,
		TaskID: "tg_11111111-2222-4333-8444-555555555555", Tool: "approve_action", Workflow: "default",
		Owner: "3f2a9c0d5e6b7a8c", Actor: "carol", ArgsHash: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
	b.ReportAllocs()
	for b.Loop() {
		l.Record(e)
	}
}
