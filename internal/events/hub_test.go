package events

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPublishThenTake(t *testing.T) {
	tests := []struct {
		name    string
		publish []string // event types published to "s1"
		session string   // session taken
		want    []string
	}{
		{"nothing", nil, "s1", nil},
		{"one", []string{"task_created"}, "s1", []string{"task_created"}},
		{"order kept", []string{"a", "b", "c"}, "s1", []string{"a", "b", "c"}},
		{"other session sees nothing", []string{"a"}, "s2", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHub(Options{})
			for _, typ := range tc.publish {
				h.Publish("s1", typ, "tg_1", nil)
			}
			b := h.Take(tc.session)
			if got := types(b.Events); !equal(got, tc.want) {
				t.Fatalf("Take = %v, want %v", got, tc.want)
			}
			if again := h.Take(tc.session); len(again.Events) != 0 {
				t.Fatalf("second Take returned %d events, want 0 (exactly once)", len(again.Events))
			}
		})
	}
}

func TestEventFields(t *testing.T) {
	now := time.Date(2025, 11, 25, 10, 0, 0, 0, time.UTC)
	h := NewHub(Options{Now: func() time.Time { return now }})
	tests := []struct {
		name     string
		data     any
		wantData string
	}{
		{"nil data", nil, ""},
		{"struct data", map[string]any{"state": "completed"}, `{"state":"completed"}`},
		{"raw data", json.RawMessage(`{"x":1}`), `{"x":1}`},
		{"unencodable data dropped", func() {}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h.Publish("s", "task_completed", "tg_9", tc.data)
			b := h.Take("s")
			if len(b.Events) != 1 {
				t.Fatalf("got %d events", len(b.Events))
			}
			e := b.Events[0]
			if e.Type != "task_completed" || e.TaskID != "tg_9" || !e.Time.Equal(now) || len(e.ID) != 26 {
				t.Fatalf("event = %+v", e)
			}
			if string(e.Data) != tc.wantData {
				t.Fatalf("data = %s, want %s", e.Data, tc.wantData)
			}
		})
	}
}

func TestIDsOrderedEvenIfClockStepsBack(t *testing.T) {
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	offsets := []time.Duration{0, 0, time.Second, -time.Hour, 0, time.Millisecond}
	i := 0
	h := NewHub(Options{Now: func() time.Time { return base.Add(offsets[i%len(offsets)]) }})
	for range 50 {
		h.Publish("s", "n", "", nil)
		i++
	}
	b := h.Take("s")
	ids := make([]string, len(b.Events))
	for i, e := range b.Events {
		ids[i] = e.ID
	}
	if !sort.StringsAreSorted(ids) {
		t.Fatalf("ids not ordered: %v", ids)
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			t.Fatalf("duplicate id %s", ids[i])
		}
	}
}

func TestAwait(t *testing.T) {
	tests := []struct {
		name          string
		prePublish    int
		publishLater  bool
		timeout       time.Duration
		want          int
		wantTimedOut  bool
		wantImmediate bool
	}{
		{"returns at once with waiting events", 2, false, time.Hour, 2, false, true},
		{"times out with nothing", 0, false, 10 * time.Millisecond, 0, true, false},
		{"zero timeout does not wait", 0, false, 0, 0, true, false},
		{"woken by a later publish", 0, true, time.Hour, 1, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHub(Options{})
			for range tc.prePublish {
				h.Publish("s", "n", "", nil)
			}
			var wg sync.WaitGroup
			if tc.publishLater {
				wg.Go(func() {
					waitFor(t, func() bool { return waiters(h, "s") == 1 })
					h.Publish("s", "task_completed", "tg_1", nil)
				})
			}
			b, err := h.Await(context.Background(), "s", tc.timeout)
			wg.Wait()
			if err != nil {
				t.Fatal(err)
			}
			if len(b.Events) != tc.want || b.TimedOut != tc.wantTimedOut || b.Immediate != tc.wantImmediate {
				t.Fatalf("batch = %+v, want %d events timedOut=%v immediate=%v", b, tc.want, tc.wantTimedOut, tc.wantImmediate)
			}
		})
	}
}

func TestAwaitContextCancelledTakesNothing(t *testing.T) {
	h := NewHub(Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := h.Await(ctx, "s", time.Hour)
		done <- err
	}()
	waitFor(t, func() bool { return waiters(h, "s") == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	h.Publish("s", "n", "", nil)
	if got := h.Pending("s"); got != 1 {
		t.Fatalf("pending = %d, want 1", got)
	}
}

func TestCloseSessionWakesWaiters(t *testing.T) {
	h := NewHub(Options{})
	const n = 5
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := h.Await(context.Background(), "s", time.Hour)
			errs <- err
		}()
	}
	waitFor(t, func() bool { return waiters(h, "s") == n })
	h.Publish("other", "n", "", nil)
	h.CloseSession("s")
	for range n {
		if err := <-errs; !errors.Is(err, ErrSessionClosed) {
			t.Fatalf("err = %v, want ErrSessionClosed", err)
		}
	}
	if got := h.Sessions(); got != 1 {
		t.Fatalf("sessions = %d, want 1 (only other)", got)
	}
	h.CloseSession("never-seen") // no-op
}

