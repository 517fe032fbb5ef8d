package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store/storetest"
)

// TestOpenFileCorruptPages: two corrupted pages used to make bbolt panic inside OpenFile
// ("assertion failed: Page expected to be …"), a crash loop at every start. OpenFile now fails
// with ErrCorrupt, and never panics, wherever the damage is.
func TestOpenFileCorruptPages(t *testing.T) {
	dir := t.TempDir()
	healthy := filepath.Join(dir, "healthy.db")
	storetest.WriteStore(t, healthy, 300)
	data := storetest.BucketPages(t, healthy)
	if len(data) < 3 {
		t.Fatalf("want a multi-page store, got pages %v", data)
	}
	tests := []struct {
		name  string
		pages []int64
	}{
		{"two bucket pages", []int64{data[1], data[len(data)-1]}},
		{"both meta pages", []int64{0, 1}},
		{"freelist and root", []int64{2, data[0]}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tasks.db")
			b, err := os.ReadFile(healthy)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			storetest.CorruptPages(t, path, tc.pages...)
			var st *store.File
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("OpenFile panicked: %v", p)
					}
				}()
				st, err = store.OpenFile(path)
			}()
			if err == nil {
				st.Close()
				t.Fatal("OpenFile of a corrupt store succeeded")
			}
			if !errors.Is(err, store.ErrCorrupt) {
				t.Fatalf("OpenFile: %v; want ErrCorrupt", err)
			}
		})
	}
	// The healthy copy still opens with every task.
	st, err := store.OpenFile(healthy)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if recs, _ := st.List(context.Background(), store.Filter{}); len(recs) != 300 || st.Skipped() != 0 {
		t.Errorf("healthy store: %d tasks, %d skipped; want 300, 0", len(recs), st.Skipped())
	}
}

// TestOpenFileSkipsUndecodableRecords: a record that bbolt reads but that does not decode is
// left out and counted, not fatal (it used to fail the whole open).
func TestOpenFileSkipsUndecodableRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	storetest.WriteStore(t, path, 3)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("tasks"))
		if err := b.Put([]byte("tg_bad1"), []byte("{not json")); err != nil {
			return err
		}
		return b.Put([]byte("tg_bad2"), []byte(`{"id":"another","owner":"mallory"}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := store.OpenFile(path)
	if err != nil {
		t.Fatalf("OpenFile: %v", err)
	}
	defer st.Close()
	recs, _ := st.List(context.Background(), store.Filter{})
	if len(recs) != 3 || st.Skipped() != 2 {
		t.Errorf("%d tasks loaded, %d skipped; want 3, 2", len(recs), st.Skipped())
	}
}
