package session

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// recorder collects the sessions a registry hands to onDelete.
type recorder struct {
	mu  sync.Mutex
	ids []string
}

func (r *recorder) onDelete(s *Session) {
	r.mu.Lock()
	r.ids = append(r.ids, s.ID)
	r.mu.Unlock()
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ids...)
}

// touch returns the known session id, or admits and adopts it without a source (no rate
// limit), as the proxy does for a session the upstream issued.
func touch(r *Registry, id string) *Session {
	if s := r.Get(id); s != nil || id == "" {
		return s
	}
	t, err := r.Admit("")
	if err != nil {
		return nil
	}
	return t.Adopt(id)
}

func ids(r *Registry) []string {
	var out []string
	r.Each(func(s *Session) { out = append(out, s.ID) })
	return out
}

func TestAdoptGet(t *testing.T) {
	r := NewRegistry(0, nil)
	if r.Get("") != nil || r.Peek("") != nil {
		t.Fatal("the empty id must never name a session")
	}
	if r.Get("a") != nil {
		t.Fatal("Get created a session")
	}
	s := touch(r, "a")
	if s == nil || s.ID != "a" {
		t.Fatalf("touch(a) = %+v", s)
	}
	if touch(r, "a") != s || r.Get("a") != s {
		t.Fatal("touch/Get of a known id must return the same session")
	}
	if r.Len() != 1 {
		t.Fatalf("Len = %d, want 1", r.Len())
	}
}

func TestLocal(t *testing.T) {
	id := NewLocalID()
	if !strings.HasPrefix(id, LocalPrefix) || id == NewLocalID() {
		t.Fatalf("NewLocalID = %q: want a fresh %q id", id, LocalPrefix)
	}
	r := NewRegistry(0, nil)
	for _, tc := range []struct {
		id    string
		local bool
	}{
		{id, true},
		{"tgs_x", true},
		{"tgs_", false}, // the bare prefix is not a minted id
		{"tgs", false},
		{"TGS_x", false},
		{"abc-tgs_x", false},
		{"9f3c2c1e-upstream", false},
	} {
		if got := touch(r, tc.id).Local; got != tc.local {
			t.Errorf("touch(%q).Local = %v, want %v", tc.id, got, tc.local)
		}
	}
}

func TestOwnerAndProtocol(t *testing.T) {
	s := touch(NewRegistry(0, nil), "abc")
	if got := s.Owner(); got != "session:abc" {
		t.Errorf("Owner = %q", got)
	}
	if s.Protocol() != "" {
		t.Errorf("Protocol before SetProtocol = %q", s.Protocol())
	}
	s.SetProtocol("2025-11-25")
	if s.Protocol() != "2025-11-25" {
		t.Errorf("Protocol = %q", s.Protocol())
	}
}

func TestEvictionLeastRecentlySeen(t *testing.T) {
	tests := []struct {
		name    string
		ops     func(r *Registry)
		evicted []string
		left    []string // most recent first
	}{
		{
			name:    "oldest goes",
			ops:     func(r *Registry) { touch(r, "a"); touch(r, "b"); touch(r, "c") },
			evicted: []string{"a"},
			left:    []string{"c", "b"},
		},
		{
			name:    "Get refreshes",
			ops:     func(r *Registry) { touch(r, "a"); touch(r, "b"); r.Get("a"); touch(r, "c") },
			evicted: []string{"b"},
			left:    []string{"c", "a"},
		},
		{
			name:    "touch refreshes",
			ops:     func(r *Registry) { touch(r, "a"); touch(r, "b"); touch(r, "a"); touch(r, "c"); touch(r, "d") },
			evicted: []string{"b", "a"},
			left:    []string{"d", "c"},
		},
		{
			name:    "Delete frees a slot",
			ops:     func(r *Registry) { touch(r, "a"); touch(r, "b"); r.Delete("a"); touch(r, "c") },
			evicted: []string{"a"}, // the Delete callback, no eviction
			left:    []string{"c", "b"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var rec recorder
			r := NewRegistry(2, rec.onDelete)
			tc.ops(r)
			if got := fmt.Sprint(rec.got()); got != fmt.Sprint(tc.evicted) {
				t.Errorf("onDelete saw %s, want %v", got, tc.evicted)
			}
			if got := fmt.Sprint(ids(r)); got != fmt.Sprint(tc.left) {
				t.Errorf("sessions %s, want %v", got, tc.left)
			}
			if r.Len() != len(tc.left) {
				t.Errorf("Len = %d, want %d", r.Len(), len(tc.left))
			}
		})
	}
}

