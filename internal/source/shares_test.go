package source

import (
	"fmt"
	"testing"
	"time"
)

var never time.Time // an entry that does not expire

// TestSharesFair: a source past its share replaces its own oldest entry; at the total bound
// the oldest entry of the source holding the most gives way, never one of a source holding
// fewer, however old; the first value put for an id stays.
func TestSharesFair(t *testing.T) {
	reasons, victims := map[string]int{}, map[string]int{}
	s := NewShares[string](3, 5, func(r, src string) { reasons[r]++; victims[src]++ })
	s.Put("quiet", "q1", "alice", never) // the oldest entry from now on
	for i := range 10 {
		s.Put("flood", fmt.Sprint("f", i), "mallory", never)
	}
	if v, ok := s.Get("q1"); !ok || v != "alice" {
		t.Fatalf("the quiet source's entry: %q %v", v, ok)
	}
	if s.Held("flood") != 3 || s.Len() != 4 || reasons[EvictedSourceShare] != 7 || victims["flood"] != 7 {
		t.Fatalf("flood holds %d, %d in all, evictions %v of %v", s.Held("flood"), s.Len(), reasons, victims)
	}
	for _, id := range []string{"f7", "f8", "f9"} {
		if _, ok := s.Get(id); !ok {
			t.Errorf("flood's newest entry %s is gone", id)
		}
	}
	if got := s.Put("flood", "f9", "eve", never); got != "mallory" {
		t.Errorf("a second Put of f9 returned %q, want the first value", got)
	}
	// Total bound (5): a third source fills it; then the heaviest source gives way.
	s.Put("third", "t1", "bob", never)
	if s.Len() != 5 {
		t.Fatalf("%d entries, want 5", s.Len())
	}
	s.Put("third", "t2", "bob", never) // flood (3) holds the most: its least recently used goes
	if _, ok := s.Get("q1"); !ok || s.Held("flood") != 2 || s.Held("third") != 2 || reasons[EvictedTotal] != 1 {
		t.Fatalf("at the total bound: q1 kept %v, flood %d, third %d, %v", s.Held("quiet") == 1, s.Held("flood"), s.Held("third"), reasons)
	}
	if victims["flood"] != 8 || len(victims) != 1 {
		t.Errorf("evictions charged to %v, want flood's 8", victims)
	}
	if _, ok := s.Get("f7"); ok { // f8 and f9 were used after f7
		t.Error("flood's least recently used entry f7 was kept")
	}
	// Now 1, 2, 2: a source holding 2 gives way with its own, not the quiet one's.
	s.Put("third", "t3", "bob", never)
	if _, ok := s.Get("q1"); !ok || s.Held("third") != 2 || s.Held("flood") != 2 {
		t.Fatalf("2/2/1 then third adds: quiet %d flood %d third %d", s.Held("quiet"), s.Held("flood"), s.Held("third"))
	}
	// The quiet source may take from the heaviest.
	s.Put("quiet", "q2", "alice", never)
	if s.Held("quiet") != 2 || s.Len() != 5 {
		t.Fatalf("quiet's second entry: quiet %d, %d in all", s.Held("quiet"), s.Len())
	}
}

// TestSharesMostTracked: the count of the heaviest source follows removals, so the total bound
// keeps choosing the right source after the heaviest shrank.
func TestSharesMostTracked(t *testing.T) {
	s := NewShares[int](10, 6, nil)
	for i := range 4 {
		s.Put("a", fmt.Sprint("a", i), i, never)
	}
	s.Put("b", "b0", 0, never)
	s.Put("b", "b1", 1, never) // 4 + 2 = 6: full
	s.Put("c", "c0", 0, never) // a (4) gives way → 3
	s.Put("c", "c1", 1, never) // a (3) gives way → 2
	s.Put("c", "c2", 2, never) // a, b, c hold 2 each: c's own oldest goes
	if s.Held("a") != 2 || s.Held("b") != 2 || s.Held("c") != 2 {
		t.Fatalf("a %d b %d c %d, want 2 each", s.Held("a"), s.Held("b"), s.Held("c"))
	}
	if _, ok := s.Get("c0"); ok {
		t.Error("c0 kept: c should have given way with its own oldest")
	}
}

// TestSharesExpiry: an expired entry is gone for Get, may be put anew (by anyone: the first
// binding lasted only as long as it was given), and giving way with it is no eviction.
func TestSharesExpiry(t *testing.T) {
	var evicted []string
	s := NewShares[string](2, 3, func(r, src string) { evicted = append(evicted, r+":"+src) })
	past, later := time.Now().Add(-time.Second), time.Now().Add(time.Hour)
	s.Put("a", "old", "alice", past)
	if _, ok := s.Get("old"); ok || s.Len() != 0 || s.Held("a") != 0 {
		t.Fatalf("an expired entry is found (%d entries, a holds %d)", s.Len(), s.Held("a"))
	}
	s.Put("a", "x", "alice", past)
	if got := s.Put("b", "x", "bob", later); got != "bob" {
		t.Fatalf("putting an expired id anew returned %q, want the new value", got)
	}
	if s.Held("a") != 0 || s.Held("b") != 1 {
		t.Fatalf("after the re-put: a holds %d, b %d", s.Held("a"), s.Held("b"))
	}
	s.Put("c", "c1", "carol", past)
	s.Put("c", "c2", "carol", later)
	s.Put("c", "c3", "carol", later) // c at its share: c1 gives way, but it had expired
	if len(evicted) != 0 {
		t.Errorf("evictions %v, want none (the entry that gave way had expired)", evicted)
	}
	s.Put("c", "c4", "carol", later) // now a live one gives way
	if fmt.Sprint(evicted) != "[source_share:c]" {
		t.Errorf("evictions %v, want [source_share:c]", evicted)
	}
}

// BenchmarkSharesPut: one Put into a full table over 1000 sources, each making room (the
// flooding source at its share, or the heaviest at the total); the cost does not grow with
// the table (compare the sizes).
func BenchmarkSharesPut(b *testing.B) {
	for _, total := range []int{10_000, 100_000} {
		b.Run(fmt.Sprint(total), func(b *testing.B) {
			s := NewShares[string](total/100, total, nil)
			for i := range total {
				s.Put(fmt.Sprint("src", i%1000), fmt.Sprint("seed", i), "o", never)
			}
			srcs, ids := make([]string, 7), make([]string, b.N)
			for i := range srcs {
				srcs[i] = fmt.Sprint("src", i)
			}
			for i := range ids {
				ids[i] = fmt.Sprint("new", i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				s.Put(srcs[i%7], ids[i], "o", never)
			}
		})
	}
}
