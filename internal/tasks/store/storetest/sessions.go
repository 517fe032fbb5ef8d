package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

// RunSessions runs the known-session contract (store.Sessions) against stores made by
// newStore; each call must return an empty store that the suite may Close.
func RunSessions(t *testing.T, newStore func(t *testing.T) store.Store) {
	ctx := context.Background()
	sessions := func(t *testing.T) store.Sessions {
		st := newStore(t)
		s, ok := st.(store.Sessions)
		if !ok {
			t.Fatalf("%T does not implement store.Sessions", st)
		}
		return s
	}
	known := func(t *testing.T, s store.Sessions, id string) bool {
		t.Helper()
		ok, err := s.SessionKnown(ctx, id)
		if err != nil {
			t.Fatalf("SessionKnown(%s): %v", id, err)
		}
		return ok
	}
	remember := func(t *testing.T, s store.Sessions, id string, exp time.Time) {
		t.Helper()
		if err := s.RememberSession(ctx, id, exp); err != nil {
			t.Fatalf("RememberSession(%s): %v", id, err)
		}
	}

	t.Run("RememberKnownForget", func(t *testing.T) {
		s := sessions(t)
		if known(t, s, "h1") {
			t.Fatal("an id nobody remembered is known")
		}
		remember(t, s, "h1", time.Now().Add(time.Hour))
		if !known(t, s, "h1") {
			t.Fatal("remembered id is not known")
		}
		if known(t, s, "h2") {
			t.Error("another id is known")
		}
		remember(t, s, "h1", time.Now().Add(2*time.Hour)) // refresh: still one entry
		if err := s.ForgetSession(ctx, "h1"); err != nil {
			t.Fatal(err)
		}
		if known(t, s, "h1") {
			t.Error("forgotten id is still known")
		}
		if err := s.ForgetSession(ctx, "never"); err != nil {
			t.Errorf("ForgetSession of a missing id: %v", err)
		}
	})

	t.Run("Expiry", func(t *testing.T) {
		s := sessions(t)
		remember(t, s, "past", time.Now().Add(-time.Second))
		if known(t, s, "past") {
			t.Error("an id remembered with a passed expiry is known")
		}
		remember(t, s, "h", time.Now().Add(time.Hour))
		remember(t, s, "h", time.Now().Add(-time.Second)) // a passed expiry forgets it
		if known(t, s, "h") {
			t.Error("an id refreshed with a passed expiry is still known")
		}
	})

	t.Run("Many", func(t *testing.T) {
		s := sessions(t)
		for i := range 200 {
			remember(t, s, fmt.Sprintf("id-%d", i), time.Now().Add(time.Hour))
		}
		for i := range 200 {
			if !known(t, s, fmt.Sprintf("id-%d", i)) {
				t.Fatalf("id-%d forgotten below the bound", i)
			}
		}
	})

	t.Run("Ended", func(t *testing.T) {
		st := newStore(t)
		e, ok := st.(store.EndedSessions)
		if !ok {
			t.Fatalf("%T does not implement store.EndedSessions", st)
		}
		ended := func(id string) (string, bool) {
			t.Helper()
			by, ok, err := e.SessionEnded(ctx, id)
			if err != nil {
				t.Fatalf("SessionEnded(%s): %v", id, err)
			}
			return by, ok
		}
		if _, ok := ended("h1"); ok {
			t.Fatal("a session nobody ended is ended")
		}
		if err := e.EndSession(ctx, "h1", "alice", "src", time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := e.EndSession(ctx, "h2", "", "src", time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if by, ok := ended("h1"); !ok || by != "alice" {
			t.Errorf("h1: ended %v by %q, want true by alice", ok, by)
		}
		if by, ok := ended("h2"); !ok || by != "" {
			t.Errorf("h2: ended %v by %q, want true by nobody", ok, by)
		}
		if _, ok := ended("h3"); ok {
			t.Error("another id is ended")
		}
		if err := e.EndSession(ctx, "past", "", "src", time.Now().Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, ok := ended("past"); ok {
			t.Error("an end recorded with a passed expiry counts")
		}
	})

	t.Run("Closed", func(t *testing.T) {
		st := newStore(t)
		s := st.(store.Sessions)
		_ = st.Close()
		if _, err := s.SessionKnown(ctx, "h"); err == nil {
			t.Error("SessionKnown on a closed store: no error")
		}
		if err := s.RememberSession(ctx, "h", time.Now().Add(time.Hour)); err == nil {
			t.Error("RememberSession on a closed store: no error")
		}
	})
}
