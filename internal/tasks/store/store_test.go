package store_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store/storetest"
)

func TestMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		st := store.NewMemory()
		t.Cleanup(func() { _ = st.Close() })
		return st
	})
}

func TestFile(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		st, err := store.OpenFile(filepath.Join(t.TempDir(), "tasks.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	})
}

// TestFileSurvivesRestart: tasks, versions and the pending counters come back after a reopen.
func TestFileSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", "tasks.db")
	st, err := store.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2025, 11, 25, 10, 0, 0, 0, time.UTC)
	data := []byte(`{"x": "<exact bytes>" }`)
	r, err := st.Create(ctx, store.Record{ID: "a", Owner: "alice", State: "executing", Pending: true,
		CreatedAt: now, ExpiresAt: now.Add(time.Hour), ArgBytes: 7, Data: data}, store.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Update(ctx, r, r.Version); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Create(ctx, store.Record{ID: "b", Owner: "bob", State: "completed", CreatedAt: now}, store.Limits{}); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st, err = store.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g, err := st.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if g.Version != 2 || string(g.Data) != string(data) || g.State != "executing" || !g.CreatedAt.Equal(now) {
		t.Errorf("after reopen: %+v", g)
	}
	if _, err := st.Get(ctx, "b"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleted task came back: %v", err)
	}
	if u, _ := st.Usage(ctx, "alice"); u != (store.Usage{PendingOwner: 1, PendingTotal: 1, PendingBytes: 7}) {
		t.Errorf("Usage after reopen = %+v", u)
	}
}

func TestOpenFileErrors(t *testing.T) {
	if _, err := store.OpenFile(""); err == nil {
		t.Error("OpenFile(\"\") succeeded")
	}
	dir := t.TempDir()
	if _, err := store.OpenFile(dir); err == nil { // a directory is not a database
		t.Error("OpenFile(dir) succeeded")
	}
}

func TestOpen(t *testing.T) {
	tests := []struct {
		cfg     config.Store
		wantErr bool
	}{
		{config.Store{}, false},
		{config.Store{Type: "memory"}, false},
		{config.Store{Type: "file", Path: filepath.Join(t.TempDir(), "t.db")}, false},
		{config.Store{Type: "file"}, true},
		{config.Store{Type: "redis", URL: "redis://127.0.0.1:1"}, true},
		{config.Store{Type: "etcd"}, true},
	}
	for _, tc := range tests {
		st, err := store.Open(tc.cfg, nil)
		if (err != nil) != tc.wantErr {
			t.Errorf("Open(%+v) err = %v, wantErr %v", tc.cfg, err, tc.wantErr)
		}
		if st != nil {
			_ = st.Close()
		}
	}
}

// TestFileKeysSurviveRestart: an idempotency key still attaches to its record after a reopen,
// and the newest record of a key wins whatever order the file yields them in.
func TestFileKeysSurviveRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tasks.db")
	st, err := store.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2025, 11, 25, 10, 0, 0, 0, time.UTC)
	old := store.Record{ID: "z-old", Owner: "alice", State: "completed", CreatedAt: now, ExpiresAt: now.Add(time.Minute), Key: "k"}
	if _, _, err := st.CreateOrAttach(ctx, old, store.Limits{}, now); err != nil {
		t.Fatal(err)
	}
	newer := store.Record{ID: "a-new", Owner: "alice", State: "awaiting_approval", Pending: true, CreatedAt: now.Add(2 * time.Minute), ExpiresAt: now.Add(time.Hour), Key: "k"}
	if r, attached, err := st.CreateOrAttach(ctx, newer, store.Limits{}, now.Add(2*time.Minute)); err != nil || attached || r.ID != "a-new" {
		t.Fatalf("second record: %+v %v %v", r, attached, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = store.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, attached, err := st.CreateOrAttach(ctx, store.Record{ID: "x", Owner: "alice", Pending: true, CreatedAt: now, ExpiresAt: now.Add(time.Hour), Key: "k"}, store.Limits{}, now.Add(3*time.Minute))
	if err != nil || !attached || r.ID != "a-new" {
		t.Errorf("after reopen: %+v %v %v; want attached to a-new", r, attached, err)
	}
}

// TestFileOrderOnOpen: the file store keeps no index on disk; the order of pending records is
// built when a file opens, so a file written by an older Tollgate (the same records, nothing
// else) and a restored backup page in order at once.
func TestFileOrderOnOpen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var recs []store.Record
	for i, id := range []string{"c", "a", "d", "b"} {
		recs = append(recs, store.Record{ID: id, Owner: "o", State: "awaiting_approval", Pending: id != "d", Version: 1,
			CreatedAt: base.Add(time.Duration(i) * time.Second), ExpiresAt: base.Add(time.Hour), Data: []byte(`{}`)})
	}
	old := filepath.Join(dir, "old.db")
	if err := store.WriteFileRecords(old, recs); err != nil {
		t.Fatal(err)
	}
	st, err := store.OpenFile(old)
	if err != nil {
		t.Fatal(err)
	}
	page := func(st store.Store) []string {
		res, err := st.Page(ctx, store.PageQuery{State: "awaiting_approval", Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range res.Records {
			ids = append(ids, r.ID)
		}
		return ids
	}
	if got := page(st); strings.Join(got, ",") != "c,a,b" {
		t.Errorf("opened file: Page = %v, want [c a b]", got)
	}
	var backup bytes.Buffer
	if _, err := st.Backup(&backup); err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	restored := filepath.Join(dir, "restored.db")
	if err := os.WriteFile(restored, backup.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	st2, err := store.OpenFile(restored)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	if got := page(st2); strings.Join(got, ",") != "c,a,b" {
		t.Errorf("restored backup: Page = %v, want [c a b]", got)
	}
}
