package store_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store/storetest"
)

func redisURL(t *testing.T) string { return storetest.RedisURL(t) }

var prefixSeq atomic.Int64

// withPrefix adds a key prefix unique to this test (and query params) to base.
func withPrefix(t *testing.T, base string, extra url.Values) (string, string) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("tollgate-test:%d:%d:%s:", os.Getpid(), prefixSeq.Add(1), t.Name())
	q := u.Query()
	q.Set("key_prefix", prefix)
	for k, v := range extra {
		q[k] = v
	}
	u.RawQuery = q.Encode()
	t.Cleanup(func() { dropPrefix(t, base, prefix) }) // matters with TOLLGATE_TEST_REDIS_URL
	return u.String(), prefix
}

// dropPrefix deletes a test's keys.
func dropPrefix(t *testing.T, base, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	opt, err := redis.ParseURL(base)
	if err != nil {
		t.Error(err)
		return
	}
	c := redis.NewClient(opt)
	defer c.Close()
	pattern := strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`).Replace(prefix) + "*"
	iter := c.Scan(ctx, 0, pattern, 500).Iterator()
	for iter.Next(ctx) {
		if err := c.Del(ctx, iter.Val()).Err(); err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
	}
	if err := iter.Err(); err != nil {
		t.Errorf("cleanup: %v", err)
	}
}

func openRedis(t *testing.T, rawURL string) *store.Redis {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := store.OpenRedis(ctx, rawURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func TestRedis(t *testing.T) {
	base := redisURL(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		u, _ := withPrefix(t, base, nil)
		return openRedis(t, u)
	})
}

func rrec(id, owner string, pending bool, argBytes int64, data string) store.Record {
	now := time.Now().UTC()
	return store.Record{ID: id, Owner: owner, State: "awaiting_approval", Pending: pending,
		CreatedAt: now, ExpiresAt: now.Add(time.Hour), ArgBytes: argBytes, Data: []byte(data)}
}

// TestRedisReplicas: two clients on one prefix behave as two Tollgate replicas sharing tasks.
func TestRedisReplicas(t *testing.T) {
	ctx := context.Background()
	u, _ := withPrefix(t, redisURL(t), nil)
	a, b := openRedis(t, u), openRedis(t, u)
	if !store.IsShared(a) {
		t.Error("IsShared(redis) = false")
	}

	t.Run("CAS across replicas", func(t *testing.T) {
		data := "\x00binary\xff<&>"
		if _, err := a.Create(ctx, rrec("cas", "alice", true, 5, data), store.Limits{}); err != nil {
			t.Fatal(err)
		}
		seen, err := b.Get(ctx, "cas") // replica B reads what A created
		if err != nil || seen.Version != 1 || string(seen.Data) != data {
			t.Fatalf("B.Get = %+v, %v", seen, err)
		}
		if _, err := b.Create(ctx, rrec("cas", "bob", true, 5, ""), store.Limits{}); !errors.Is(err, store.ErrExists) {
			t.Errorf("B.Create same id err = %v, want ErrExists", err)
		}
		mine, _ := a.Get(ctx, "cas")
		mine.State, mine.Pending = "approved", false
		if _, err := a.Update(ctx, mine, mine.Version); err != nil {
			t.Fatalf("A.Update: %v", err)
		}
		seen.State, seen.Pending = "rejected", false
		if _, err := b.Update(ctx, seen, seen.Version); !errors.Is(err, store.ErrVersionConflict) {
			t.Errorf("B.Update on stale version err = %v, want ErrVersionConflict", err)
		}
		if g, _ := b.Get(ctx, "cas"); g.State != "approved" || g.Version != 2 {
			t.Errorf("after conflict B sees %+v, want A's approval at version 2", g)
		}
		if err := b.Delete(ctx, "cas"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Get(ctx, "cas"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("A.Get after B.Delete err = %v", err)
		}
	})

	t.Run("quotas across replicas", func(t *testing.T) {
		lim := store.Limits{MaxPendingPerOwner: 2, MaxPendingTotal: 3}
		steps := []struct {
			st        store.Store
			id, owner string
			wantLimit string
		}{
			{a, "q1", "alice", ""},
			{b, "q2", "alice", ""},
			{a, "q3", "alice", "max_pending_per_owner"},
			{b, "q4", "bob", ""},
			{a, "q5", "carol", "max_pending_total"},
		}
		for _, s := range steps {
			_, err := s.st.Create(ctx, rrec(s.id, s.owner, true, 1, "{}"), lim)
			var qe *store.QuotaError
			if s.wantLimit == "" && err != nil || s.wantLimit != "" && (!errors.As(err, &qe) || qe.Limit != s.wantLimit) {
				t.Errorf("create %s: err = %v, want limit %q", s.id, err, s.wantLimit)
			}
		}
		for _, st := range []store.Store{a, b} {
			if u, err := st.Usage(ctx, "alice"); err != nil || u != (store.Usage{PendingOwner: 2, PendingTotal: 3, PendingBytes: 3}) {
				t.Errorf("Usage = %+v, %v", u, err)
			}
		}
		// B finishing alice's task frees her quota for A.
		r, _ := b.Get(ctx, "q1")
		r.Pending, r.State = false, "completed"
		if _, err := b.Update(ctx, r, r.Version); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Create(ctx, rrec("q6", "alice", true, 1, "{}"), lim); err != nil {
			t.Errorf("A.Create after B finished a task: %v", err)
		}
		for _, id := range []string{"q1", "q2", "q4", "q6"} {
			if err := a.Delete(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("concurrent quota across replicas", func(t *testing.T) {
		lim := store.Limits{MaxPendingTotal: 10}
		var ok atomic.Int32
		var wg sync.WaitGroup
		for i := range 40 {
			st := []store.Store{a, b}[i%2]
			wg.Go(func() {
				if _, err := st.Create(ctx, rrec(fmt.Sprint("c", i), fmt.Sprint("o", i%3), true, 1, ""), lim); err == nil {
					ok.Add(1)
				}
			})
		}
		wg.Wait()
		u, _ := b.Usage(ctx, "")
		if ok.Load() != 10 || u.PendingTotal != 10 || u.PendingBytes != 10 {
			t.Errorf("accepted %d, usage %+v; want exactly 10", ok.Load(), u)
		}
	})
}

// TestRedisExpiry: Redis drops records by itself margin after ExpiresAt (or after the write,
// if ExpiresAt is already past), and the quota counters follow.
func TestRedisExpiry(t *testing.T) {
	ctx := context.Background()
	base := redisURL(t)

	t.Run("key TTL", func(t *testing.T) {
		u, prefix := withPrefix(t, base, nil)
		st := openRedis(t, u)
		raw := rawClient(t, base)
		margin := store.DefaultRedisExpiryMargin
		tests := []struct {
			name    string
			expires time.Duration // from now; 0 = zero ExpiresAt
			want    time.Duration
		}{
			{"future", time.Hour, time.Hour + margin},
			{"past: kept margin past the write", -time.Hour, margin},
			{"zero", 0, margin},
		}
		for i, tc := range tests {
			r := rrec(fmt.Sprint(i), "alice", true, 1, "")
			r.ExpiresAt = time.Time{}
			if tc.expires != 0 {
				r.ExpiresAt = time.Now().Add(tc.expires)
			}
			created, err := st.Create(ctx, r, store.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			for step := range 2 { // Update sets the expiry again
				ttl, err := raw.PTTL(ctx, prefix+"t:"+r.ID).Result()
				if err != nil || ttl <= tc.want-time.Minute || ttl > tc.want {
					t.Errorf("%s (step %d): PTTL = %v, %v; want about %v", tc.name, step, ttl, err, tc.want)
				}
				if created, err = st.Update(ctx, created, created.Version); err != nil {
					t.Fatal(err)
				}
			}
		}
	})

	t.Run("expired records leave the counters", func(t *testing.T) {
		u, prefix := withPrefix(t, base, url.Values{"expiry_margin": {"150ms"}})
		st := openRedis(t, u)
		old := rrec("old", "alice", true, 7, "")
		old.CreatedAt, old.ExpiresAt = old.CreatedAt.Add(-2*time.Hour), old.CreatedAt.Add(-time.Hour)
		if _, err := st.Create(ctx, old, store.Limits{}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			u, err := st.Usage(ctx, "alice")
			if err != nil {
				t.Fatal(err)
			}
			if u == (store.Usage{}) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Usage still %+v long after the record's expiry", u)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if _, err := st.Get(ctx, "old"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get after expiry err = %v", err)
		}
		if rs, err := st.List(ctx, store.Filter{}); err != nil || len(rs) != 0 {
			t.Errorf("List after expiry = %v, %v", rs, err)
		}
		n, err := rawClient(t, base).Keys(ctx, prefix+"*").Result()
		if err != nil || len(n) != 0 {
			t.Errorf("keys left after expiry: %v, %v", n, err)
		}
		// The id is free again.
		if _, err := st.Create(ctx, rrec("old", "alice", true, 7, ""), store.Limits{MaxPendingPerOwner: 1}); err != nil {
			t.Errorf("Create after expiry: %v", err)
		}
	})
}

func rawClient(t *testing.T, rawURL string) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestOpenRedisErrors(t *testing.T) {
	tests := []struct {
		name, url, wantErr string
	}{
		{"empty", "", "empty tasks.store.url"},
		{"bad scheme", "http://127.0.0.1:6379", "invalid tasks.store.url"},
		{"unparsable keeps the password out", "redis://user:s3cret@[::1", "invalid tasks.store.url"},
		{"unknown option", "redis://127.0.0.1:1?nope=1", "unexpected option"},
		{"bad margin", "redis://127.0.0.1:1?expiry_margin=soon", "expiry_margin"},
		{"negative margin", "redis://127.0.0.1:1?expiry_margin=-1s", "expiry_margin"},
		{"unreachable", "redis://:s3cret@127.0.0.1:1?max_retries=-1", "cannot reach Redis at 127.0.0.1:1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			st, err := store.OpenRedis(ctx, tc.url)
			if err == nil {
				_ = st.Close()
				t.Fatal("OpenRedis succeeded")
			}
			if !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("err = %q, want it to mention %q and no password", err, tc.wantErr)
			}
		})
	}
}

// TestOpenRedisConfig: tasks.store.type redis reaches this backend through store.Open.
func TestOpenRedisConfig(t *testing.T) {
	u, _ := withPrefix(t, redisURL(t), nil)
	st, err := store.Open(config.Store{Type: "redis", URL: u}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, ok := st.(*store.Redis); !ok || !store.IsShared(st) {
		t.Errorf("Open(redis) = %T, want a shared *store.Redis", st)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Usage(context.Background(), "x"); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Usage after Close err = %v, want ErrClosed", err)
	}
}

// TestRedisWatch: an update through one replica's store is announced to another replica's
// Watch (same key prefix), and not to a store under another prefix; Watch ends with its ctx.
func TestRedisWatch(t *testing.T) {
	base := redisURL(t)
	u, _ := withPrefix(t, base, nil)
	a, b := openRedis(t, u), openRedis(t, u)
	other, _ := withPrefix(t, base, nil)
	c := openRedis(t, other)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, strays := make(chan string, 4), make(chan string, 4)
	var wg sync.WaitGroup
	wctx, stop := context.WithCancel(ctx)
	wg.Go(func() { _ = b.Watch(wctx, func(id string) { got <- id }) })
	wg.Go(func() { _ = c.Watch(wctx, func(id string) { strays <- id }) })
	rec, err := a.Create(ctx, rrec("w1", "alice", true, 1, "x"), store.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for { // the subscription is in place once PUBLISH reaches a subscriber
		rec.Data = []byte("y")
		if rec, err = a.Update(ctx, rec, rec.Version); err != nil {
			t.Fatal(err)
		}
		select {
		case id := <-got:
			if id != "w1" {
				t.Fatalf("announced %q, want w1", id)
			}
			stop()
			wg.Wait()
			select {
			case id := <-strays:
				t.Fatalf("a store under another prefix was told about %q", id)
			default:
			}
			return
		case <-time.After(50 * time.Millisecond): // not yet subscribed: update again
		case <-ctx.Done():
			t.Fatal("no announcement")
		}
	}
}

// TestRedisUpstreamTasks: a binding made through one replica's store is seen through
// another's; the first owner keeps the id; an unbound id is not found.
func TestRedisUpstreamTasks(t *testing.T) {
	u, _ := withPrefix(t, redisURL(t), nil)
	a, b := openRedis(t, u), openRedis(t, u)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	exp := time.Now().Add(time.Hour)
	if got, err := a.BindUpstreamTask(ctx, "id:alice", "up-1", "alice", exp); err != nil || got != "alice" {
		t.Fatalf("bind: %q %v", got, err)
	}
	if got, err := b.BindUpstreamTask(ctx, "id:mallory", "up-1", "mallory", exp); err != nil || got != "alice" {
		t.Fatalf("second bind: %q %v, want alice kept", got, err)
	}
	if owner, exp2, ok, err := b.UpstreamTaskOwner(ctx, "up-1"); err != nil || !ok || owner != "alice" || exp2.Before(exp.Add(-time.Minute)) || exp2.After(exp.Add(time.Second)) {
		t.Fatalf("owner through b: %q until %v (bound until %v) %v %v", owner, exp2, exp, ok, err)
	}
	if _, _, ok, err := a.UpstreamTaskOwner(ctx, "up-2"); err != nil || ok {
		t.Fatalf("unbound id: %v %v", ok, err)
	}
}

// TestRedisUpstreamTasksBounded: the bindings are bounded per source and in total across the
// replicas sharing the store: a source binding task after task gives way with its own oldest
// (soonest to expire) binding, never another source's; at the total bound the source holding
// the most gives way; expired bindings leave the count.
func TestRedisUpstreamTasksBounded(t *testing.T) {
	u, _ := withPrefix(t, redisURL(t), nil)
	a, b := openRedis(t, u), openRedis(t, u)
	var reasons, victims []string
	var mu sync.Mutex
	count := func(r, src string) {
		mu.Lock()
		reasons, victims = append(reasons, r), append(victims, src)
		mu.Unlock()
	}
	a.LimitUpstreamTasks(3, 5, count)
	b.LimitUpstreamTasks(3, 5, count)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bind := func(st *store.Redis, src, id string, ttl time.Duration) {
		t.Helper()
		if _, err := st.BindUpstreamTask(ctx, src, id, "owner-"+src, time.Now().Add(ttl)); err != nil {
			t.Fatalf("bind %s: %v", id, err)
		}
	}
	bound := func(id string) bool {
		t.Helper()
		_, _, ok, err := a.UpstreamTaskOwner(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	bind(a, "id:quiet", "q1", time.Minute) // expires first of all
	for i := range 6 {                     // through both replicas
		st := a
		if i%2 == 1 {
			st = b
		}
		bind(st, "id:flood", fmt.Sprint("f", i), time.Hour+time.Duration(i)*time.Second)
	}
	if !bound("q1") {
		t.Fatal("the flooding source pushed out the quiet source's binding")
	}
	for i, want := range []bool{false, false, false, true, true, true} {
		if got := bound(fmt.Sprint("f", i)); got != want {
			t.Errorf("f%d bound %v, want %v", i, got, want)
		}
	}
	bind(b, "id:third", "t1", time.Hour) // 1 + 3 + 1 = 5: full
	bind(a, "id:third", "t2", time.Hour) // flood (3) holds the most: its soonest-expiring goes
	if !bound("q1") || bound("f3") || !bound("t1") || !bound("t2") {
		t.Errorf("at the total bound: q1 %v f3 %v t1 %v t2 %v", bound("q1"), bound("f3"), bound("t1"), bound("t2"))
	}
	mu.Lock()
	if got := fmt.Sprint(reasons); got != "[source_share source_share source_share total]" {
		t.Errorf("evictions %s", got)
	}
	if got := fmt.Sprint(victims); got != "[id:flood id:flood id:flood id:flood]" {
		t.Errorf("evictions charged to %s, want the flooding source every time", got)
	}
	mu.Unlock()

	// An expired binding leaves the count: once it is gone, a new binding needs no room.
	bind(a, "id:short", "s1", time.Second) // full: flood or third (2 each) gives way
	time.Sleep(1100 * time.Millisecond)
	if bound("s1") {
		t.Fatal("s1 outlived its TTL")
	}
	bind(b, "id:fourth", "x1", time.Hour) // s1's place is free: nothing gives way
	mu.Lock()
	defer mu.Unlock()
	if got := fmt.Sprint(reasons); got != "[source_share source_share source_share total total]" {
		t.Errorf("evictions after the expiry %s, want one more total (for s1), none for x1", got)
	}
}

// TestRedisUpstreamTaskRebound: an id bound again after its binding expired, while the
// expired member is still in its source's set (the pruning of one binding is bounded: 64
// members), counts once for its source: the source's share is not used up by ghosts.
func TestRedisUpstreamTaskRebound(t *testing.T) {
	u, _ := withPrefix(t, redisURL(t), nil)
	st := openRedis(t, u)
	var mu sync.Mutex
	var evicted []string
	st.LimitUpstreamTasks(3, 1000, func(r, src string) { mu.Lock(); evicted = append(evicted, r+":"+src); mu.Unlock() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bind := func(src, id string, ttl time.Duration) {
		t.Helper()
		if _, err := st.BindUpstreamTask(ctx, src, id, "owner-"+src, time.Now().Add(ttl)); err != nil {
			t.Fatalf("bind %s: %v", id, err)
		}
	}
	for i := range 70 { // more expired bindings than one binding prunes
		bind(fmt.Sprint("id:x", i), fmt.Sprint("x", i), time.Second)
	}
	bind("id:s", "dup", time.Second) // expires last of all
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, _, ok, err := st.UpstreamTaskOwner(ctx, "dup")
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("dup outlived its TTL")
		}
		time.Sleep(50 * time.Millisecond) // Redis's clock: no event to await
	}
	// UpstreamTaskOwner reports a key whose PTTL reads 0 (under a millisecond left) as ended,
	// while SET NX still sees it for that millisecond: under load the rebinding below landed
	// in it and kept the old, expiring binding. Let the key go first.
	time.Sleep(20 * time.Millisecond)
	bind("id:s", "dup", time.Hour) // bound anew: its expired member was not pruned yet
	bind("id:s", "a", time.Hour+time.Second)
	bind("id:s", "b", time.Hour+2*time.Second) // three live bindings: the share, not past it
	for _, id := range []string{"dup", "a", "b"} {
		if owner, _, ok, err := st.UpstreamTaskOwner(ctx, id); err != nil || !ok || owner != "owner-id:s" {
			t.Errorf("%s: %q %v %v, want bound to owner-id:s", id, owner, ok, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(evicted) != 0 {
		t.Errorf("evictions %v, want none", evicted)
	}
}

// pageAll reads the whole order of awaiting_approval records.
func pageAll(t *testing.T, st store.Store) []string {
	t.Helper()
	var ids []string
	var after *store.Position
	for range 100 {
		res, err := st.Page(context.Background(), store.PageQuery{State: "awaiting_approval", After: after, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		if res.Last == nil {
			return ids
		}
		for _, r := range res.Records {
			ids = append(ids, r.ID)
		}
		after = res.Last
	}
	t.Fatal("Page never reached the end")
	return nil
}

// TestRedisOrderMigration: a Redis written by a Tollgate without the order index (no pst:
// sets, no pord hash, records without their ord field) gets it built when a new one opens it;
// Page then reads every pending record in order, and an update of a record without ord keeps
// its place. Fails without migrateOrder (Page reads nothing).
func TestRedisOrderMigration(t *testing.T) {
	ctx := context.Background()
	base := redisURL(t)
	u, prefix := withPrefix(t, base, nil)
	st := openRedis(t, u)
	now := time.Now().UTC()
	var want []string
	for i := range 7 {
		r := rrec(fmt.Sprintf("t%d", i), "alice", i != 3, 1, "{}")
		r.CreatedAt = now.Add(time.Duration(7-i) * time.Second) // ids and times in opposite orders
		if _, err := st.Create(ctx, r, store.Limits{}); err != nil {
			t.Fatal(err)
		}
		if i != 3 {
			want = append([]string{r.ID}, want...)
		}
	}
	raw := rawClient(t, base)
	// what an older Tollgate left
	keys, err := raw.Keys(ctx, prefix+"pst:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("order sets: %v, %v", keys, err)
	}
	raw.Del(ctx, append(keys, prefix+"pord")...)
	for i := range 7 {
		raw.HDel(ctx, fmt.Sprintf("%st:t%d", prefix, i), "ord")
	}
	if got := pageAll(t, st); len(got) != 0 {
		t.Fatalf("without the index Page read %v", got)
	}
	st2 := openRedis(t, u)
	if got := pageAll(t, st2); !slices.Equal(got, want) {
		t.Errorf("after migration Page = %v, want %v", got, want)
	}
	// verified on open: nothing to do the second time, same answer
	if got := pageAll(t, openRedis(t, u)); !slices.Equal(got, want) {
		t.Errorf("after a second open Page = %v, want %v", got, want)
	}
}

// TestRedisOrderConsistent: the order sets hold exactly the pending records of their state
// after creates, decisions, moves to another state, deletes and expiry (Redis dropping the
// record, the next script pruning its entries): ZCARD of every pst: set adds up to the
// pending count, and pord has one entry per pending record.
func TestRedisOrderConsistent(t *testing.T) {
	ctx := context.Background()
	base := redisURL(t)
	u, prefix := withPrefix(t, base, url.Values{"expiry_margin": {"150ms"}})
	st := openRedis(t, u)
	raw := rawClient(t, base)
	check := func(step string, wantAwaiting ...string) {
		t.Helper()
		pending, _ := raw.ZCard(ctx, prefix+"pending").Result()
		ord, _ := raw.HLen(ctx, prefix+"pord").Result()
		keys, _ := raw.Keys(ctx, prefix+"pst:*").Result()
		var inSets int64
		for _, k := range keys {
			n, _ := raw.ZCard(ctx, k).Result()
			inSets += n
		}
		if pending != ord || pending != inSets {
			t.Errorf("%s: pending %d, pord %d, in order sets %d", step, pending, ord, inSets)
		}
		if got := pageAll(t, st); !slices.Equal(got, wantAwaiting) && (len(got) > 0 || len(wantAwaiting) > 0) {
			t.Errorf("%s: Page = %v, want %v", step, got, wantAwaiting)
		}
	}
	now := time.Now().UTC()
	for i := range 5 {
		r := rrec(fmt.Sprintf("r%d", i), "alice", true, 1, "{}")
		r.CreatedAt = now.Add(time.Duration(i) * time.Millisecond)
		if _, err := st.Create(ctx, r, store.Limits{}); err != nil {
			t.Fatal(err)
		}
	}
	check("created", "r0", "r1", "r2", "r3", "r4")
	r1, _ := st.Get(ctx, "r1")
	r1.State, r1.Pending = "rejected", false
	if _, err := st.Update(ctx, r1, r1.Version); err != nil {
		t.Fatal(err)
	}
	check("decided", "r0", "r2", "r3", "r4")
	r2, _ := st.Get(ctx, "r2")
	r2.State = "executing"
	if _, err := st.Update(ctx, r2, r2.Version); err != nil {
		t.Fatal(err)
	}
	check("approved and executing", "r0", "r3", "r4")
	if err := st.Delete(ctx, "r3"); err != nil {
		t.Fatal(err)
	}
	check("deleted", "r0", "r4")
	// r0 expires: Redis drops its hash after the margin; Usage prunes the entries
	r0, _ := st.Get(ctx, "r0")
	r0.ExpiresAt = now.Add(-time.Hour)
	if _, err := st.Update(ctx, r0, r0.Version); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := st.Usage(ctx, "alice"); err != nil {
			t.Fatal(err)
		}
		if n, _ := raw.HLen(ctx, prefix+"pord").Result(); n == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	check("expired", "r4")
}
