package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

// BenchmarkPendingTaskMemory reports the live heap one pending approval keeps in the process
// (manager, sweeper and store together), per store backend: n tasks awaiting approval are
// created as a held tools/call creates them (session, source, captured headers, ~60 bytes of
// arguments), and the heap after a full GC is compared with the heap before. It reports, it
// asserts nothing (docs/PERFORMANCE.md has the goal: 1 KB per pending approval).
//
//	go test -run '^$' -bench PendingTaskMemory -benchtime 1x ./internal/tasks/
func BenchmarkPendingTaskMemory(b *testing.B) {
	for _, backend := range []string{"memory", "file"} {
		n := 5000
		if backend == "file" {
			n = 1000 // every create is an fsync
		}
		b.Run(backend, func(b *testing.B) {
			var perTask float64
			for b.Loop() {
				var st store.Store = store.NewMemory()
				if backend == "file" {
					f, err := store.OpenFile(filepath.Join(b.TempDir(), "tasks.db"))
					if err != nil {
						b.Fatal(err)
					}
					st = f
				}
				m := NewManager(st, &fakeExec{}, nil, Options{DefaultTTL: time.Hour, MaxTTL: time.Hour})
				ids := make([]string, 0, n) // the ids share the tasks' strings: no extra heap
				before := liveHeap()
				for i := range n {
					t, err := m.Create(context.Background(), CreateRequest{
						Owner: fmt.Sprintf("owner-%d", i%8), Source: "127.0.0.1", SessionID: fmt.Sprintf("session-%d", i%8),
						Tool: "approve_action", Arguments: json.RawMessage(fmt.Sprintf(`{"text":"pending approval","n":%d}`, i)),
						Headers: http.Header{"Authorization": {"Bearer not-a-real-token"}},
					})
					if err != nil {
						b.Fatal(err)
					}
					ids = append(ids, t.ID)
				}
				after := liveHeap()
				perTask = float64(after-before) / float64(n)
				runtime.KeepAlive(ids)
				_ = m.Close()
				_ = st.Close()
			}
			b.ReportMetric(perTask, "heapB/task")
		})
	}
}

// BenchmarkCreateGarbage reports what one task creation allocates (-benchmem B/op) in the
// manager with the memory store and the eight subscribers the server registers (doing
// nothing here): the garbage a held, task-augmented call leaves in the task manager, which
// sets the GC's heap goal and so the private RSS per pending approval. It reports, it asserts
// nothing.
//
//	go test -run '^$' -bench CreateGarbage -benchmem ./internal/tasks/
func BenchmarkCreateGarbage(b *testing.B) {
	m := NewManager(store.NewMemory(), &fakeExec{}, nil, Options{DefaultTTL: time.Hour, MaxTTL: time.Hour})
	defer m.Close()
	for range 8 {
		m.Subscribe(func(Transition) {})
	}
	hdr := http.Header{"Authorization": {"Bearer not-a-real-token"}, "User-Agent": {"bench"}, "Accept": {"application/json, text/event-stream"}}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		if _, err := m.Create(context.Background(), CreateRequest{
			Owner: "owner", Source: "127.0.0.1", SessionID: "session", Tool: "approve_action",
			Arguments: json.RawMessage(`{"text":"pending approval","n":` + strconv.Itoa(i) + `}`), Headers: hdr,
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
