package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestTransitionTable(t *testing.T) {
	want := map[State][]State{
		AwaitingApproval: {AwaitingApproval, Approved, Rejected, TimedOut, Cancelled, Expired}, // itself: a vote
		Approved:         {Executing, Cancelled, Expired, Failed},
		Executing:        {Executing, Completed, Failed, Cancelled, Expired}, // itself: a question of the upstream's
	}
	for _, from := range States() {
		for _, to := range States() {
			exp := false
			for _, s := range want[from] {
				exp = exp || s == to
			}
			if got := CanTransition(from, to); got != exp {
				t.Errorf("CanTransition(%s, %s) = %v, want %v", from, to, got, exp)
			}
		}
		if from.Terminal() != (len(want[from]) == 0) {
			t.Errorf("%s.Terminal() = %v", from, from.Terminal())
		}
	}
	for _, tr := range Transitions() {
		if tr.Trigger == "" {
			t.Errorf("%s → %s has no trigger", tr.From, tr.To)
		}
	}
}

// TestManagerEnforcesTable drives every (from, to) pair through Manager.update: only edges of
// the table commit; everything else fails with ErrInvalidTransition and changes nothing.
func TestManagerEnforcesTable(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil)
	for _, from := range States() {
		for _, to := range States() {
			tk := e.create(t, "o")
			// put the task into `from` directly in the store (test-only shortcut)
			r, _ := e.st.Get(ctx, tk.ID)
			cur, _ := decodeTask(r)
			cur.State = from
			rec, _ := encodeTask(cur)
			if _, err := e.st.Update(ctx, rec, r.Version); err != nil {
				t.Fatal(err)
			}
			_, err := e.m.update(ctx, tk.ID, func(t *Task) error { t.State = to; return nil })
			if CanTransition(from, to) {
				if err != nil {
					t.Errorf("%s → %s: %v", from, to, err)
				}
				if got := e.state(t, tk.ID); got != to {
					t.Errorf("%s → %s: state %s", from, to, got)
				}
			} else {
				if !errors.Is(err, ErrInvalidTransition) {
					t.Errorf("%s → %s: err = %v, want ErrInvalidTransition", from, to, err)
				}
				if got := e.state(t, tk.ID); got != from {
					t.Errorf("%s → %s rejected but state is %s", from, to, got)
				}
			}
		}
	}
}

func TestWire(t *testing.T) {
	tests := map[State]string{
		AwaitingApproval: "working", Approved: "working", Executing: "working",
		Completed: "completed", Failed: "failed", Rejected: "failed", Expired: "failed",
		TimedOut: "failed", Cancelled: "cancelled",
	}
	for s, want := range tests {
		if got := s.Wire(); got != want {
			t.Errorf("%s.Wire() = %q, want %q", s, got, want)
		}
	}
	created := time.Date(2025, 11, 25, 10, 30, 0, 0, time.FixedZone("CET", 3600))
	tk := &Task{ID: "tg_x", State: AwaitingApproval, StatusMessage: "Awaiting approval (default)",
		CreatedAt: created, UpdatedAt: created.Add(1500 * time.Millisecond), TTL: time.Minute, PollInterval: 2 * time.Second}
	want := `{"taskId":"tg_x","status":"working","statusMessage":"Awaiting approval (default)","createdAt":"2025-11-25T09:30:00.000Z","lastUpdatedAt":"2025-11-25T09:30:01.500Z","ttl":60000,"pollInterval":2000}`
	if got := string(tk.WireJSON()); got != want {
		t.Errorf("WireJSON =\n%s\nwant\n%s", got, want)
	}
	tk.StatusMessage = ""
	if strings.Contains(string(tk.WireJSON()), "statusMessage") {
		t.Error("empty statusMessage not omitted")
	}
}

