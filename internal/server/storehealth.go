package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

// Task store probing for /readyz: one bounded check in the background every storeProbeEvery,
// never one per /readyz request (a stalled Redis must not stall the probe, and a probe storm
// must not reach Redis).
const (
	storeProbeEvery   = 5 * time.Second
	storeProbeTimeout = 2 * time.Second
	// storeLostShown is how long /readyz keeps saying that the store came back without its
	// data; the ERROR log line is the lasting record.
	storeLostShown = time.Hour
)

// storeHealth is what the last probe of the task store found.
type storeHealth struct {
	st  store.Checker
	log *slog.Logger
	now func() time.Time

	mu      sync.Mutex
	problem string    // the last probe's failure; "" when it passed
	lostAt  time.Time // when the store was last found without the data it had
}

func newStoreHealth(st store.Store, log *slog.Logger) *storeHealth {
	c, ok := st.(store.Checker)
	if !ok {
		return nil // memory: nothing outside the process can fail
	}
	return &storeHealth{st: c, log: log, now: time.Now}
}

// run probes until ctx ends.
func (h *storeHealth) run(ctx context.Context) {
	if h == nil {
		return
	}
	t := time.NewTicker(storeProbeEvery)
	defer t.Stop()
	for {
		h.probe(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// probe checks the store once, within storeProbeTimeout, and logs each change.
func (h *storeHealth) probe(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, storeProbeTimeout)
	defer cancel()
	lost, err := h.st.Check(pctx)
	if ctx.Err() != nil {
		return // shutting down: not the store's fault
	}
	problem := ""
	if err != nil {
		problem = err.Error()
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(pctx.Err(), context.DeadlineExceeded) {
			problem = fmt.Sprintf("no answer within %s", storeProbeTimeout)
		}
		problem = "not answering: " + problem
	}
	h.mu.Lock()
	was := h.problem
	h.problem = problem
	if lost {
		h.lostAt = h.now()
	}
	h.mu.Unlock()
	switch {
	case problem != "" && was == "":
		h.log.Warn("task store unavailable: approvals cannot be created or decided; forwarded calls still work", "error", problem)
	case problem == "" && was != "":
		h.log.Info("task store is back")
	}
	if lost {
		h.log.Error("TASK STORE LOST ITS DATA: it answers again but without the tasks it held (Redis restarted without persistence, flushed or evicting keys); "+
			"pending approvals, held calls and results stored before are gone. Turn on Redis persistence (docs/operations.md)",
			"marker", "epoch")
	}
}

// degraded is what /readyz says about the store, if anything.
func (h *storeHealth) degraded() []string {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	if h.problem != "" {
		out = append(out, "task store: "+h.problem+"; approvals cannot be created or decided (forwarded calls still work)")
	}
	if !h.lostAt.IsZero() && h.now().Sub(h.lostAt) < storeLostShown {
		out = append(out, "task store: came back without its data at "+h.lostAt.UTC().Format(time.RFC3339)+
			"; the tasks pending then are gone (Redis restarted without persistence or was flushed)")
	}
	return out
}
