package notify

import (
	"runtime"
	"testing"
)

// An idle queue costs a pointer a slot: New must not preallocate DefaultQueueSize whole
// entries (about 180 KB) in a process that may never send anything.
func TestNewQueueIsSmallWhileIdle(t *testing.T) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	x := New(Options{})
	runtime.ReadMemStats(&after)
	got := after.TotalAlloc - before.TotalAlloc
	if cap(x.queue) != DefaultQueueSize {
		t.Fatalf("queue capacity %d, want %d", cap(x.queue), DefaultQueueSize)
	}
	if got > 32<<10 {
		t.Errorf("New allocated %d bytes, want at most 32 KiB for an idle queue of %d", got, DefaultQueueSize)
	}
	t.Logf("New allocated %d bytes", got)
	runtime.KeepAlive(x)
}