func TestEvictionIsNotEnded(t *testing.T) {
	r := NewRegistry(1, nil)
	touch(r, "a")
	touch(r, "b")
	if r.Get("a") != nil {
		t.Fatal("a was not evicted")
	}
	if r.Ended("a") {
		t.Error("an evicted session was not ended by its client")
	}
}

func TestDelete(t *testing.T) {
	var rec recorder
	r := NewRegistry(0, rec.onDelete)
	touch(r, "a")
	r.Delete("a")
	if r.Get("a") != nil || r.Len() != 0 {
		t.Fatal("Delete left the session")
	}
	if !r.Ended("a") {
		t.Error("Ended(a) = false after Delete")
	}
	r.Delete("a") // again: no second callback
	// Unknown to this process (e.g. created before a restart) but still ended.
	r.Delete("unknown")
	if !r.Ended("unknown") {
		t.Error("Ended(unknown) = false after Delete")
	}
	if got := rec.got(); len(got) != 1 || got[0] != "a" {
		t.Errorf("onDelete saw %v, want [a]", got)
	}
	r.Delete("")
	if r.Ended("") {
		t.Error("the empty id was remembered as ended")
	}
	if r.Ended("b") {
		t.Error("Ended(b) for a session never deleted")
	}
}

// The ended ids are a FIFO bounded by the registry size; deleting an id twice must not use
// two slots.
func TestEndedBounded(t *testing.T) {
	r := NewRegistry(3, nil)
	for _, id := range []string{"a", "b", "a", "c", "d"} {
		r.Delete(id)
	}
	for id, want := range map[string]bool{"a": false, "b": true, "c": true, "d": true} {
		if got := r.Ended(id); got != want {
			t.Errorf("Ended(%s) = %v, want %v", id, got, want)
		}
	}
	r.mu.Lock()
	n, order := len(r.ended), len(r.endedOrder)
	r.mu.Unlock()
	if n != 3 || order != 3 {
		t.Errorf("ended set holds %d ids (%d in order), want 3", n, order)
	}
}

// Each runs fn without the registry lock, so fn may call back into the registry.
func TestEachWithoutLock(t *testing.T) {
	r := NewRegistry(0, nil)
	for i := range 5 {
		touch(r, fmt.Sprint(i))
	}
	seen := 0
	r.Each(func(s *Session) {
		seen++
		r.Delete(s.ID)
		touch(r, "new-"+s.ID)
	})
	if seen != 5 {
		t.Errorf("Each visited %d sessions, want 5", seen)
	}
	if r.Len() != 5 || r.Get("0") != nil || r.Get("new-0") == nil {
		t.Errorf("sessions after Each: %v", ids(r))
	}
}

func TestUpstreamTasks(t *testing.T) {
	s := touch(NewRegistry(0, nil), "a")
	if s.OwnsUpstreamTask("t1") {
		t.Fatal("owns a task before binding")
	}
	s.BindUpstreamTask("t1")
	s.BindUpstreamTask("t1")
	if !s.OwnsUpstreamTask("t1") || s.OwnsUpstreamTask("t2") || s.OwnsUpstreamTask("") {
		t.Error("ownership wrong after binding t1")
	}
	if other := touch(NewRegistry(0, nil), "b"); other.OwnsUpstreamTask("t1") {
		t.Error("another session owns t1") // REQ-CORE-007 F-005
	}
}