func TestEvictionCountedAndReported(t *testing.T) {
	var logs bytes.Buffer
	h := NewHub(Options{MaxEventsPerSession: 3, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for i := range 5 {
		h.Publish("secret-session-id", "n", fmt.Sprint(i), nil)
	}
	b, err := h.Await(context.Background(), "secret-session-id", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if b.Evicted != 2 {
		t.Fatalf("evicted = %d, want 2", b.Evicted)
	}
	if got := taskIDs(b.Events); !equal(got, []string{"2", "3", "4"}) {
		t.Fatalf("kept = %v, want newest three", got)
	}
	if !strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("no WARN logged: %s", logs.String())
	}
	if strings.Contains(logs.String(), "secret-session-id") {
		t.Fatalf("session id logged: %s", logs.String())
	}
	if b := h.Take("secret-session-id"); b.Evicted != 0 || len(b.Events) != 0 {
		t.Fatalf("eviction reported twice: %+v", b)
	}
}

func TestMaxSessions(t *testing.T) {
	h := NewHub(Options{MaxSessions: 3})
	// "busy" has a waiter, so it must survive even though it is the least recently used.
	errc := make(chan error, 1)
	go func() {
		_, err := h.Await(context.Background(), "busy", time.Hour)
		errc <- err
	}()
	waitFor(t, func() bool { return waiters(h, "busy") == 1 })
	for i := range 10 {
		h.Publish(fmt.Sprintf("s%d", i), "n", "", nil)
		if got := h.Sessions(); got > 3 {
			t.Fatalf("sessions = %d, want <= 3", got)
		}
	}
	if h.Pending("s9") != 1 || h.Pending("s8") != 1 || h.Pending("s0") != 0 {
		t.Fatal("expected the newest sessions to be kept and the oldest dropped")
	}
	h.Publish("busy", "n", "", nil)
	if err := <-errc; err != nil {
		t.Fatalf("busy waiter: %v", err)
	}
}

// Many publishers and many concurrent readers (Await and Take) of one session: every event is
// delivered exactly once and each reader sees its events in publish order.
func TestExactlyOnceUnderConcurrency(t *testing.T) {
	h := NewHub(Options{MaxEventsPerSession: 1 << 20})
	const publishers, perPublisher, readers = 8, 200, 8
	total := publishers * perPublisher

	var (
		mu   sync.Mutex
		seen = make(map[string]int)
		got  int
	)
	record := func(b Batch) error {
		mu.Lock()
		defer mu.Unlock()
		for i, e := range b.Events {
			seen[e.TaskID]++
			if i > 0 && b.Events[i-1].ID >= e.ID {
				return fmt.Errorf("batch out of order: %s >= %s", b.Events[i-1].ID, e.ID)
			}
		}
		got += len(b.Events)
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var rg sync.WaitGroup
	errc := make(chan error, readers)
	for r := range readers {
		rg.Go(func() {
			for ctx.Err() == nil {
				var b Batch
				if r%2 == 0 {
					var err error
					b, err = h.Await(ctx, "s", time.Second)
					if err != nil && !errors.Is(err, context.Canceled) {
						errc <- err
						return
					}
				} else {
					b = h.Take("s")
				}
				if err := record(b); err != nil {
					errc <- err
					return
				}
			}
		})
	}
	var pg sync.WaitGroup
	for p := range publishers {
		pg.Go(func() {
			for i := range perPublisher {
				h.Publish("s", "n", fmt.Sprintf("%d-%d", p, i), nil)
			}
		})
	}
	pg.Wait()
	waitFor(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got == total && h.Pending("s") == 0
	})
	cancel()
	rg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if len(seen) != total {
		t.Fatalf("distinct events = %d, want %d", len(seen), total)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("event %s delivered %d times", id, n)
		}
	}
}

// All waiters wake on a publish; exactly one gets the event, the rest keep waiting.
func TestOneEventOneWaiter(t *testing.T) {
	h := NewHub(Options{})
	const n = 6
	ctx, cancel := context.WithCancel(context.Background())
	results := make(chan int, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			b, err := h.Await(ctx, "s", time.Hour)
			if err == nil {
				results <- len(b.Events)
			}
		})
	}
	waitFor(t, func() bool { return waiters(h, "s") == n })
	h.Publish("s", "n", "", nil)
	if got := <-results; got != 1 {
		t.Fatalf("winner got %d events", got)
	}
	waitFor(t, func() bool { return waiters(h, "s") == n-1 })
	cancel()
	wg.Wait()
	close(results)
	for r := range results {
		t.Fatalf("a second waiter returned with %d events", r)
	}
}

func waiters(h *Hub, key string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s, ok := h.sessions[key]; ok {
		return s.waiters
	}
	return 0
}

// waitFor polls cond; it bounds the test in time without asserting on timing.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

func types(es []Event) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Type)
	}
	return out
}

func taskIDs(es []Event) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.TaskID)
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A queued event costs no allocation besides its data: its id is kept as the ULID's 16 bytes
// (not its text) and, with nobody waiting, publishing does not replace the wake channel.
// The events read back are unchanged.
func TestPublishQueuesWithoutAllocating(t *testing.T) {
	h := NewHub(Options{MaxEventsPerSession: 5000})
	data := json.RawMessage(`{"status":"working"}`)
	var boxed any = data                            // the caller's conversion to any is not the hub's
	h.Publish("s1", TypeTaskCreated, "tg_1", boxed) // the session exists
	allocs := testing.AllocsPerRun(2000, func() { h.Publish("s1", TypeTaskCreated, "tg_1", boxed) })
	if allocs != 0 {
		t.Errorf("Publish allocates %v times per event, want 0 (amortised queue growth aside)", allocs)
	}
	b := h.Take("s1")
	if len(b.Events) != 2002 {
		t.Fatalf("took %d events, want 2002", len(b.Events))
	}
	for i, e := range b.Events {
		if len(e.ID) != 26 || e.Type != TypeTaskCreated || e.TaskID != "tg_1" || string(e.Data) != string(data) || e.Time.IsZero() {
			t.Fatalf("event %d = %+v", i, e)
		}
		if i > 0 && e.ID <= b.Events[i-1].ID {
			t.Fatalf("event ids out of order: %s after %s", e.ID, b.Events[i-1].ID)
		}
	}
}
