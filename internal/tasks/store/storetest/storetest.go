// Package storetest is the one contract suite every task store backend must pass.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

var t0 = time.Date(2025, 11, 25, 10, 0, 0, 0, time.UTC)

func rec(id, owner string, n int, pending bool, argBytes int64) store.Record {
	return store.Record{
		ID: id, Owner: owner, State: "awaiting_approval", Pending: pending,
		CreatedAt: t0.Add(time.Duration(n) * time.Second), ExpiresAt: t0.Add(time.Hour),
		ArgBytes: argBytes, Data: []byte(fmt.Sprintf(`{"n":%d,"html":"<&>"}`, n)),
	}
}

// createWithin creates r under lim and checks the outcome: stored when wantLimit is "", else
// refused with a QuotaError naming wantLimit and not stored.
func createWithin(t *testing.T, st store.Store, r store.Record, lim store.Limits, wantLimit string) {
	t.Helper()
	ctx := context.Background()
	_, err := st.Create(ctx, r, lim)
	var qe *store.QuotaError
	switch {
	case wantLimit == "" && err != nil:
		t.Errorf("task %s: unexpected err %v", r.ID, err)
	case wantLimit != "" && (!errors.As(err, &qe) || qe.Limit != wantLimit):
		t.Errorf("task %s: err = %v, want quota %s", r.ID, err, wantLimit)
	case wantLimit != "":
		if _, err := st.Get(ctx, r.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("task %s: rejected by quota but stored (err %v)", r.ID, err)
		}
	}
}

