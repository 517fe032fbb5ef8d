package server

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store/storetest"
)

// stalled is a store whose Check never answers (a Redis stopped with SIGSTOP).
type stalled struct{ store.Store }

func (stalled) Check(ctx context.Context) (bool, error) { <-ctx.Done(); return false, ctx.Err() }

// TestStoreHealth: the background probe's view of the store, as /readyz shows it: nothing
// while it answers; "not answering" (logged once at WARN) while down or stalled, bounded by
// the probe timeout; cleared when it answers again.
func TestStoreHealth(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	f := storetest.NewFailing(store.NewMemory())
	h := newStoreHealth(f, log)
	ctx := context.Background()
	h.probe(ctx)
	if d := h.degraded(); len(d) != 0 {
		t.Fatalf("store up: %q", d)
	}
	f.SetDown(true)
	h.probe(ctx)
	h.probe(ctx)
	d := h.degraded()
	if len(d) != 1 || !strings.HasPrefix(d[0], "task store: not answering: ") || !strings.Contains(d[0], "approvals cannot be created or decided") {
		t.Fatalf("store down: %q", d)
	}
	if n := strings.Count(logs.String(), "task store unavailable"); n != 1 {
		t.Errorf("%d WARN lines for one outage, want 1:\n%s", n, logs.String())
	}
	f.SetDown(false)
	h.probe(ctx)
	if d := h.degraded(); len(d) != 0 {
		t.Fatalf("store back: %q", d)
	}
	if !strings.Contains(logs.String(), "task store is back") {
		t.Error("no line saying the store is back")
	}

	s := newStoreHealth(stalled{store.NewMemory()}, log)
	s.probe(ctx)
	if d := s.degraded(); len(d) != 1 || !strings.Contains(d[0], "no answer within 2s") {
		t.Fatalf("store stalled: %q", d)
	}

	if newStoreHealth(store.NewMemory(), log).degraded() != nil {
		t.Error("the memory store has nothing to probe")
	}
}

// TestRedisWithoutPersistenceWarns: opening a Redis store that keeps nothing across a restart
// logs a WARN at start saying so and what to set.
func TestRedisWithoutPersistenceWarns(t *testing.T) {
	rs := storetest.StartRedis(t) // --save "" --appendonly no
	cfg := &config.Config{Sources: []config.Source{{URL: "http://127.0.0.1:3000/mcp"}}}
	cfg.Tasks.Store = config.Store{Type: config.StoreRedis, URL: rs.URL() + "?key_prefix=warn:"}
	var logs bytes.Buffer
	st, err := openStore(cfg, func(string) (string, bool) { return "", false }, slog.New(slog.NewJSONHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !strings.Contains(logs.String(), `"level":"WARN","msg":"task store: Redis is not set up to keep tasks: no persistence`) {
		t.Errorf("no start-up WARN for a Redis without persistence:\n%s", logs.String())
	}
}
