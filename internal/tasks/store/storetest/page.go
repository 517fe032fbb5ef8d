package storetest

import (
	"context"
	"slices"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

// pageIDs reads the whole order of state n at a time, following Last, and returns the ids.
func pageIDs(t *testing.T, st store.Store, state string, newest bool, n int) []string {
	t.Helper()
	var ids []string
	var after *store.Position
	for range 1000 {
		res, err := st.Page(context.Background(), store.PageQuery{State: state, After: after, Newest: newest, Limit: n})
		if err != nil {
			t.Fatalf("Page: %v", err)
		}
		if res.Last == nil {
			return ids
		}
		if len(res.Records) > n {
			t.Fatalf("Page(limit %d) returned %d records", n, len(res.Records))
		}
		for _, r := range res.Records {
			if r.State != state || !r.Pending || r.Data == nil {
				t.Errorf("Page returned %s in state %q pending %v data %q", r.ID, r.State, r.Pending, r.Data)
			}
			ids = append(ids, r.ID)
		}
		after = res.Last
	}
	t.Fatal("Page never reached the end")
	return nil
}

// runPage is the ordered index's contract (store.Pager): pending records of one state, by
// CreatedAt then id, kept in step with Create, Update and Delete, and positions that stay
// valid across inserts and deletes.
func runPage(t *testing.T, newStore func(t *testing.T) store.Store) {
	ctx := context.Background()
	t.Run("Page", func(t *testing.T) {
		st := newStore(t)
		// created out of order; b1 and b2 share a CreatedAt (the id breaks the tie)
		for _, r := range []store.Record{rec("c", "o1", 3, true, 1), rec("a", "o2", 1, true, 1), rec("b2", "o1", 2, true, 1),
			rec("b1", "o2", 2, true, 1), rec("d", "o1", 4, true, 1), rec("done", "o1", 0, false, 1)} {
			if _, err := st.Create(ctx, r, store.Limits{}); err != nil {
				t.Fatal(err)
			}
		}
		exec := rec("x", "o1", 0, true, 1)
		exec.State = "executing"
		if _, err := st.Create(ctx, exec, store.Limits{}); err != nil {
			t.Fatal(err)
		}
		want := []string{"a", "b1", "b2", "c", "d"}
		for _, n := range []int{1, 2, 10} {
			if got := pageIDs(t, st, "awaiting_approval", false, n); !slices.Equal(got, want) {
				t.Errorf("oldest first by %d = %v, want %v", n, got, want)
			}
			if got := pageIDs(t, st, "awaiting_approval", true, n); !slices.Equal(got, []string{"d", "c", "b2", "b1", "a"}) {
				t.Errorf("newest first by %d = %v", n, got)
			}
		}
		if got := pageIDs(t, st, "executing", false, 5); !slices.Equal(got, []string{"x"}) {
			t.Errorf("executing = %v, want [x]", got)
		}
		if got := pageIDs(t, st, "none", false, 5); len(got) != 0 {
			t.Errorf("unknown state = %v", got)
		}

		// a position stays valid after its own record and others are gone or added
		res, err := st.Page(ctx, store.PageQuery{State: "awaiting_approval", Limit: 2})
		if err != nil || res.Last == nil || res.Last.ID != "b1" {
			t.Fatalf("first two: %+v, %v", res.Last, err)
		}
		if err := st.Delete(ctx, "b1"); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Create(ctx, rec("a0", "o1", 0, true, 1), store.Limits{}); err != nil { // before the position
			t.Fatal(err)
		}
		if _, err := st.Create(ctx, rec("e", "o2", 5, true, 1), store.Limits{}); err != nil { // after it
			t.Fatal(err)
		}
		// decided: leaves the order; moved to another state: found there
		c, _ := st.Get(ctx, "c")
		c.State, c.Pending = "rejected", false
		if _, err := st.Update(ctx, c, c.Version); err != nil {
			t.Fatal(err)
		}
		d, _ := st.Get(ctx, "d")
		d.State = "executing"
		if _, err := st.Update(ctx, d, d.Version); err != nil {
			t.Fatal(err)
		}
		res, err = st.Page(ctx, store.PageQuery{State: "awaiting_approval", After: res.Last, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range res.Records {
			got = append(got, r.ID)
		}
		if !slices.Equal(got, []string{"b2", "e"}) {
			t.Errorf("after the position = %v, want [b2 e]", got)
		}
		if got := pageIDs(t, st, "executing", false, 1); !slices.Equal(got, []string{"x", "d"}) {
			t.Errorf("executing = %v, want [x d]", got)
		}
		// an update that keeps the state keeps the place
		a, _ := st.Get(ctx, "a")
		if _, err := st.Update(ctx, a, a.Version); err != nil {
			t.Fatal(err)
		}
		if got := pageIDs(t, st, "awaiting_approval", false, 3); !slices.Equal(got, []string{"a0", "a", "b2", "e"}) {
			t.Errorf("after updates = %v, want [a0 a b2 e]", got)
		}
	})
	t.Run("PageMany", func(t *testing.T) {
		st := newStore(t)
		const n = 1200 // more than one run of the in-process order (orderChunk)
		var want []string
		for i := range n {
			id := string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
			want = append(want, id)
			if _, err := st.Create(ctx, rec(id, "o", i, true, 1), store.Limits{}); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < n; i += 3 { // every third decided
			r, _ := st.Get(ctx, want[i])
			r.State, r.Pending = "rejected", false
			if _, err := st.Update(ctx, r, r.Version); err != nil {
				t.Fatal(err)
			}
		}
		var left []string
		for i, id := range want {
			if i%3 != 0 {
				left = append(left, id)
			}
		}
		if got := pageIDs(t, st, "awaiting_approval", false, 97); !slices.Equal(got, left) {
			t.Errorf("oldest first: %d ids, want %d (first diff near %d)", len(got), len(left), firstDiff(got, left))
		}
		slices.Reverse(left)
		if got := pageIDs(t, st, "awaiting_approval", true, 101); !slices.Equal(got, left) {
			t.Errorf("newest first: %d ids, want %d (first diff near %d)", len(got), len(left), firstDiff(got, left))
		}
	})
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