func TestNewID(t *testing.T) {
	re := regexp.MustCompile(`^tg_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 100 {
		id := NewID()
		if !re.MatchString(id) || seen[id] {
			t.Fatalf("bad or repeated id %q", id)
		}
		seen[id] = true
	}
}

var testKey = []byte("0123456789abcdef0123456789abcdef")

func TestCanonicalHash(t *testing.T) {
	base := CanonicalHash(testKey, "t", json.RawMessage(`{"a":1,"b":{"c":[1,2],"d":"x"}}`))
	tests := []struct {
		name string
		tool string
		args string
		same bool
	}{
		{"key order and whitespace", "t", "{ \"b\": {\"d\":\"x\", \"c\":[1, 2]},\n \"a\":1 }", true},
		{"number written differently", "t", `{"a":1.0,"b":{"c":[1,2],"d":"x"}}`, false},
		{"other value", "t", `{"a":2,"b":{"c":[1,2],"d":"x"}}`, false},
		{"array order matters", "t", `{"a":1,"b":{"c":[2,1],"d":"x"}}`, false},
		{"other tool", "u", `{"a":1,"b":{"c":[1,2],"d":"x"}}`, false},
	}
	for _, tc := range tests {
		got := CanonicalHash(testKey, tc.tool, json.RawMessage(tc.args))
		if (got == base) != tc.same {
			t.Errorf("%s: same = %v, want %v", tc.name, got == base, tc.same)
		}
	}
	empty := CanonicalHash(testKey, "t", nil)
	for _, a := range []string{"", "null", " {} "} {
		if CanonicalHash(testKey, "t", json.RawMessage(a)) != empty {
			t.Errorf("args %q should hash like absent", a)
		}
	}
	if len(base) != 64 {
		t.Errorf("hash %q is not hex sha256", base)
	}
	if CanonicalHash([]byte("another key"), "t", json.RawMessage(`{"a":1,"b":{"c":[1,2],"d":"x"}}`)) == base {
		t.Error("the hash does not depend on the key")
	}
	if CanonicalHash(testKey, "t", json.RawMessage(`{"s":"<&>"}`)) != CanonicalHash(testKey, "t", json.RawMessage(`{"s":"\u003c&>"}`)) {
		t.Error("escaped and literal forms of the same string should hash alike")
	}
}

// TestDecodeLegacyPromotionMarker: a task stored before Task.Promoted marked a promoted call
// with a header; it still decodes as promoted (never re-sent), and the marker is dropped.
func TestDecodeLegacyPromotionMarker(t *testing.T) {
	in := &Task{ID: "tg_old", Tool: "slow", State: Approved, Accelerated: true,
		Headers: http.Header{"X-Tollgate-Promotion": {"0123abcd"}, "Authorization": {"Bearer x"}}}
	rec, err := encodeTask(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := decodeTask(rec)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Promoted || out.Headers.Get("X-Tollgate-Promotion") != "" || out.Headers.Get("Authorization") != "Bearer x" {
		t.Errorf("decoded Promoted=%v headers=%v; want promoted, marker dropped, other headers kept", out.Promoted, out.Headers)
	}
	in.Headers, in.Promoted = nil, false
	rec, _ = encodeTask(in)
	if out, _ := decodeTask(rec); out.Promoted {
		t.Error("a task without the marker decoded as promoted")
	}
}

// TestTransitionEvent pins the one state→event mapping every outward channel uses (audit,
// gateway-tool events, notifications, status pushes): every creation and every edge of the
// state machine has exactly the event below; a change outside the machine has the event of the
// state it enters, or none when no edge enters that state that way.
func TestTransitionEvent(t *testing.T) {
	type pair struct{ from, to State }
	want := map[pair]Event{
		{"", AwaitingApproval}:               EventRequested,
		{"", Approved}:                       EventAccelerated,
		{AwaitingApproval, AwaitingApproval}: EventVoted,
		{AwaitingApproval, Approved}:         EventApproved,
		{AwaitingApproval, Rejected}:         EventRejected,
		{AwaitingApproval, TimedOut}:         EventTimedOut,
		{AwaitingApproval, Cancelled}:        EventCancelled,
		{AwaitingApproval, Expired}:          EventExpired,
		{Approved, Executing}:                EventStarted,
		{Approved, Cancelled}:                EventCancelled,
		{Approved, Expired}:                  EventExpired,
		{Approved, Failed}:                   EventFailed,
		{Executing, Executing}:               EventInput,
		{Executing, Completed}:               EventCompleted,
		{Executing, Failed}:                  EventFailed,
		{Executing, Cancelled}:               EventCancelled,
		{Executing, Expired}:                 EventExpired,
	}
	edges := append(Creations(), Transitions()...)
	if len(edges) != len(want) {
		t.Errorf("%d edges and creations, %d expected events: a new edge needs its event here", len(edges), len(want))
	}
	for _, e := range edges {
		if e.Event == "" {
			t.Errorf("%q → %s has no event", e.From, e.To)
		}
		if w := want[pair{e.From, e.To}]; e.Event != w {
			t.Errorf("edge %q → %s: Event %q, want %q", e.From, e.To, e.Event, w)
		}
	}
	for _, from := range append([]State{""}, States()...) {
		for _, to := range append([]State{""}, States()...) {
			w, edge := want[pair{from, to}]
			if !edge && from != "" { // not an edge: the event of an edge into the same state,
				// one from elsewhere when there is one (a stay — a vote, a question — is no entry)
				for _, stay := range []bool{true, false} {
					for p, ev := range want {
						if p.from != "" && p.to == to && (p.from == p.to) == stay {
							w = ev
						}
					}
				}
			}
			tr := Transition{From: from, To: to}
			if got := tr.Event(); got != w {
				t.Errorf("Transition{%q → %q}.Event() = %q, want %q", from, to, got, w)
			}
			if ev := tr.Event(); (ev == EventRequested || ev == EventAccelerated) != (from == "" && edge) {
				t.Errorf("Transition{%q → %q}.Event() = %q, a creation event: want %v", from, to, ev, from == "" && edge)
			}
		}
	}

	// The Manager's own creations carry the creation events.
	e := newEnv(t, nil)
	var got []Event
	unsub := e.m.Subscribe(func(tr Transition) { got = append(got, tr.Event()) })
	defer unsub()
	e.create(t, "o")
	e.create(t, "o", func(r *CreateRequest) { r.Accelerated, r.DeferStart = true, true }) // no execution: only the creation is published
	if len(got) != 2 || got[0] != EventRequested || got[1] != EventAccelerated {
		t.Errorf("creation events = %v, want [requested accelerated]", got)
	}
}
