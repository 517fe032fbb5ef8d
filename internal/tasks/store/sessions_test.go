package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store/storetest"
)

func TestMemorySessions(t *testing.T) {
	storetest.RunSessions(t, func(t *testing.T) store.Store {
		st := store.NewMemory()
		t.Cleanup(func() { _ = st.Close() })
		return st
	})
}

func TestFileSessions(t *testing.T) {
	storetest.RunSessions(t, func(t *testing.T) store.Store {
		st, err := store.OpenFile(filepath.Join(t.TempDir(), "tasks.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	})
}

func TestRedisSessions(t *testing.T) {
	base := redisURL(t)
	storetest.RunSessions(t, func(t *testing.T) store.Store {
		u, _ := withPrefix(t, base, nil)
		return openRedis(t, u)
	})
}

// TestKnownSessionsAcrossRestartAndReplicas: a session remembered by one process is known to the
// next one on the same file, and to another replica on the same Redis; the store holds a keyed
// hash, not the id.
func TestKnownSessionsAcrossRestartAndReplicas(t *testing.T) {
	ctx := context.Background()
	key := []byte("0123456789abcdef0123456789abcdef")
	const sid = "mcp-session-6f1c2b1e-9a55-4c1e-8f0e-3b7c9d2a1f00"

	path := filepath.Join(t.TempDir(), "tasks.db")
	f1, err := store.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	k1, err := store.NewKnownSessions(f1, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := k1.Remember(ctx, sid, "", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if ok, _ := f1.SessionKnown(ctx, sid); ok {
		t.Error("the store holds the session id itself, want a keyed hash")
	}
	if err := f1.RememberSession(ctx, "expired", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := f1.RememberSession(ctx, "expired", time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	_ = f1.Close()
	f2, err := store.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	k2, _ := store.NewKnownSessions(f2, key)
	if ok, err := k2.Known(ctx, sid, ""); err != nil || !ok {
		t.Errorf("after reopening the file: Known = %v, %v; want true", ok, err)
	}
	if ok, _ := f2.SessionKnown(ctx, "expired"); ok {
		t.Error("an expired session came back after reopening")
	}
	other, _ := store.NewKnownSessions(f2, []byte("another key, another hash ......"))
	if ok, _ := other.Known(ctx, sid, ""); ok {
		t.Error("known under another hash key")
	}

	u, _ := withPrefix(t, redisURL(t), nil)
	a, b := openRedis(t, u), openRedis(t, u)
	ka, _ := store.NewKnownSessions(a, key)
	kb, _ := store.NewKnownSessions(b, key)
	if err := ka.Remember(ctx, sid, "", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if ok, err := kb.Known(ctx, sid, ""); err != nil || !ok {
		t.Errorf("other replica: Known = %v, %v; want true", ok, err)
	}
	if err := kb.Forget(ctx, sid, ""); err != nil {
		t.Fatal(err)
	}
	if ok, _ := ka.Known(ctx, sid, ""); ok {
		t.Error("a session one replica forgot is known to the other")
	}
}

// The known-session set is bounded: beyond the bound the entry expiring soonest makes room, in
// every backend.
func TestKnownSessionsBounded(t *testing.T) {
	defer store.SetMaxKnownSessions(5)()
	f, err := store.OpenFile(filepath.Join(t.TempDir(), "tasks.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u, _ := withPrefix(t, redisURL(t), nil)
	for name, st := range map[string]store.Sessions{"memory": store.NewMemory(), "file": f, "redis": openRedis(t, u)} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Now()
			for i := range 5 {
				if err := st.RememberSession(ctx, fmt.Sprint("s", i), now.Add(time.Duration(i+1)*time.Hour)); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.RememberSession(ctx, "new", now.Add(10*time.Hour)); err != nil {
				t.Fatal(err)
			}
			for i, want := range []bool{false, true, true, true, true} {
				if ok, _ := st.SessionKnown(ctx, fmt.Sprint("s", i)); ok != want {
					t.Errorf("s%d known = %v, want %v (the soonest to expire makes room)", i, ok, want)
				}
			}
			if ok, _ := st.SessionKnown(ctx, "new"); !ok {
				t.Error("the newest session is not known")
			}
		})
	}
}

// BenchmarkKnownSessions: what remembering (one per new session, or per use after half the
// TTL) and looking up (one per request on an id this process does not hold) cost.
func BenchmarkKnownSessions(b *testing.B) {
	ctx := context.Background()
	f, err := store.OpenFile(filepath.Join(b.TempDir(), "tasks.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	key := []byte("0123456789abcdef0123456789abcdef")
	for name, st := range map[string]store.Store{"memory": store.NewMemory(), "file": f} {
		k, _ := store.NewKnownSessions(st, key)
		b.Run(name+"/Remember", func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				if err := k.Remember(ctx, fmt.Sprint("mcp-session-", i), "", time.Now().Add(time.Hour)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/Known", func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				if _, err := k.Known(ctx, fmt.Sprint("forged-", i), ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestKnownSessionsMemoryKey: the memory store has no persisted hash key; the set draws one.
func TestKnownSessionsMemoryKey(t *testing.T) {
	k, err := store.NewKnownSessions(store.NewMemory(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := k.Remember(ctx, "s", "", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if ok, _ := k.Known(ctx, "s", ""); !ok {
		t.Error("remembered session not known")
	}
}

// TestEndedSessionsBounded: ended sessions are bounded per source (the source's own entry
// expiring soonest makes room) and in total (the source holding the most makes room), so one
// source ending session after session cannot push out the ends another source recorded.
func TestEndedSessionsBounded(t *testing.T) {
	defer store.SetMaxEndedSessions(3, 5)()
	u, _ := withPrefix(t, redisURL(t), nil)
	f, err := store.OpenFile(filepath.Join(t.TempDir(), "tasks.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for name, st := range map[string]store.EndedSessions{"memory": store.NewMemory(), "file": f, "redis": openRedis(t, u)} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Now()
			end := func(id, src string, h int) {
				t.Helper()
				if err := st.EndSession(ctx, id, "", src, now.Add(time.Duration(h)*time.Hour)); err != nil {
					t.Fatal(err)
				}
			}
			end("b1", "B", 1)
			end("b2", "B", 2)
			for i := range 6 { // a flood from A: past its share of 3, its own oldest give way
				end(fmt.Sprint("a", i), "A", 3+i)
			}
			want := map[string]bool{"b1": true, "b2": true, "a0": false, "a1": false, "a2": false, "a3": true, "a4": true, "a5": true}
			for id, w := range want {
				if _, ok, err := st.SessionEnded(ctx, id); err != nil || ok != w {
					t.Errorf("%s ended = %v (%v), want %v", id, ok, err, w)
				}
			}
			end("c1", "C", 20) // the total (5) is full: A holds the most, its soonest gives way
			for id, w := range map[string]bool{"b1": true, "b2": true, "a3": false, "a4": true, "c1": true} {
				if _, ok, _ := st.SessionEnded(ctx, id); ok != w {
					t.Errorf("after C: %s ended = %v, want %v", id, ok, w)
				}
			}
		})
	}
}

// TestEndedSessionsAcrossReplicas: an end recorded through one replica is seen by another on
// the same Redis, and honoured only for a session bound to no one or to the identity that
// ended it.
func TestEndedSessionsAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	key := []byte("0123456789abcdef0123456789abcdef")
	u, _ := withPrefix(t, redisURL(t), nil)
	ka, _ := store.NewKnownSessions(openRedis(t, u), key)
	kb, _ := store.NewKnownSessions(openRedis(t, u), key)
	if err := ka.End(ctx, "sid-1", "alice", "10.0.0.1", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id, bound string
		want      bool
	}{{"sid-1", "", true}, {"sid-1", "alice", true}, {"sid-1", "mallory", false}, {"sid-2", "", false}} {
		if ok, err := kb.Ended(ctx, c.id, c.bound); err != nil || ok != c.want {
			t.Errorf("Ended(%s) for a session bound to %q = %v, %v; want %v", c.id, c.bound, ok, err, c.want)
		}
	}
}

// TestKnownSessionsBoundToIdentity: a session remembered as opened by an identity is known to
// that identity only (on any replica sharing the store); one opened by no one to everyone; a
// Forget by another identity leaves it, its own removes it.
func TestKnownSessionsBoundToIdentity(t *testing.T) {
	ctx := context.Background()
	key := []byte("0123456789abcdef0123456789abcdef")
	u, _ := withPrefix(t, redisURL(t), nil)
	for name, pair := range map[string][2]store.Store{
		"memory": func() [2]store.Store { m := store.NewMemory(); return [2]store.Store{m, m} }(),
		"redis":  {openRedis(t, u), openRedis(t, u)},
	} {
		t.Run(name, func(t *testing.T) {
			ka, _ := store.NewKnownSessions(pair[0], key)
			kb, _ := store.NewKnownSessions(pair[1], key)
			exp := time.Now().Add(time.Hour)
			if err := ka.Remember(ctx, "sid-alice", "alice", exp); err != nil {
				t.Fatal(err)
			}
			if err := ka.Remember(ctx, "sid-open", "", exp); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				id, who string
				want    bool
			}{{"sid-alice", "alice", true}, {"sid-alice", "mallory", false}, {"sid-alice", "", false}, {"sid-open", "mallory", true}, {"sid-open", "", true}} {
				if ok, err := kb.Known(ctx, c.id, c.who); err != nil || ok != c.want {
					t.Errorf("Known(%s) as %q = %v, %v; want %v", c.id, c.who, ok, err, c.want)
				}
			}
			if err := kb.Forget(ctx, "sid-alice", "mallory"); err != nil {
				t.Fatal(err)
			}
			if ok, _ := ka.Known(ctx, "sid-alice", "alice"); !ok {
				t.Error("another identity's Forget removed alice's session")
			}
			if err := kb.Forget(ctx, "sid-alice", "alice"); err != nil {
				t.Fatal(err)
			}
			if ok, _ := ka.Known(ctx, "sid-alice", "alice"); ok {
				t.Error("alice's own Forget left her session known")
			}
		})
	}
}

// BenchmarkSessionEnded: the read a replica makes on every request on a session it holds
// (Registry.EndedElsewhere), per backend; Redis with TOLLGATE_TEST_REDIS_URL set.
func BenchmarkSessionEnded(b *testing.B) {
	ctx := context.Background()
	key := []byte("0123456789abcdef0123456789abcdef")
	stores := map[string]store.Store{"memory": store.NewMemory()}
	if u := os.Getenv("TOLLGATE_TEST_REDIS_URL"); u != "" {
		st, err := store.OpenRedis(ctx, u)
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		stores["redis"] = st
	}
	for name, st := range stores {
		k, _ := store.NewKnownSessions(st, key)
		_ = k.End(ctx, "ended", "", "src", time.Now().Add(time.Hour))
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := k.Ended(ctx, "live-session", "alice"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
