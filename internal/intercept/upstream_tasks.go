package intercept

import (
	"context"
	"encoding/json"
	"time"
)

// UpstreamTaskStore is the part of a shared task store that keeps upstream task ids bound to
// their creators (store.UpstreamTasks).
type UpstreamTaskStore interface {
	BindUpstreamTask(ctx context.Context, id, owner string, expires time.Time) (string, error)
	UpstreamTaskOwner(ctx context.Context, id string) (owner string, ok bool, err error)
}

// upstreamTaskStoreWithin bounds one store round trip for a binding.
const upstreamTaskStoreWithin = 2 * time.Second

// bindUpstreamTaskID binds the id of an upstream CreateTaskResult (result) to owner: in this
// process, and in the shared store for the task's TTL (ttlMs, else tasks.max_ttl) so another
// replica serves it to owner alone. The first binding wins everywhere.
func (g *Gateway) bindUpstreamTaskID(id, owner string, result json.RawMessage) {
	g.modern.upTasks.bind(id, owner)
	if g.d.UpstreamTasks == nil {
		return
	}
	ttl := g.d.Snapshots.Load().Config.Tasks.MaxTTL.D()
	var r struct {
		TTLMs int64 `json:"ttlMs"`
	}
	if json.Unmarshal(result, &r) == nil && r.TTLMs > 0 {
		ttl = min(ttl, time.Duration(r.TTLMs)*time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), upstreamTaskStoreWithin)
	defer cancel()
	if _, err := g.d.UpstreamTasks.BindUpstreamTask(ctx, id, owner, time.Now().Add(ttl)); err != nil {
		// Served by this replica still; another one answers "not found" for it.
		g.log.Warn("task store: binding an upstream task failed", "error", err.Error())
	}
}

// upstreamTaskOwner is the owner an upstream task id is bound to: this process's binding, else
// the shared store's (remembered here once found).
func (g *Gateway) upstreamTaskOwner(ctx context.Context, id string) (string, bool) {
	if owner, ok := g.modern.upTasks.lookup(id); ok {
		return owner, true
	}
	if g.d.UpstreamTasks == nil {
		return "", false
	}
	ctx, cancel := context.WithTimeout(ctx, upstreamTaskStoreWithin)
	defer cancel()
	owner, ok, err := g.d.UpstreamTasks.UpstreamTaskOwner(ctx, id)
	if err != nil {
		g.log.Warn("task store: reading an upstream task's owner failed", "error", err.Error())
		return "", false
	}
	if ok {
		g.modern.upTasks.bind(id, owner)
	}
	return owner, ok
}
