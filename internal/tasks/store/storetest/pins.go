package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

// RunPins runs the pinned-definition contract (store.Pins) against stores made by newStore;
// each call must return an empty store that the suite may Close.
func RunPins(t *testing.T, newStore func(t *testing.T) store.Store) {
	ctx := context.Background()
	pins := func(t *testing.T) store.Pins {
		st := newStore(t)
		p, ok := st.(store.Pins)
		if !ok {
			t.Fatalf("%T does not implement store.Pins", st)
		}
		return p
	}

	t.Run("PutGetList", func(t *testing.T) {
		p := pins(t)
		if _, err := p.GetPin(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("GetPin of a missing tool: %v, want ErrNotFound", err)
		}
		r, err := p.PutPin(ctx, store.PinRecord{Tool: "b", Data: []byte(`{"x":1}`)}, 0, 0)
		if err != nil || r.Version != 1 {
			t.Fatalf("PutPin: %+v %v", r, err)
		}
		if _, err := p.PutPin(ctx, store.PinRecord{Tool: "a", Data: []byte("\x00binary\xff")}, 0, 0); err != nil {
			t.Fatal(err)
		}
		got, err := p.GetPin(ctx, "a")
		if err != nil || string(got.Data) != "\x00binary\xff" || got.Version != 1 {
			t.Fatalf("GetPin: %+v %v", got, err)
		}
		r, err = p.PutPin(ctx, store.PinRecord{Tool: "b", Data: []byte(`{"x":2}`)}, 1, 0)
		if err != nil || r.Version != 2 {
			t.Fatalf("PutPin update: %+v %v", r, err)
		}
		all, err := p.ListPins(ctx)
		if err != nil || len(all) != 2 || all[0].Tool != "a" || all[1].Tool != "b" || string(all[1].Data) != `{"x":2}` || all[1].Version != 2 {
			t.Fatalf("ListPins: %+v %v", all, err)
		}
		if err := p.DeletePin(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if err := p.DeletePin(ctx, "never"); err != nil {
			t.Errorf("DeletePin of a missing tool: %v", err)
		}
		if _, err := p.GetPin(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("deleted pin still there: %v", err)
		}
	})

	t.Run("CompareAndSwap", func(t *testing.T) {
		p := pins(t)
		if _, err := p.PutPin(ctx, store.PinRecord{Tool: "t", Data: []byte("1")}, 0, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := p.PutPin(ctx, store.PinRecord{Tool: "t", Data: []byte("x")}, 0, 0); !errors.Is(err, store.ErrVersionConflict) {
			t.Errorf("second first write: %v, want ErrVersionConflict", err)
		}
		if _, err := p.PutPin(ctx, store.PinRecord{Tool: "t", Data: []byte("x")}, 5, 0); !errors.Is(err, store.ErrVersionConflict) {
			t.Errorf("stale version: %v, want ErrVersionConflict", err)
		}
		if _, err := p.PutPin(ctx, store.PinRecord{Tool: "new", Data: []byte("x")}, 3, 0); !errors.Is(err, store.ErrVersionConflict) {
			t.Errorf("version for a missing pin: %v, want ErrVersionConflict", err)
		}
		// Racing writers of one version: exactly one wins.
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := p.PutPin(ctx, store.PinRecord{Tool: "t", Data: []byte(fmt.Sprint(i))}, 1, 0); err == nil {
					mu.Lock()
					wins++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if wins != 1 {
			t.Errorf("%d racing writers won, want 1", wins)
		}
	})

	t.Run("Bound", func(t *testing.T) {
		p := pins(t)
		for i := range 3 {
			if _, err := p.PutPin(ctx, store.PinRecord{Tool: fmt.Sprint("t", i), Data: []byte("x")}, 0, 3); err != nil {
				t.Fatal(err)
			}
		}
		_, err := p.PutPin(ctx, store.PinRecord{Tool: "t9", Data: []byte("x")}, 0, 3)
		var q *store.QuotaError
		if !errors.As(err, &q) || q.Limit != "max_tools" || q.Max != 3 {
			t.Fatalf("fourth pin of 3: %v, want QuotaError max_tools", err)
		}
		if _, err := p.PutPin(ctx, store.PinRecord{Tool: "t1", Data: []byte("y")}, 1, 3); err != nil {
			t.Errorf("updating a pin at the bound: %v", err)
		}
	})

	t.Run("Closed", func(t *testing.T) {
		st := newStore(t)
		p := st.(store.Pins)
		_ = st.Close()
		if _, err := p.ListPins(ctx); err == nil {
			t.Error("ListPins on a closed store: no error")
		}
		if _, err := p.PutPin(ctx, store.PinRecord{Tool: "t"}, 0, 0); err == nil {
			t.Error("PutPin on a closed store: no error")
		}
	})
}
