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
	writes  int
	forgets int
}

func (b *fakeBook) Remember(_ context.Context, id string, exp time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.exp == nil {
		b.exp = map[string]time.Time{}
	}
	b.exp[id] = exp
	b.writes++
	return nil
}

func (b *fakeBook) Known(_ context.Context, id string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	exp, ok := b.exp[id]
	return ok && time.Now().Before(exp), nil
}

func (b *fakeBook) Forget(_ context.Context, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.exp, id)
	b.forgets++
	return nil
}

func TestBook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		book := &fakeBook{}
		r := NewRegistry(1, nil)
		r.KeepIn(book, time.Hour, func(op string, err error) { t.Errorf("%s: %v", op, err) })
		if ok, _ := r.Known(ctx, "s1"); ok {
			t.Fatal("unknown id is known")
		}
		touch(r, "s1")
		if ok, _ := r.Known(ctx, "s1"); !ok || book.writes != 1 {
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
		if book.writes != 2 || !book.exp["s1"].Equal(time.Now().Add(time.Hour)) {
			t.Errorf("after half the TTL: %d writes, expiry %v; want 2, one TTL from now", book.writes, book.exp["s1"])
		}
		// Eviction (max 1) does not forget: the evicted id stays valid for a later adoption.
		touch(r, "s2")
		if r.Peek("s1") != nil {
			t.Fatal("s1 not evicted")
		}
		if ok, _ := r.Known(ctx, "s1"); !ok || book.forgets != 0 {
			t.Errorf("evicted session forgotten by the book (known %v, %d forgets)", ok, book.forgets)
		}
		// Delete (the session ended) forgets.
		r.Delete("s2")
		if ok, _ := r.Known(ctx, "s2"); ok {
			t.Error("an ended session is still in the book")
		}
		// Unused for a whole TTL, an id expires.
		time.Sleep(2 * time.Hour)
		if ok, _ := r.Known(ctx, "s1"); ok {
			t.Error("an id unused for longer than the TTL is known")
		}
	})
}

func TestNoBook(t *testing.T) {
	r := NewRegistry(0, nil)
	touch(r, "s1")
	if ok, err := r.Known(context.Background(), "s1"); ok || err != nil {
		t.Errorf("without a book Known = %v, %v; want false", ok, err)
	}
}
