package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

// The in-process index keeps one copy of an owner and a source however many pending tasks
// share them (the caller builds the owner string per request), in both local backends.
func TestIndexSharesOwnerAndSource(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	file, err := store.OpenFile(filepath.Join(t.TempDir(), "tasks.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for name, st := range map[string]store.Store{"memory": store.NewMemory(), "file": file} {
		t.Run(name, func(t *testing.T) {
			now := time.Now()
			const n = 4
			for i := range n {
				// Each request's owner and source are separate allocations of the same text.
				owner := strings.Clone(fmt.Sprintf("issuer|subject-%s", "alice"))
				source := strings.Clone("192.0.2.7")
				_, err := st.Create(ctx, store.Record{ID: fmt.Sprintf("t%d", i), Owner: owner, Source: source, State: "awaiting_approval",
					Pending: true, CreatedAt: now, ExpiresAt: now.Add(time.Hour), Data: []byte(`{}`)}, store.Limits{})
				if err != nil {
					t.Fatal(err)
				}
			}
			first, err := st.Get(ctx, "t0")
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i < n; i++ {
				r, err := st.Get(ctx, fmt.Sprintf("t%d", i))
				if err != nil {
					t.Fatal(err)
				}
				if r.Owner != first.Owner || r.Source != first.Source {
					t.Fatalf("record %d owner %q source %q, want %q %q", i, r.Owner, r.Source, first.Owner, first.Source)
				}
				if unsafe.StringData(r.Owner) != unsafe.StringData(first.Owner) || unsafe.StringData(r.Source) != unsafe.StringData(first.Source) {
					t.Errorf("record %d keeps its own copy of the owner or source", i)
				}
			}
			// Times come back equal, and a zero time stays zero.
			if !first.CreatedAt.Equal(now) || !first.ExpiresAt.Equal(now.Add(time.Hour)) {
				t.Errorf("times %v %v, want %v %v", first.CreatedAt, first.ExpiresAt, now, now.Add(time.Hour))
			}
			if _, err := st.Create(ctx, store.Record{ID: "zero", Owner: "bob", State: "completed", Data: []byte(`{}`)}, store.Limits{}); err != nil {
				t.Fatal(err)
			}
			if z, err := st.Get(ctx, "zero"); err != nil || !z.CreatedAt.IsZero() || !z.ExpiresAt.IsZero() {
				t.Errorf("zero times came back as %v %v (%v)", z.CreatedAt, z.ExpiresAt, err)
			}
		})
	}
}
