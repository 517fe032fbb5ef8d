package intercept

import (
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/governance"
)

// TestRecomputeCallerViews: a reload that changes only what some callers may call (a rule
// narrowed to callers) changes no annotation of view 0, yet those callers' listings change:
// Recompute reports the tools as changed, so list_changed goes out. Without caller-dependent
// rules, a reload that changes nothing reports nothing (fails on the old Recompute: it
// compared view 0 only).
func TestRecomputeCallerViews(t *testing.T) {
	h := newHarness(t, unitConfig)
	h.listTools(t, `[{"name":"drop_x","inputSchema":{"type":"object"}},{"name":"read_x","inputSchema":{"type":"object"}}]`)
	h.gw.Recompute(h.snaps.Load())
	build := func(yaml string) *governance.Snapshot {
		t.Helper()
		snap, err := governance.Build(parseUnitConfig(t, yaml), nil)
		if err != nil {
			t.Fatal(err)
		}
		h.snaps.Store(snap)
		return snap
	}
	if changed := h.gw.Recompute(build(unitConfig)); len(changed) != 0 {
		t.Fatalf("an unchanged reload reported %v", changed)
	}
	// drop_* becomes forwarded for the dba alone: view 0 still sees it denied.
	narrowed := strings.Replace(unitConfig, `    - {match: "drop_*", action: deny}`,
		"    - {match: \"drop_*\", action: forward, callers: [\"user:dba\"]}\n    - {match: \"drop_*\", action: deny}", 1)
	if changed := h.gw.Recompute(build(narrowed)); len(changed) == 0 {
		t.Fatal("a reload that changed the dba's listing reported no change (no list_changed)")
	}
	// Back to rules without callers: the dba's view changes again.
	if changed := h.gw.Recompute(build(unitConfig)); len(changed) == 0 {
		t.Fatal("a reload that removed a callers rule reported no change")
	}
}
