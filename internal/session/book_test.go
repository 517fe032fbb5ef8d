package session

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeBook records writes; it is the task store's known-session set in these tests.
type fakeBook struct {
	mu      sync.Mutex
	exp     map[string]time.Time
	ended   map[string]string // id → identity that ended it
	writes  int
	forgets int
	err     error // returned by Ended
}

func (b *fakeBook) End(_ context.Context, id, identity, _ string, _ time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ended == nil {
		b.ended = map[string]string{}
	}
	b.ended[id] = identity
	return nil
}

func (b *fakeBook) Ended(_ context.Context, id, identity string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return false, b.err
	}
	by, ok := b.ended[id]
	return ok && (identity == "" || by == identity), nil
}

func (b *fakeBook) Remember(_ context.Context, id, identity string, exp time.Time) error {
	id += "\x00" + identity
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.exp == nil {
		b.exp = map[string]time.Time{}
	}
	b.exp[id] = exp
	b.writes++
	return nil
}

func (b *fakeBook) Known(_ context.Context, id, identity string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, who := range []string{identity, ""} {
		if exp, ok := b.exp[id+"\x00"+who]; ok && time.Now().Before(exp) {
			return true, nil
		}
	}
	return false, nil
}

func (b *fakeBook) Forget(_ context.Context, id, identity string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.exp, id+"\x00"+identity)
	delete(b.exp, id+"\x00")
	b.forgets++
	return nil
}

func TestBook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		book := &fakeBook{}
		r := NewRegistry(1, nil)
		r.KeepIn(book, time.Hour, func(op string, err error) { t.Errorf("%s: %v", op, err) })
		if ok, _ := r.Known(ctx, "s1", ""); ok {
			t.Fatal("unknown id is known")
		}
		touch(r, "s1")
		if ok, _ := r.Known(ctx, "s1", ""); !ok || book.writes != 1 {
			t.Fatalf("adopted session: known %v after %d writes, want true after 1", ok, book.writes)
		}
		// Use moves the expiry on, but at most once every half TTL.
		time.Sleep(10 * time.Minute)
		r.Get("s1")
		if book.writes != 1 {
			t.Errorf("%d writes after a use within half the TTL, want 1", book.writes)
		}
		time.Sleep(25 * time.Minute)
		r.Get("s1")
		if book.writes != 2 || !book.exp["s1\x00"].Equal(time.Now().Add(time.Hour)) {
			t.Errorf("after half the TTL: %d writes, expiry %v; want 2, one TTL from now", book.writes, book.exp["s1\x00"])
		}
		// Eviction (max 1) does not forget: the evicted id stays valid for a later adoption.
		touch(r, "s2")
		if r.Peek("s1") != nil {
			t.Fatal("s1 not evicted")
		}
		if ok, _ := r.Known(ctx, "s1", ""); !ok || book.forgets != 0 {
			t.Errorf("evicted session forgotten by the book (known %v, %d forgets)", ok, book.forgets)
		}
		// Delete (the session ended) forgets.
		r.Delete("s2")
		if ok, _ := r.Known(ctx, "s2", ""); ok {
			t.Error("an ended session is still in the book")
		}
		// Unused for a whole TTL, an id expires.
		time.Sleep(2 * time.Hour)
		if ok, _ := r.Known(ctx, "s1", ""); ok {
			t.Error("an id unused for longer than the TTL is known")
		}
	})
}

func TestNoBook(t *testing.T) {
	r := NewRegistry(0, nil)
	touch(r, "s1")
	if ok, err := r.Known(context.Background(), "s1", ""); ok || err != nil {
		t.Errorf("without a book Known = %v, %v; want false", ok, err)
	}
}

// adoptAs adopts id in r for identity, as a replica does for a session the book knows.
func adoptAs(t *testing.T, r *Registry, id, identity string) *Session {
	t.Helper()
	tk, err := r.Admit("src-" + identity)
	if err != nil {
		t.Fatal(err)
	}
	tk.Identity = identity
	return tk.Adopt(id)
}