func TestUpstreamTasksBounded(t *testing.T) {
	s := &Session{ID: "a"}
	for i := range maxUpstreamTasks + 10 {
		s.BindUpstreamTask(fmt.Sprint(i))
	}
	owned := 0
	for i := range maxUpstreamTasks + 10 {
		if s.OwnsUpstreamTask(fmt.Sprint(i)) {
			owned++
		}
	}
	if owned != maxUpstreamTasks {
		t.Errorf("owns %d tasks, want the bound %d", owned, maxUpstreamTasks)
	}
	if !s.OwnsUpstreamTask(fmt.Sprint(maxUpstreamTasks + 9)) {
		t.Error("the newest binding was dropped")
	}
}

func TestStreams(t *testing.T) {
	s := touch(NewRegistry(0, nil), "a")
	if s.HasStream() || s.Push([]byte("x")) {
		t.Fatal("no stream is open: HasStream/Push must be false")
	}
	st, detach := s.Attach()
	if !s.HasStream() {
		t.Fatal("HasStream = false after Attach")
	}
	if !s.Push([]byte("m1")) {
		t.Fatal("Push to an open stream failed")
	}
	if got := string(<-st.C); got != "m1" {
		t.Fatalf("stream got %q", got)
	}
	// A full buffer drops rather than blocks: clients can still poll tasks/get.
	n := 0
	for s.Push([]byte("fill")) {
		n++
		if n > 1000 {
			t.Fatal("Push never reported a full buffer")
		}
	}
	if n != cap(st.C) || n != 64 {
		t.Errorf("buffer took %d messages, want 64", n)
	}
	detach()
	if s.HasStream() || s.Push([]byte("late")) {
		t.Error("stream still attached after detach")
	}
	detach() // idempotent
}

// With two streams open, a message goes to one that has room.
func TestPushSpillsToOtherStream(t *testing.T) {
	s := &Session{ID: "a"}
	a, detachA := s.Attach()
	b, detachB := s.Attach()
	defer detachA()
	defer detachB()
	total := cap(a.C) + cap(b.C)
	for i := range total {
		if !s.Push([]byte{byte(i)}) {
			t.Fatalf("Push %d failed with room left", i)
		}
	}
	if s.Push([]byte("over")) {
		t.Error("Push succeeded with both buffers full")
	}
	if len(a.C) != cap(a.C) || len(b.C) != cap(b.C) {
		t.Errorf("buffers hold %d and %d messages", len(a.C), len(b.C))
	}
}

// Concurrent use under -race: sessions are shared by every request of a client.
func TestConcurrent(t *testing.T) {
	var rec recorder
	r := NewRegistry(16, rec.onDelete)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				id := fmt.Sprintf("s%d", (g*7+i)%40)
				s := touch(r, id)
				s.BindUpstreamTask(fmt.Sprint(i))
				_ = s.OwnsUpstreamTask("0")
				st, detach := s.Attach()
				s.Push([]byte("x"))
				select {
				case <-st.C:
				default:
				}
				detach()
				_ = r.Get(id)
				if i%10 == 0 {
					r.Delete(id)
				}
				_ = r.Ended(id)
				r.Each(func(s *Session) { _ = s.HasStream() })
				_ = r.Len()
			}
		}()
	}
	wg.Wait()
	if r.Len() > 16 {
		t.Errorf("Len = %d exceeds the bound 16", r.Len())
	}
}

// A session with an open stream or a pending task is never evicted for a new one; when every
// session is busy the new one is refused.
func TestEvictionSkipsBusy(t *testing.T) {
	var rec recorder
	r := NewRegistry(2, rec.onDelete)
	a, b := touch(r, "a"), touch(r, "b")
	_, detach := a.Attach()
	b.HoldTask("t1", time.Now().Add(time.Hour))
	if _, err := r.Admit(""); !errors.Is(err, ErrFull) {
		t.Fatalf("Admit with every session busy: %v, want ErrFull", err)
	}
	if r.Get("a") == nil || r.Get("b") == nil || len(rec.got()) != 0 {
		t.Fatalf("a busy session was evicted: %v", rec.got())
	}
	b.ReleaseTask("t1") // the task ended: b is idle now
	if touch(r, "c") == nil {
		t.Fatal("no room made although b is idle")
	}
	if got := fmt.Sprint(rec.got()); got != "[b]" {
		t.Errorf("evicted %s, want [b]", got)
	}
	detach()
	if touch(r, "d") == nil || r.Get("a") != nil {
		t.Errorf("a (stream closed) should make room: sessions %v", ids(r))
	}
}

