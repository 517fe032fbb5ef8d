package storetest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

// WriteCorruptStore writes a real file task store at path holding n tasks, then overwrites the
// page headers of two pages of its tasks bucket (a torn write, a bad disk block): opening it
// with bbolt alone panics ("assertion failed: Page expected to be …").
func WriteCorruptStore(t testing.TB, path string, n int) {
	t.Helper()
	WriteStore(t, path, n)
	pages := BucketPages(t, path)
	if len(pages) < 3 {
		t.Fatalf("want a multi-page store, got pages %v", pages)
	}
	CorruptPages(t, path, pages[1], pages[len(pages)-1])
}

// WriteStore writes a real file task store at path holding n pending tasks, and closes it.
func WriteStore(t testing.TB, path string, n int) {
	t.Helper()
	st, err := store.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for i := range n {
		_, err := st.Create(context.Background(), store.Record{ID: fmt.Sprintf("tg_%06d", i), Owner: "alice", State: "awaiting_approval",
			Pending: true, CreatedAt: now, ExpiresAt: now.Add(time.Hour), Data: []byte(`{"pad":"` + strings.Repeat("x", 200) + `"}`)}, store.Limits{})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// CorruptPages overwrites the first 64 bytes (the page header: id, flags, count, overflow) of
// the given pages of a bbolt file.
func CorruptPages(t testing.TB, path string, pages ...int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ps := int64(os.Getpagesize()) // bbolt's default page size
	for _, p := range pages {
		if _, err := f.WriteAt([]byte(strings.Repeat("\xa5", 64)), p*ps); err != nil {
			t.Fatal(err)
		}
	}
}

// BucketPages are the ids of the branch and leaf pages of a healthy bbolt file.
func BucketPages(t testing.TB, path string) []int64 {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ids []int64
	_ = db.View(func(tx *bolt.Tx) error {
		for id := 2; ; id++ {
			pi, err := tx.Page(id)
			if err != nil || pi == nil {
				return nil
			}
			if pi.Type == "leaf" || pi.Type == "branch" {
				ids = append(ids, int64(id))
			}
		}
	})
	return ids
}
