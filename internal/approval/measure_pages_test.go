package approval

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

// TestMeasureListPage records the figures of docs/SECURITY.md "Measurements" for one page of
// GET /api/v1/approvals over 100 pending requests of 1 MiB arguments each (the real task
// manager, memory store): the body, the bytes allocated serving it, the peak live heap and
// the peak RSS above what the process held before the request. Run with TOLLGATE_MEASURE=1
// (without -race); it asserts nothing. It only uses the API, so it also measures the list
// before arguments were summarised.
func TestMeasureListPage(t *testing.T) {
	if os.Getenv("TOLLGATE_MEASURE") != "1" {
		t.Skip("set TOLLGATE_MEASURE=1 to measure")
	}
	const n, argBytes = 100, 1 << 20
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	wf := func(string) (config.Workflow, bool) {
		return config.Workflow{Timeout: config.Duration(time.Hour), RedactFields: []string{"password"}}, true
	}
	m := tasks.NewManager(store.NewMemory(), okExec{}, nil, tasks.Options{Workflow: wf,
		Quotas: config.Quotas{MaxPendingPerOwner: 1000, MaxPendingPerSource: 1000, MaxPendingTotal: 1000,
			MaxArgumentBytes: 2 << 20, MaxStoredBytes: 1 << 30, MaxStoredBytesPerSource: 1 << 30}})
	defer m.Close()
	for i := range n {
		args := fmt.Sprintf(`{"i":%d,"password":"x","blob":"%s"}`, i, strings.Repeat("a", argBytes))
		if _, err := m.Create(ctx, tasks.CreateRequest{Owner: "session:flooder", RequestedBy: "carol", Tool: "upload",
			Arguments: json.RawMessage(args), Workflow: "default"}); err != nil {
			t.Fatal(err)
		}
	}
	h := NewHandler(m, testAuth(), Options{Workflow: wf})
	for _, path := range []string{"/api/v1/approvals", "/api/v1/approvals?limit=1000"} {
		measurePage(t, h, path)
	}
}

func measurePage(t *testing.T, h http.Handler, path string) {
	runtime.GC()
	debug.FreeOSMemory()
	rssBefore := procStatusKB("VmRSS")
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // resets VmHWM (peak RSS) to now
	heapBefore := liveHeap()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)

	var peak uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			peak = max(peak, liveHeap())
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	})
	req, _ := http.NewRequest(http.MethodGet, path, nil)
	req.Header.Set("Authorization", "Bearer "+aliceToken)
	w := &countingWriter{header: http.Header{}}
	start := time.Now()
	h.ServeHTTP(w, req)
	took := time.Since(start)
	close(stop)
	wg.Wait()
	runtime.ReadMemStats(&ms1)
	t.Logf("GET %s: HTTP %d, body %d bytes, %s; allocated %d MB, peak live heap +%d MB, peak RSS +%d MB (VmHWM %d MB)",
		path, w.status, w.n, took.Round(time.Millisecond), (ms1.TotalAlloc-ms0.TotalAlloc)>>20,
		(max(peak, heapBefore)-heapBefore)>>20, (procStatusKB("VmHWM")-rssBefore)>>10, procStatusKB("VmHWM")>>10)
}

func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// procStatusKB is a field of /proc/self/status in KiB (0 when unreadable).
func procStatusKB(field string) uint64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// countingWriter is a ResponseWriter that counts the body and keeps none of it.
type countingWriter struct {
	header http.Header
	status int
	n      int
}

func (c *countingWriter) Header() http.Header { return c.header }
func (c *countingWriter) WriteHeader(s int)   { c.status = s }
func (c *countingWriter) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	c.n += len(b)
	return len(b), nil
}
