package intercept

import (
	"context"
	"encoding/json"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-mcp/tollgate/internal/disclose"
	"github.com/tollgate-mcp/tollgate/internal/logcap"
	"github.com/tollgate-mcp/tollgate/internal/source"
)

// UpstreamTaskStore is the part of a shared task store that keeps upstream task ids bound to
// their creators (store.UpstreamTasks), bounded per source and in total across replicas.
type UpstreamTaskStore interface {
	BindUpstreamTask(ctx context.Context, src, id, owner string, expires time.Time) (string, error)
	UpstreamTaskOwner(ctx context.Context, id string) (owner string, expires time.Time, ok bool, err error)
}

// The tables of upstream task bindings, the label "table" of
// tollgate_upstream_task_bindings_evicted_total.
const (
	upTasksMemory = "memory" // this process's (upstreamTasks)
	upTasksStore  = "store"  // the shared store's (Deps.UpstreamTasks)
)

// upTasksWarnEvery spaces the warnings that bindings give way: a flood evicts one per new
// task, and one line a minute (with the count held back) says it as well.
const upTasksWarnEvery = time.Minute

// initUpstreamTasks gives the shared store (when there is one) the bounds of the upstream task
// bindings, and exposes how many this process holds.
func (g *Gateway) initUpstreamTasks() {
	g.modern.upTasksWarn = logcap.NewSampler(upTasksWarnEvery, 1)
	if l, ok := g.d.UpstreamTasks.(interface {
		LimitUpstreamTasks(perSource, total int, evicted func(reason, source string))
	}); ok {
		q := g.d.Snapshots.Load().Config.Tasks.Quotas
		l.LimitUpstreamTasks(q.MaxUpstreamTasksPerSource, q.MaxUpstreamTasksTotal, g.upstreamTaskEvicted(upTasksStore))
	}
	if g.d.Registerer != nil {
		g.d.Registerer.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tollgate_upstream_task_bindings",
			Help: "2026-07-28 upstream task ids this process keeps bound to their creators (bounded by tasks.quotas.max_upstream_tasks_total)."},
			func() float64 { return float64(g.upstreamTasks().Len()) }))
	}
}

// upstreamTaskEvicted counts a binding of table that gave way, and warns (sampled) naming the
// source that held it by its hash only: a source may be a caller's identity.
func (g *Gateway) upstreamTaskEvicted(table string) func(reason, src string) {
	return func(reason, src string) {
		g.m.upstreamTaskEvicted(table, reason)
		if ok, held := g.modern.upTasksWarn.Allow(); ok {
			g.log.Warn("upstream task bindings full: an older binding gave way; its creator now gets \"not found\" for that upstream task",
				"table", table, "reason", reason, "source_hash", disclose.OwnerHash(src), "suppressed", held)
		}
	}
}

// upstreamTasks is this process's table of upstream task ids and their owners, bounded per
// source (tasks.quotas.max_upstream_tasks_per_source) and in total (max_upstream_tasks_total,
// read at start): one source creating task after task makes room with its own oldest
// bindings, never with those of a source holding fewer.
func (g *Gateway) upstreamTasks() *source.Shares[string] {
	g.modern.upTasksOnce.Do(func() {
		q := g.d.Snapshots.Load().Config.Tasks.Quotas
		g.modern.upTasks = source.NewShares[string](q.MaxUpstreamTasksPerSource, q.MaxUpstreamTasksTotal, g.upstreamTaskEvicted(upTasksMemory))
	})
	return g.modern.upTasks
}

// upstreamTaskStoreWithin bounds one store round trip for a binding.
const upstreamTaskStoreWithin = 2 * time.Second

// bindUpstreamTaskID binds the id of an upstream CreateTaskResult (result) to owner, created
// by a request of source src, for the task's TTL (ttlMs, else tasks.max_ttl): in the shared
// store first, so another replica serves it to owner alone, then in this process. The first
// binding wins everywhere (a store that has the id bound to another owner already keeps it,
// and so does this process); both are bounded per source and in total.
func (g *Gateway) bindUpstreamTaskID(src, id, owner string, result json.RawMessage) {
	ttl := g.d.Snapshots.Load().Config.Tasks.MaxTTL.D()
	var r struct {
		TTLMs int64 `json:"ttlMs"`
	}
	if json.Unmarshal(result, &r) == nil && r.TTLMs > 0 {
		ttl = min(ttl, time.Duration(r.TTLMs)*time.Millisecond)
	}
	expires := time.Now().Add(ttl)
	if g.d.UpstreamTasks != nil {
		ctx, cancel := context.WithTimeout(context.Background(), upstreamTaskStoreWithin)
		bound, err := g.d.UpstreamTasks.BindUpstreamTask(ctx, src, id, owner, expires)
		cancel()
		switch {
		case err != nil:
			// Served by this replica still; another one answers "not found" for it.
			g.log.Warn("task store: binding an upstream task failed", "error", err.Error())
		case bound != owner:
			owner = bound // another replica bound the id first
		}
	}
	g.upstreamTasks().Put(src, id, owner, expires)
}

// upstreamTaskOwner is the owner an upstream task id is bound to: this process's binding, else
// the shared store's (remembered here once found).
func (g *Gateway) upstreamTaskOwner(ctx context.Context, id string) (string, bool) {
	if owner, ok := g.upstreamTasks().Get(id); ok {
		return owner, true
	}
	if g.d.UpstreamTasks == nil {
		return "", false
	}
	ctx, cancel := context.WithTimeout(ctx, upstreamTaskStoreWithin)
	defer cancel()
	owner, expires, ok, err := g.d.UpstreamTasks.UpstreamTaskOwner(ctx, id)
	if err != nil {
		g.log.Warn("task store: reading an upstream task's owner failed", "error", err.Error())
		return "", false
	}
	if ok {
		// remembered here for the source that asks (its share, not the creator's: this
		// replica does not know it), so a flood of lookups still makes room only in its own;
		// until the store's binding ends
		owner = g.upstreamTasks().Put(source.FromContext(ctx), id, owner, expires)
	}
	return owner, ok
}
