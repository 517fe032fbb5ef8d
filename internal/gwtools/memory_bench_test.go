package gwtools

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/events"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// BenchmarkQueuedTaskEventMemory reports the live heap one queued task_created event keeps
// until a tollgate_await_activity reader takes it — per pending approval, since a session's
// queue holds one per held call (docs/PERFORMANCE.md "Memory per pending approval"). The
// tasks are as the manager announces a held call: awaiting approval with its status message.
func BenchmarkQueuedTaskEventMemory(b *testing.B) {
	const n = 8000
	const console = "http://127.0.0.1:7469/approvals"
	trs := make([]tasks.Transition, n)
	for i := range trs {
		id := fmt.Sprintf("tg_%08d-2d0c-4c53-9a55-6a3f2b1c0d9e", i)
		trs[i] = tasks.Transition{To: tasks.AwaitingApproval, Task: &tasks.Task{
			ID: id, Tool: "delete_file", Workflow: "default", State: tasks.AwaitingApproval, SessionID: fmt.Sprint("s", i%8),
			RequiredApprovals: 1, CreatedAt: time.Now(),
			StatusMessage: tasks.AwaitingMessage("default", id, console, 0, 1),
		}}
	}
	b.ResetTimer()
	var perEvent float64
	for range b.N {
		hub := events.NewHub(events.Options{MaxEventsPerSession: n})
		g := New(nil, hub, nil, Options{ConsoleURL: console})
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for _, tr := range trs {
			g.PublishTaskChange(tr)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perEvent = float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(hub)
	}
	b.ReportMetric(perEvent, "live-B/event")
}
