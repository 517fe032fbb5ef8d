package store_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store/storetest"
)

func TestMemoryPins(t *testing.T) {
	storetest.RunPins(t, func(t *testing.T) store.Store {
		st := store.NewMemory()
		t.Cleanup(func() { _ = st.Close() })
		return st
	})
}

func TestFilePins(t *testing.T) {
	storetest.RunPins(t, func(t *testing.T) store.Store {
		st, err := store.OpenFile(filepath.Join(t.TempDir(), "tasks.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	})
}

func TestRedisPins(t *testing.T) {
	base := redisURL(t)
	storetest.RunPins(t, func(t *testing.T) store.Store {
		u, _ := withPrefix(t, base, nil)
		return openRedis(t, u)
	})
}

// TestFilePinsSurviveRestart: pins written by one process are read by the next on the file.
func TestFilePinsSurviveRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tasks.db")
	f1, err := store.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f1.PutPin(ctx, store.PinRecord{Tool: "deploy", Data: []byte("d")}, 0, 0); err != nil {
		t.Fatal(err)
	}
	_ = f1.Close()
	f2, err := store.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close()
	r, err := f2.GetPin(ctx, "deploy")
	if err != nil || string(r.Data) != "d" || r.Version != 1 {
		t.Fatalf("after restart: %+v %v", r, err)
	}
}