// A held task whose TTL ended no longer pins the session (it may have finished on another
// replica without this one hearing of it).
func TestHeldTaskExpires(t *testing.T) {
	r := NewRegistry(1, nil)
	touch(r, "a").HoldTask("t1", time.Now().Add(-time.Second))
	if touch(r, "b") == nil || r.Get("a") != nil {
		t.Errorf("a session whose only task outlived its TTL was kept: %v", ids(r))
	}
}

// Reserved room counts against the bound until adopted or released.
func TestTicketReserves(t *testing.T) {
	r := NewRegistry(2, nil)
	t1, err := r.Admit("")
	if err != nil {
		t.Fatal(err)
	}
	t2, err := r.Admit("")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Admit(""); !errors.Is(err, ErrFull) {
		t.Fatalf("third Admit with two reservations: %v, want ErrFull", err)
	}
	t1.Release()
	t1.Release() // idempotent
	t3, err := r.Admit("")
	if err != nil {
		t.Fatalf("Admit after a release: %v", err)
	}
	t2.Adopt("x")
	t3.Adopt("y")
	t3.Release() // after Adopt: no effect
	if r.Len() != 2 || r.reserved != 0 {
		t.Errorf("Len %d reserved %d, want 2 and 0", r.Len(), r.reserved)
	}
}

func TestSourceRate(t *testing.T) {
	r := NewRegistry(0, nil)
	r.LimitSources(0.001, 3) // practically no refill during the test
	for i := range 3 {
		tk, err := r.Admit("10.0.0.1")
		if err != nil {
			t.Fatalf("admit %d within the burst: %v", i, err)
		}
		tk.Release()
	}
	_, err := r.Admit("10.0.0.1")
	var re *RateError
	if !errors.As(err, &re) || re.RetrySeconds() < 1 {
		t.Fatalf("admit beyond the burst: %v, want a RateError", err)
	}
	if _, err := r.Admit("10.0.0.2"); err != nil {
		t.Errorf("another source is limited too: %v", err)
	}
	if _, err := r.Admit(""); err != nil {
		t.Errorf("the empty source is never limited: %v", err)
	}
}

func TestTryAttachLimit(t *testing.T) {
	s := &Session{ID: "a"}
	_, d1, ok1 := s.TryAttach(2)
	_, d2, ok2 := s.TryAttach(2)
	_, _, ok3 := s.TryAttach(2)
	if !ok1 || !ok2 || ok3 {
		t.Fatalf("attach results %v %v %v, want true true false", ok1, ok2, ok3)
	}
	d1()
	if _, d, ok := s.TryAttach(2); !ok {
		t.Error("no stream slot after one closed")
	} else {
		d()
	}
	d2()
}

// TestOwnerBuiltOnce: a session's owner string is built once and shared by every caller (each
// pending task of the session keeps it), with no allocation after the first call.
func TestOwnerBuiltOnce(t *testing.T) {
	s := &Session{ID: "abc"}
	first := s.Owner()
	if first != "session:abc" {
		t.Fatalf("Owner() = %q", first)
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = s.Owner() }); allocs != 0 {
		t.Errorf("Owner() allocates %v times per call after the first", allocs)
	}
	if again := s.Owner(); unsafe.StringData(again) != unsafe.StringData(first) {
		t.Error("Owner() returned a new copy of the owner string")
	}
}