// Run runs the contract against stores made by newStore; each call must return an empty store
// that the suite may Close.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	ctx := context.Background()
	runPage(t, newStore)

	t.Run("CreateGet", func(t *testing.T) {
		st := newStore(t)
		r := rec("a", "alice", 1, true, 10)
		got, err := st.Create(ctx, r, store.Limits{})
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		if got.Version != 1 {
			t.Errorf("Version = %d, want 1", got.Version)
		}
		g, err := st.Get(ctx, "a")
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if g.ID != r.ID || g.Owner != r.Owner || g.State != r.State || !g.Pending || g.ArgBytes != 10 ||
			!g.CreatedAt.Equal(r.CreatedAt) || !g.ExpiresAt.Equal(r.ExpiresAt) || string(g.Data) != string(r.Data) {
			t.Errorf("Get = %+v, want %+v", g, r)
		}
		if _, err := st.Create(ctx, r, store.Limits{}); !errors.Is(err, store.ErrExists) {
			t.Errorf("duplicate Create err = %v, want ErrExists", err)
		}
		if _, err := st.Get(ctx, "missing"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get missing err = %v, want ErrNotFound", err)
		}
	})

	t.Run("UpdateCAS", func(t *testing.T) {
		st := newStore(t)
		if _, err := st.Create(ctx, rec("a", "alice", 1, true, 10), store.Limits{}); err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name    string
			id      string
			expect  uint64
			wantErr error
			wantVer uint64
		}{
			{"stale version", "a", 0, store.ErrVersionConflict, 0},
			{"current version", "a", 1, nil, 2},
			{"replayed version", "a", 1, store.ErrVersionConflict, 0},
			{"next version", "a", 2, nil, 3},
			{"missing id", "zz", 1, store.ErrNotFound, 0},
		}
		for _, tc := range tests {
			r := rec(tc.id, "mallory", 9, false, 0) // owner must be kept from the stored record
			r.State = "approved"
			got, err := st.Update(ctx, r, tc.expect)
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("%s: err = %v, want %v", tc.name, err, tc.wantErr)
				continue
			}
			if err == nil && (got.Version != tc.wantVer || got.Owner != "alice" || got.State != "approved") {
				t.Errorf("%s: got %+v, want version %d owner alice", tc.name, got, tc.wantVer)
			}
		}
		g, _ := st.Get(ctx, "a")
		if g.Version != 3 || g.Owner != "alice" || !g.CreatedAt.Equal(t0.Add(time.Second)) {
			t.Errorf("after updates: %+v", g)
		}
	})

	t.Run("Delete", func(t *testing.T) {
		st := newStore(t)
		if _, err := st.Create(ctx, rec("a", "alice", 1, true, 10), store.Limits{}); err != nil {
			t.Fatal(err)
		}
		if err := st.Delete(ctx, "a"); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		if err := st.Delete(ctx, "a"); err != nil {
			t.Errorf("second Delete: %v", err)
		}
		if _, err := st.Get(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get after Delete err = %v", err)
		}
		u, err := st.Usage(ctx, "alice")
		if err != nil || u != (store.Usage{}) {
			t.Errorf("Usage after Delete = %+v, %v", u, err)
		}
	})

	t.Run("List", func(t *testing.T) {
		st := newStore(t)
		// created out of order on purpose: List orders by CreatedAt
		for _, r := range []store.Record{
			rec("c", "alice", 3, true, 1), rec("a", "alice", 1, true, 1),
			rec("b", "bob", 2, false, 1), rec("d", "bob", 4, true, 1),
		} {
			if r.ID == "b" {
				r.State = "completed"
			}
			if _, err := st.Create(ctx, r, store.Limits{}); err != nil {
				t.Fatal(err)
			}
		}
		tests := []struct {
			name string
			f    store.Filter
			want string
		}{
			{"all", store.Filter{}, "abcd"},
			{"owner", store.Filter{Owner: "alice"}, "ac"},
			{"pending", store.Filter{PendingOnly: true}, "acd"},
			{"state", store.Filter{States: []string{"completed"}}, "b"},
			{"states", store.Filter{States: []string{"completed", "awaiting_approval"}, Owner: "bob"}, "bd"},
			{"limit", store.Filter{Limit: 2}, "ab"},
			{"no match", store.Filter{Owner: "nobody"}, ""},
		}
		for _, tc := range tests {
			rs, err := st.List(ctx, tc.f)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			got := ""
			for _, r := range rs {
				got += r.ID
			}
			if got != tc.want {
				t.Errorf("%s: List = %q, want %q", tc.name, got, tc.want)
			}
		}
	})

	t.Run("Quotas", func(t *testing.T) {
		lim := store.Limits{MaxPendingPerOwner: 2, MaxPendingTotal: 3, MaxArgBytes: 100, MaxStoredBytes: 250}
		tests := []struct {
			r         store.Record
			wantLimit string // "" = accepted
		}{
			{rec("1", "alice", 1, true, 10), ""},
			{rec("2", "alice", 2, true, 10), ""},
			{rec("3", "alice", 3, true, 10), "max_pending_per_owner"},
			{rec("4", "bob", 4, true, 101), "max_argument_bytes"},
			{rec("5", "bob", 5, true, 100), ""},
			{rec("6", "carol", 6, true, 10), "max_pending_total"},
			{rec("7", "carol", 7, false, 10), ""}, // finished tasks do not count
		}
		st := newStore(t)
		for _, tc := range tests {
			createWithin(t, st, tc.r, lim, tc.wantLimit)
		}
		u, err := st.Usage(ctx, "alice")
		if err != nil || u != (store.Usage{PendingOwner: 2, PendingTotal: 3, PendingBytes: 120}) {
			t.Errorf("Usage = %+v, %v", u, err)
		}
		// finishing a task frees its quota
		r, _ := st.Get(ctx, "1")
		r.Pending, r.State = false, "completed"
		if _, err := st.Update(ctx, r, r.Version); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Create(ctx, rec("8", "alice", 8, true, 10), lim); err != nil {
			t.Errorf("Create after a task finished: %v", err)
		}
		big := store.Limits{MaxStoredBytes: 130}
		var qe *store.QuotaError
		if _, err := st.Create(ctx, rec("9", "dave", 9, true, 11), big); !errors.As(err, &qe) || qe.Limit != "max_stored_bytes" {
			t.Errorf("stored bytes: err = %v", err)
		}
	})

	t.Run("QuotaPerSource", func(t *testing.T) {
		// One source with many owners (random credentials, many sessions) fills its own share
		// only; another source, and records without a source, can still create.
		lim := store.Limits{MaxPendingPerOwner: 1, MaxPendingPerSource: 2, MaxPendingTotal: 10}
		from := func(id, owner, source string, n int) store.Record {
			r := rec(id, owner, n, true, 1)
			r.Source = source
			return r
		}
		tests := []struct {
			r         store.Record
			wantLimit string
		}{
			{from("1", "o1", "ip:192.0.2.1", 1), ""},
			{from("2", "o2", "ip:192.0.2.1", 2), ""},
			{from("3", "o3", "ip:192.0.2.1", 3), "max_pending_per_source"},
			{from("4", "o3", "ip:192.0.2.2", 4), ""},
			{from("5", "o3", "ip:192.0.2.2", 5), "max_pending_per_owner"}, // the narrower bound is named
			{from("6", "o4", "", 6), ""},
		}
		st := newStore(t)
		for _, tc := range tests {
			createWithin(t, st, tc.r, lim, tc.wantLimit)
		}
		// Source is kept by Update, and a finished record frees its source's share.
		r, err := st.Get(ctx, "1")
		if err != nil || r.Source != "ip:192.0.2.1" {
			t.Fatalf("Get: source %q, err %v", r.Source, err)
		}
		r.Pending, r.State, r.Source = false, "completed", "ip:forged"
		got, err := st.Update(ctx, r, r.Version)
		if err != nil || got.Source != "ip:192.0.2.1" {
			t.Fatalf("Update: source %q, err %v", got.Source, err)
		}
		if _, err := st.Create(ctx, from("7", "o7", "ip:192.0.2.1", 7), lim); err != nil {
			t.Errorf("Create after the source's task finished: %v", err)
		}
		var qe *store.QuotaError
		if _, err := st.Create(ctx, from("8", "o8", "ip:192.0.2.1", 8), lim); !errors.As(err, &qe) || qe.Limit != "max_pending_per_source" || qe.Current != 2 {
			t.Errorf("third pending task of the source: err = %v", err)
		}
		// Deleting a pending record frees its share too.
		if err := st.Delete(ctx, "2"); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Create(ctx, from("9", "o9", "ip:192.0.2.1", 9), lim); err != nil {
			t.Errorf("Create after the source's task was deleted: %v", err)
		}
	})

	t.Run("QuotaStoredBytesPerSource", func(t *testing.T) {
		// One source filling its share of stored argument bytes (with many owners) leaves the
		// rest to others; finishing a task gives its bytes back to its source. Before the share,
		// one address filled all of max_stored_bytes and every other caller was refused.
		lim := store.Limits{MaxStoredBytes: 120, MaxStoredBytesPerSource: 40}
		from := func(id, owner, source string, n int, size int64) store.Record {
			r := rec(id, owner, n, true, size)
			r.Source = source
			return r
		}
		st := newStore(t)
		for _, tc := range []struct {
			r         store.Record
			wantLimit string
		}{
			{from("1", "o1", "ip:192.0.2.1", 1, 20), ""},
			{from("2", "o2", "ip:192.0.2.1", 2, 20), ""},
			{from("3", "o3", "ip:192.0.2.1", 3, 1), "max_stored_bytes_per_source"},
			{from("4", "o4", "ip:192.0.2.2", 4, 40), ""},
			{from("5", "o5", "ip:192.0.2.3", 5, 20), ""},
			{from("6", "o6", "", 6, 21), "max_stored_bytes"}, // 120 in all
			{from("7", "o7", "", 7, 20), ""},
		} {
			createWithin(t, st, tc.r, lim, tc.wantLimit)
		}
		r, err := st.Get(ctx, "1")
		if err != nil {
			t.Fatal(err)
		}
		r.Pending, r.State = false, "completed"
		if _, err := st.Update(ctx, r, r.Version); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Create(ctx, from("8", "o8", "ip:192.0.2.1", 8, 20), lim); err != nil {
			t.Errorf("Create after the source's task finished: %v", err)
		}
		var qe *store.QuotaError
		if _, err := st.Create(ctx, from("9", "o9", "ip:192.0.2.1", 9, 1), lim); !errors.As(err, &qe) || qe.Limit != "max_stored_bytes_per_source" || qe.Current != 40 {
			t.Errorf("the source past its share again: err = %v", err)
		}
	})

	t.Run("ConcurrentCAS", func(t *testing.T) {
		st := newStore(t)
		if _, err := st.Create(ctx, rec("a", "alice", 1, true, 1), store.Limits{}); err != nil {
			t.Fatal(err)
		}
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rec("a", "alice", 1, false, 1)
				r.State = fmt.Sprintf("s%d", i)
				if _, err := st.Update(ctx, r, 1); err == nil {
					wins.Add(1)
				} else if !errors.Is(err, store.ErrVersionConflict) {
					t.Errorf("Update: %v", err)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Errorf("%d updates won the same version, want 1", wins.Load())
		}
	})

	t.Run("ConcurrentQuota", func(t *testing.T) {
		st := newStore(t)
		lim := store.Limits{MaxPendingPerOwner: 10}
		var ok atomic.Int32
		var wg sync.WaitGroup
		for i := range 40 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := st.Create(ctx, rec(fmt.Sprint(i), "alice", i, true, 1), lim); err == nil {
					ok.Add(1)
				}
			}()
		}
		wg.Wait()
		u, _ := st.Usage(ctx, "alice")
		if ok.Load() != 10 || u.PendingOwner != 10 {
			t.Errorf("accepted %d, usage %+v; want exactly 10", ok.Load(), u)
		}
	})

	t.Run("CreateOrAttach", func(t *testing.T) {
		st := newStore(t)
		now := t0.Add(time.Minute) // rec(...) expires at t0+1h
		keyed := func(id string, n int) store.Record {
			r := rec(id, "alice", n, true, 10)
			r.Key = "k1"
			return r
		}
		lim := store.Limits{MaxPendingPerOwner: 1}
		a, attached, err := st.CreateOrAttach(ctx, keyed("a", 1), lim, now)
		if err != nil || attached || a.ID != "a" || a.Version != 1 || a.Key != "k1" {
			t.Fatalf("first CreateOrAttach = %+v, %v, %v", a, attached, err)
		}
		// Pending: a second call attaches, even with the per-owner quota used up.
		b, attached, err := st.CreateOrAttach(ctx, keyed("b", 2), lim, now)
		if err != nil || !attached || b.ID != "a" || string(b.Data) != string(a.Data) {
			t.Fatalf("second CreateOrAttach = %+v, %v, %v; want the pending record a", b, attached, err)
		}
		if _, err := st.Get(ctx, "b"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("attach stored a second record: %v", err)
		}
		// Another key, or no key, creates (and the quota applies again).
		other := rec("c", "bob", 3, true, 10)
		other.Key = "k2"
		if c, attached, err := st.CreateOrAttach(ctx, other, store.Limits{}, now); err != nil || attached || c.ID != "c" {
			t.Errorf("other key = %+v, %v, %v", c, attached, err)
		}
		var qe *store.QuotaError
		if _, _, err := st.CreateOrAttach(ctx, rec("d", "alice", 4, true, 10), lim, now); !errors.As(err, &qe) {
			t.Errorf("keyless record past the quota: err = %v", err)
		}
		// Finished but not expired: still attaches; Update keeps the key.
		cur, _ := st.Get(ctx, "a")
		cur.Pending, cur.State, cur.Key = false, "completed", ""
		if u, err := st.Update(ctx, cur, cur.Version); err != nil || u.Key != "k1" {
			t.Fatalf("Update = %+v, %v; want the key kept", u, err)
		}
		if r, attached, err := st.CreateOrAttach(ctx, keyed("e", 5), lim, now); err != nil || !attached || r.ID != "a" || r.State != "completed" {
			t.Errorf("finished, unexpired: %+v, %v, %v; want attached to a", r, attached, err)
		}
		// Expired (now past ExpiresAt): a new record takes the key.
		later := t0.Add(2 * time.Hour)
		f, attached, err := st.CreateOrAttach(ctx, keyed("f", 6), lim, later)
		if err != nil || attached || f.ID != "f" {
			t.Fatalf("after expiry = %+v, %v, %v; want a new record", f, attached, err)
		}
		// Deleting the old record does not free the key from the new one.
		if err := st.Delete(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if r, attached, err := st.CreateOrAttach(ctx, keyed("g", 7), lim, later); err != nil || !attached || r.ID != "f" {
			t.Errorf("after deleting the old record: %+v, %v, %v; want attached to f", r, attached, err)
		}
		// Deleting the key's record frees the key.
		if err := st.Delete(ctx, "f"); err != nil {
			t.Fatal(err)
		}
		if r, attached, err := st.CreateOrAttach(ctx, keyed("h", 8), lim, later); err != nil || attached || r.ID != "h" {
			t.Errorf("after deleting the key's record: %+v, %v, %v; want h created", r, attached, err)
		}
		// Create ignores a key: it never takes the key's place.
		plain := keyed("i", 9)
		if r, err := st.Create(ctx, plain, store.Limits{}); err != nil || r.Key != "" {
			t.Errorf("Create with a key = %+v, %v; want it stored without the key", r, err)
		}
		if r, attached, err := st.CreateOrAttach(ctx, keyed("j", 10), store.Limits{}, later); err != nil || !attached || r.ID != "h" {
			t.Errorf("after a keyed Create: %+v, %v, %v; want attached to h", r, attached, err)
		}
	})

	// A record whose outcome reached its owner is never attached to: the key's next call is a
	// new call (docs/contract.md §3 "replayed only until delivered"). Retries before delivery
	// still attach, so an undelivered call keeps running exactly once.
	t.Run("DeliveredNotAttached", func(t *testing.T) {
		st := newStore(t)
		now := t0.Add(time.Minute) // well before ExpiresAt
		keyed := func(id string, n int) store.Record {
			r := rec(id, "alice", n, true, 10)
			r.Key = "k1"
			return r
		}
		if _, err := st.Keyed(ctx, "k1"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Keyed of an unused key: err = %v, want ErrNotFound", err)
		}
		if _, err := st.Keyed(ctx, ""); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Keyed(\"\"): err = %v, want ErrNotFound", err)
		}
		a, _, err := st.CreateOrAttach(ctx, keyed("a", 1), store.Limits{}, now)
		if err != nil {
			t.Fatal(err)
		}
		// Finished, not yet delivered: a retry attaches.
		a.Pending, a.State = false, "completed"
		a, err = st.Update(ctx, a, a.Version)
		if err != nil {
			t.Fatal(err)
		}
		if r, attached, err := st.CreateOrAttach(ctx, keyed("b", 2), store.Limits{}, now); err != nil || !attached || r.ID != "a" || r.Delivered {
			t.Fatalf("finished, undelivered: %+v, %v, %v; want attached to a", r, attached, err)
		}
		// Delivered: kept through Get and Keyed, and the next call creates.
		a.Delivered = true
		if a, err = st.Update(ctx, a, a.Version); err != nil || !a.Delivered {
			t.Fatalf("Update delivered = %+v, %v", a, err)
		}
		if g, err := st.Get(ctx, "a"); err != nil || !g.Delivered || g.Key != "k1" {
			t.Errorf("Get after delivery = %+v, %v; want Delivered and the key kept", g, err)
		}
		if k, err := st.Keyed(ctx, "k1"); err != nil || k.ID != "a" || !k.Delivered || string(k.Data) != string(a.Data) {
			t.Errorf("Keyed before the next call = %+v, %v; want a", k, err)
		}
		c, attached, err := st.CreateOrAttach(ctx, keyed("c", 3), store.Limits{}, now)
		if err != nil || attached || c.ID != "c" {
			t.Fatalf("after delivery: %+v, %v, %v; want c created", c, attached, err)
		}
		if k, err := st.Keyed(ctx, "k1"); err != nil || k.ID != "c" {
			t.Errorf("Keyed after the new call = %+v, %v; want c", k, err)
		}
		// The new record is the key's: its retries attach to it.
		if r, attached, err := st.CreateOrAttach(ctx, keyed("d", 4), store.Limits{}, now); err != nil || !attached || r.ID != "c" {
			t.Errorf("retry of the new call: %+v, %v, %v; want attached to c", r, attached, err)
		}
		if g, err := st.Get(ctx, "a"); err != nil || !g.Delivered {
			t.Errorf("the delivered record is kept as it was: %+v, %v", g, err)
		}
	})

	t.Run("ConcurrentAttach", func(t *testing.T) {
		st := newStore(t)
		now := t0.Add(time.Minute)
		var created atomic.Int32
		ids := make(chan string, 20)
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rec(fmt.Sprintf("r%d", i), "alice", i, true, 1)
				r.Key = "same-call"
				got, attached, err := st.CreateOrAttach(ctx, r, store.Limits{MaxPendingPerOwner: 5}, now)
				if err != nil {
					t.Errorf("CreateOrAttach: %v", err)
					return
				}
				if !attached {
					created.Add(1)
				}
				ids <- got.ID
			}()
		}
		wg.Wait()
		close(ids)
		first := ""
		for id := range ids {
			if first == "" {
				first = id
			}
			if id != first {
				t.Errorf("callers got different records: %s and %s", first, id)
			}
		}
		recs, _ := st.List(ctx, store.Filter{})
		if created.Load() != 1 || len(recs) != 1 {
			t.Errorf("created %d, stored %d; want exactly 1", created.Load(), len(recs))
		}
	})

	t.Run("Closed", func(t *testing.T) {
		st := newStore(t)
		if err := st.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if _, err := st.Get(ctx, "a"); !errors.Is(err, store.ErrClosed) {
			t.Errorf("Get after Close err = %v, want ErrClosed", err)
		}
	})
}
