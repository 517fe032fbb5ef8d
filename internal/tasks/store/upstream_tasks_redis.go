package store

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// UpstreamTasks binds the ids of tasks the upstream created (2026-07-28 CreateTaskResult) to
// the owner that created them, in a store several replicas share, so a tasks/get, tasks/update
// or tasks/cancel reaching another replica is served there for that owner and no other
// (docs/eras.md). The first binding of an id wins; each expires (the upstream task's TTL).
type UpstreamTasks interface {
	// BindUpstreamTask binds id to owner until expires unless it is bound already, and
	// returns the owner it is bound to.
	BindUpstreamTask(ctx context.Context, id, owner string, expires time.Time) (string, error)
	// UpstreamTaskOwner returns the owner id is bound to; ok is false for an unbound or
	// expired id.
	UpstreamTaskOwner(ctx context.Context, id string) (owner string, ok bool, err error)
}

var _ UpstreamTasks = (*Redis)(nil)

// MaxUpstreamTaskTTL bounds how long a binding is kept, whatever the upstream's task TTL.
const MaxUpstreamTaskTTL = 24 * time.Hour

// The binding is the string P ut:<id> = owner, set with NX and an expiry, so Redis drops it
// when it ends even if no replica runs.
var redisBindUpstreamTask = redis.NewScript(luaCommon + `
local k = P .. 'ut:' .. ARGV[2]
if redis.call('SET', k, ARGV[3], 'NX', 'PX', ARGV[4]) then return ARGV[3] end
return redis.call('GET', k)
`)

func (r *Redis) BindUpstreamTask(ctx context.Context, id, owner string, expires time.Time) (string, error) {
	if r.closed.Load() {
		return "", ErrClosed
	}
	ttl := min(time.Until(expires), MaxUpstreamTaskTTL)
	if ttl < time.Second {
		ttl = time.Second
	}
	got, err := redisBindUpstreamTask.Run(ctx, r.client, nil, r.prefix, id, owner, strconv.FormatInt(ttl.Milliseconds(), 10)).Text()
	if err != nil {
		return "", r.wrap("bind upstream task", "", err)
	}
	return got, nil
}

func (r *Redis) UpstreamTaskOwner(ctx context.Context, id string) (string, bool, error) {
	if r.closed.Load() {
		return "", false, ErrClosed
	}
	owner, err := r.client.Get(ctx, r.prefix+"ut:"+id).Result()
	if err == redis.Nil {
		return "", false, nil
	}
	if err != nil {
		return "", false, r.wrap("upstream task owner", "", err)
	}
	return owner, true, nil
}