// TestEvictionFairAcrossSources: when the table is full, a source opening session after
// session ends only its own idle sessions, never the idle session of a source holding fewer,
// even when that one is the least recently seen; a source holding few may take the place of
// one holding many. (Behind a sidecar the source is the caller's identity.)
func TestEvictionFairAcrossSources(t *testing.T) {
	var rec recorder
	r := NewRegistry(4, rec.onDelete)
	open := func(src, id string) error {
		tk, err := r.Admit(src)
		if err != nil {
			return err
		}
		tk.Adopt(id)
		return nil
	}
	if err := open("id:quiet", "quiet-1"); err != nil { // the least recently seen from now on
		t.Fatal(err)
	}
	for i := range 10 {
		if err := open("id:flood", fmt.Sprint("flood-", i)); err != nil {
			t.Fatalf("flood session %d: %v", i, err)
		}
	}
	if r.Peek("quiet-1") == nil {
		t.Fatalf("the flooding source ended the quiet source's session; evicted %v", rec.got())
	}
	if got := fmt.Sprint(ids(r)); got != "[flood-9 flood-8 flood-7 quiet-1]" {
		t.Errorf("sessions %s", got)
	}
	// The quiet source (1 session) may take the place of the flooding one (3).
	if err := open("id:quiet", "quiet-2"); err != nil {
		t.Fatal(err)
	}
	if r.Peek("flood-7") != nil || r.Peek("quiet-1") == nil || r.Peek("quiet-2") == nil {
		t.Errorf("after the quiet source's second session: %v", ids(r))
	}
	// Now 2 and 2: the flooding source again ends its own oldest, not quiet-1.
	if err := open("id:flood", "flood-10"); err != nil {
		t.Fatal(err)
	}
	if r.Peek("quiet-1") == nil || r.Peek("flood-8") != nil {
		t.Errorf("at 2 and 2: %v", ids(r))
	}
	r.Delete("flood-9")
	r.Delete("flood-10")
	if r.held["id:flood"] != 0 || r.held["id:quiet"] != 2 || len(r.held) != 1 {
		t.Errorf("counts after deletes: %v", r.held)
	}
}

// TestSessionBoundToOpener: Adopt binds a session to its ticket's Identity; GetAs reports
// another identity (or none, or a look-alike) foreign without counting it as a use, and a
// session opened without an identity is bound to no one.
func TestSessionBoundToOpener(t *testing.T) {
	r := NewRegistry(10, nil)
	adopt := func(id, identity string) *Session {
		t.Helper()
		tk, err := r.Admit("")
		if err != nil {
			t.Fatal(err)
		}
		tk.Identity = identity
		return tk.Adopt(id)
	}
	a, n := adopt("sa", "alice"), adopt("sn", "")
	a.mu.Lock()
	a.lastSeen = a.lastSeen.Add(-time.Hour)
	seen := a.lastSeen
	a.mu.Unlock()
	for _, who := range []string{"bob", "", "Alice", "\u0430lice"} {
		if s, foreign := r.GetAs("sa", who); s != a || !foreign {
			t.Errorf("GetAs(alice's session, %q) = %v, foreign %v; want it foreign", who, s, foreign)
		}
	}
	a.mu.Lock()
	if !a.lastSeen.Equal(seen) {
		t.Errorf("a foreign lookup counted as a use of the session")
	}
	a.mu.Unlock()
	if s, foreign := r.GetAs("sa", "alice"); s != a || foreign {
		t.Errorf("GetAs by its opener = %v, foreign %v", s, foreign)
	}
	for _, who := range []string{"", "bob"} {
		if s, foreign := r.GetAs("sn", who); s != n || foreign {
			t.Errorf("GetAs(unbound session, %q) = %v, foreign %v; want it served", who, s, foreign)
		}
	}
	// Adopting a known id again keeps its first binding.
	if s := adopt("sa", "bob"); s != a || !s.Foreign("bob") {
		t.Errorf("a second Adopt rebound the session")
	}
	if s, foreign := r.GetAs("nope", "alice"); s != nil || foreign {
		t.Errorf("GetAs(unknown) = %v, %v", s, foreign)
	}
}
