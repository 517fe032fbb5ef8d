package intercept

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-mcp/tollgate/internal/session"
)

// holdCounts is what the hold-path metrics say at one moment.
type holdCounts struct {
	held, attached, settled, replayed, now float64
	waits                                  map[string]uint64 // tollgate_hold_wait_seconds count by outcome
}

// readHold gathers reg, where newGatewayMetrics registered the gateway's metrics.
func readHold(t *testing.T, reg prometheus.Gatherer) holdCounts {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	c := holdCounts{waits: map[string]uint64{}}
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			switch f.GetName() {
			case "tollgate_held_calls_total":
				c.held = s.GetCounter().GetValue()
			case "tollgate_held_calls_attached_total":
				c.attached = s.GetCounter().GetValue()
			case "tollgate_held_calls_settled_total":
				c.settled = s.GetCounter().GetValue()
			case "tollgate_held_calls_replayed_total":
				c.replayed = s.GetCounter().GetValue()
			case "tollgate_held_calls":
				c.now = s.GetGauge().GetValue()
			case "tollgate_hold_wait_seconds":
				c.waits[s.GetLabel()[0].GetValue()] = s.GetHistogram().GetSampleCount()
			}
		}
	}
	return c
}

func (c holdCounts) want(t *testing.T, step string, held, attached, settled, replayed, now float64, answered, settledWaits, gone uint64) {
	t.Helper()
	w := holdCounts{held: held, attached: attached, settled: settled, replayed: replayed, now: now,
		waits: map[string]uint64{holdAnswered: answered, holdSettled: settledWaits, holdClientGone: gone}}
	if c.held != w.held || c.attached != w.attached || c.settled != w.settled || c.replayed != w.replayed || c.now != w.now ||
		c.waits[holdAnswered] != answered || c.waits[holdSettled] != settledWaits || c.waits[holdClientGone] != gone {
		t.Errorf("%s: hold metrics %+v, want %+v", step, c, w)
	}
}

// TestHoldMetrics: each hold-path metric moves for its own event — a call held and settled at
// the budget, a retry attached to its task, a retry of a finished call replayed at once, a call
// decided within the budget, and a client that goes away while held (the gauge of calls held
// now rises while it waits and falls when it leaves).
func TestHoldMetrics(t *testing.T) {
	h := newHarness(t, holdConfig("50ms", ""))
	m := prometheus.NewPedanticRegistry()
	h.gw.m = newGatewayMetrics(m, h.gw.toolLabel)
	sess := &session.Session{ID: "s1"}
	call := callRequest(`{"name":"delete_x","arguments":{"id":1}}`)

	waitOut(t, h.route(t, sess, call)) // undecided: settles at the budget
	readHold(t, m).want(t, "settled", 1, 0, 1, 0, 0, 0, 1, 0)

	waitOut(t, h.route(t, sess, call)) // the same call again attaches to the task, settles again
	readHold(t, m).want(t, "attached", 2, 1, 2, 0, 0, 0, 2, 0)

	all, _ := h.mgr.ListAll(t.Context(), tasksAll)
	if len(all) != 1 {
		t.Fatalf("tasks = %d, want 1", len(all))
	}
	if _, err := h.mgr.Approve(t.Context(), all[0].ID, "alice", "ok"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, _, err := h.mgr.Result(ctx, all[0].Owner, all[0].ID); err != nil { // until it has run
		t.Fatal(err)
	}
	waitOut(t, h.route(t, sess, call)) // finished: the stored outcome at once, no hold
	readHold(t, m).want(t, "replayed", 2, 1, 2, 1, 0, 0, 2, 0)

	// Another call, approved before its hold begins waiting: answered within the budget.
	res := h.route(t, sess, callRequest(`{"name":"delete_x","arguments":{"id":2}}`))
	pending, _ := h.mgr.ListAll(t.Context(), tasksAll)
	for _, tk := range pending {
		if !tk.State.Terminal() {
			if _, err := h.mgr.Approve(t.Context(), tk.ID, "alice", "ok"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if a := decodeHeld(t, mustWait(t, res)); a.Result == nil {
		t.Fatalf("approved held call: %+v", a)
	}
	readHold(t, m).want(t, "answered", 3, 1, 2, 1, 0, 1, 2, 0)

	// A client that leaves while held: counted as held now, then gone.
	h2 := newHarness(t, holdConfig("30s", ""))
	m2 := prometheus.NewPedanticRegistry()
	h2.gw.m = newGatewayMetrics(m2, h2.gw.toolLabel)
	res = h2.route(t, sess, callRequest(`{"name":"delete_x","arguments":{"id":3}}`))
	cctx, leave := context.WithCancel(t.Context())
	done := make(chan []byte, 1)
	go func() { done <- res.Wait(cctx, func([]byte) bool { return true }) }()
	poll := time.NewTicker(time.Millisecond)
	defer poll.Stop()
	for readHold(t, m2).now != 1 {
		select {
		case <-ctx.Done():
			t.Fatal("tollgate_held_calls never reached 1 while the call was held")
		case <-poll.C:
		}
	}
	leave()
	select {
	case out := <-done:
		if out != nil {
			t.Fatalf("a client that left got an answer: %s", out)
		}
	case <-ctx.Done():
		t.Fatal("the held call did not end when its client left")
	}
	readHold(t, m2).want(t, "client_gone", 1, 0, 0, 0, 0, 0, 0, 1)
}

// mustWait runs a Wait result to its answer.
func mustWait(t *testing.T, res Result) []byte {
	t.Helper()
	out, _ := waitOut(t, res)
	return out
}