// TestEndedOnOtherReplica: two replicas share a book. A session one of them ended (DELETE, or
// the upstream's 404) is refused by the other, which still held it in memory — unless the end
// came from another identity than the one the session is bound to. Before, the other replica
// served the session until it evicted it.
func TestEndedOnOtherReplica(t *testing.T) {
	ctx := context.Background()
	book := &fakeBook{}
	a, b := NewRegistry(0, nil), NewRegistry(0, nil)
	closed := map[string]bool{}
	b.onDel = func(s *Session) { closed[s.ID] = true }
	for _, r := range []*Registry{a, b} {
		r.KeepIn(book, time.Hour, func(op string, err error) {})
		r.SharedEnds()
	}
	for _, c := range []struct {
		name, bound, ender string
		viaDelete          bool // the end is a Delete on A (as the session's own identity)
		want               bool
	}{
		{"DELETE by its identity", "alice", "alice", false, true},
		{"Delete on A (the upstream's 404 there)", "alice", "", true, true},
		{"bound to no one, ended by anyone", "", "mallory", false, true},
		{"ended by another identity", "alice", "mallory", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := "sid-" + c.name
			adoptAs(t, a, id, c.bound)
			sb := adoptAs(t, b, id, c.bound)
			if ended, err := b.EndedElsewhere(ctx, sb); err != nil || ended {
				t.Fatalf("live session: EndedElsewhere = %v, %v", ended, err)
			}
			if c.viaDelete {
				a.Delete(id)
			} else {
				a.End(id, c.ender, "src", true)
			}
			ended, err := b.EndedElsewhere(ctx, sb)
			if err != nil || ended != c.want {
				t.Fatalf("after the end on A: EndedElsewhere = %v, %v; want %v", ended, err, c.want)
			}
			if c.want && (b.Peek(id) != nil || !b.Ended(id) || !closed[id]) {
				t.Errorf("ended elsewhere: still held %v, ended here %v, streams closed %v", b.Peek(id) != nil, b.Ended(id), closed[id])
			}
			if !c.want && b.Peek(id) == nil {
				t.Error("an end by another identity dropped the session")
			}
		})
	}
}

// TestEndedElsewhereStoreError: while the store cannot answer, a held session keeps working
// here (the error is reported, nothing is ended).
func TestEndedElsewhereStoreError(t *testing.T) {
	book := &fakeBook{err: context.DeadlineExceeded}
	r := NewRegistry(0, nil)
	var reported string
	r.KeepIn(book, time.Hour, func(op string, err error) { reported = op })
	r.SharedEnds()
	s := adoptAs(t, r, "sid", "")
	if ended, err := r.EndedElsewhere(context.Background(), s); ended || err == nil || r.Peek("sid") == nil || reported == "" {
		t.Errorf("store error: ended %v, err %v, held %v, reported %q", ended, err, r.Peek("sid") != nil, reported)
	}
}

// TestEndedElsewhereIdle: a session held here but unused for longer than the book's TTL (the
// record of its end may have lapsed) counts as ended when the book no longer knows it.
func TestEndedElsewhereIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		book := &fakeBook{}
		r := NewRegistry(0, nil)
		r.KeepIn(book, time.Hour, func(op string, err error) {})
		r.SharedEnds()
		s := adoptAs(t, r, "sid", "")
		keep := adoptAs(t, r, "kept", "")
		time.Sleep(2 * time.Hour)
		_ = book.Forget(context.Background(), "sid", "") // its book entry lapsed (or another replica ended it long ago)
		_ = book.Remember(context.Background(), "kept", "", time.Now().Add(time.Hour))
		if ended, err := r.EndedElsewhere(context.Background(), s); !ended || err != nil {
			t.Errorf("idle past the TTL, unknown to the book: ended %v, %v; want true", ended, err)
		}
		if ended, _ := r.EndedElsewhere(context.Background(), keep); ended {
			t.Error("idle past the TTL but still in the book: ended")
		}
	})
}

// TestEndedElsewhereNotShared: with a book no other process writes (memory, file store), a
// held session costs no read of it per request: only this process ends its sessions.
func TestEndedElsewhereNotShared(t *testing.T) {
	book := &fakeBook{err: context.DeadlineExceeded} // any read would fail
	r := NewRegistry(0, nil)
	r.KeepIn(book, time.Hour, func(op string, err error) { t.Errorf("the book was read: %s", op) })
	if ended, err := r.EndedElsewhere(context.Background(), adoptAs(t, r, "sid", "")); ended || err != nil {
		t.Errorf("not shared: EndedElsewhere = %v, %v; want false, nil", ended, err)
	}
}
