package store_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store/storetest"
)

func check(t *testing.T, c store.Checker) (bool, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.Check(ctx)
}

// TestRedisCheck: a real redis-server stopped, then started again without persistence. Check
// fails while it is down, and reports the data lost once it is back empty — for a second
// replica on the same Redis too, although the first one wrote the marker again.
func TestRedisCheck(t *testing.T) {
	rs := storetest.StartRedis(t)
	a, b := openRedis(t, rs.URL()), openRedis(t, rs.URL())
	for _, st := range []*store.Redis{a, b} {
		if lost, err := check(t, st); lost || err != nil {
			t.Fatalf("first check: lost %v, %v", lost, err)
		}
	}
	if lost, err := check(t, a); lost || err != nil {
		t.Fatalf("second check: lost %v, %v", lost, err)
	}
	rs.Stop()
	if _, err := check(t, a); err == nil {
		t.Fatal("check passed with Redis down")
	}
	rs.Start() // no persistence: every key is gone
	// go-redis may hand out a pooled connection that died with the old server: retry a few times.
	var lostA bool
	for range 20 {
		var err error
		if lostA, err = check(t, a); err == nil {
			break
		}
	}
	if !lostA {
		t.Fatal("replica a: Redis came back empty, check did not report the data lost")
	}
	var lostB bool
	for range 20 {
		var err error
		if lostB, err = check(t, b); err == nil {
			break
		}
	}
	if !lostB {
		t.Fatal("replica b: Redis came back empty (a wrote a new marker), check did not report the data lost")
	}
	if lost, err := check(t, a); lost || err != nil {
		t.Fatalf("check after the loss was reported: lost %v, %v", lost, err)
	}
}

// TestFileCheck: an open file store passes; a closed one says so.
func TestFileCheck(t *testing.T) {
	f, err := store.OpenFile(filepath.Join(t.TempDir(), "tasks.db"))
	if err != nil {
		t.Fatal(err)
	}
	if lost, err := check(t, f); lost || err != nil {
		t.Fatalf("check: lost %v, %v", lost, err)
	}
	_ = f.Close()
	if _, err := check(t, f); err == nil {
		t.Fatal("check passed on a closed store")
	}
}

// TestRedisPersistenceProblems: what CONFIG GET says about a redis-server run without
// persistence, then with AOF; and an error (not a guess) when CONFIG is denied.
func TestRedisPersistenceProblems(t *testing.T) {
	rs := storetest.StartRedis(t) // --save "" --appendonly no
	st := openRedis(t, rs.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := st.PersistenceProblems(ctx)
	if err != nil || len(p) != 1 || !strings.Contains(p[0], "no persistence") {
		t.Fatalf("without persistence: %q, %v", p, err)
	}
	admin := redis.NewClient(&redis.Options{Addr: strings.TrimSuffix(strings.TrimPrefix(rs.URL(), "redis://"), "/0")})
	defer admin.Close()
	for _, kv := range [][2]string{{"appendonly", "yes"}, {"maxmemory-policy", "allkeys-lru"}} {
		if err := admin.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	p, err = st.PersistenceProblems(ctx)
	if err != nil || len(p) != 1 || !strings.Contains(p[0], "allkeys-lru") {
		t.Fatalf("AOF on, evicting: %q, %v", p, err)
	}
	if err := admin.Do(ctx, "ACL", "SETUSER", "app", "on", ">app-password-0123", "~*", "&*", "+@all", "-config").Err(); err != nil {
		t.Fatal(err)
	}
	limited := openRedis(t, strings.Replace(rs.URL(), "redis://", "redis://app:app-password-0123@", 1))
	if p, err := limited.PersistenceProblems(ctx); err == nil {
		t.Fatalf("CONFIG denied: %q without an error", p)
	}
}
