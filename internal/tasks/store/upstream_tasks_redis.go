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
// Bindings are bounded per source (the creating request's source, package source) and in
// total across the replicas: a source past its share gives way with its own binding that
// expires soonest, and at the total the source holding the most does, never one holding
// fewer than the binding's own source.
type UpstreamTasks interface {
	// BindUpstreamTask binds id to owner for source src until expires unless it is bound
	// already, and returns the owner it is bound to.
	BindUpstreamTask(ctx context.Context, src, id, owner string, expires time.Time) (string, error)
	// UpstreamTaskOwner returns the owner id is bound to and when the binding ends; ok is
	// false for an unbound or expired id.
	UpstreamTaskOwner(ctx context.Context, id string) (owner string, expires time.Time, ok bool, err error)
}

var _ UpstreamTasks = (*Redis)(nil)

// MaxUpstreamTaskTTL bounds how long a binding is kept, whatever the upstream's task TTL.
const MaxUpstreamTaskTTL = 24 * time.Hour

// Defaults of LimitUpstreamTasks (tasks.quotas.max_upstream_tasks_per_source, _total).
const (
	DefaultUpstreamTasksPerSource = 1000
	DefaultUpstreamTasksTotal     = 100000
)

type upstreamTaskLimits struct {
	perSource, total int
	evicted          func(reason, source string)
}

// LimitUpstreamTasks sets the bounds of the upstream task bindings (both > 0; before use).
// evicted, if not nil, is called with "source_share" or "total" and the source that held it
// for each binding that gave way to a new one.
func (r *Redis) LimitUpstreamTasks(perSource, total int, evicted func(reason, source string)) {
	r.upTasks = upstreamTaskLimits{perSource: perSource, total: total, evicted: evicted}
}

// A binding is the string P ut:<id> = owner, set with NX and an expiry, so Redis drops it when
// it ends even if no replica runs. Its share is kept in three sets: P uts:<source> (ids by
// expiry), P utall ("<source>\n<id>" by expiry) and P utn (sources by how many they hold).
// Each binding first drops (a bounded number of) expired members, then makes room.
var redisBindUpstreamTask = redis.NewScript(luaCommon + `
local id, owner, ttl, src = ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
local perSource, total = tonumber(ARGV[6]), tonumber(ARGV[7])
local k = P .. 'ut:' .. id
if not redis.call('SET', k, owner, 'NX', 'PX', ttl) then return {redis.call('GET', k), '', ''} end
local now = nowms()
local function drop(s, i, del)
  redis.call('ZREM', P .. 'utall', s .. '\n' .. i)
  redis.call('ZREM', P .. 'uts:' .. s, i)
  if tonumber(redis.call('ZINCRBY', P .. 'utn', -1, s)) <= 0 then redis.call('ZREM', P .. 'utn', s) end
  if del then redis.call('DEL', P .. 'ut:' .. i) end
end
for _, m in ipairs(redis.call('ZRANGEBYSCORE', P .. 'utall', '-inf', now, 'LIMIT', 0, 64)) do
  local nl = string.find(m, '\n', 1, true)
  drop(string.sub(m, 1, nl - 1), string.sub(m, nl + 1), false)
end
local own = tonumber(redis.call('ZSCORE', P .. 'utn', src) or '0')
local reason, victim = '', nil
if own >= perSource then
  reason, victim = 'source_share', src
elseif redis.call('ZCARD', P .. 'utall') >= total then
  reason, victim = 'total', src
  local top = redis.call('ZREVRANGE', P .. 'utn', 0, 0, 'WITHSCORES')
  if top[1] and tonumber(top[2]) > own then victim = top[1] end
end
if victim then
  local gone = redis.call('ZRANGE', P .. 'uts:' .. victim, 0, 0, 'WITHSCORES')
  if not gone[1] then
    reason = ''
  elseif tonumber(gone[2]) <= now then
    -- expired, left by the bounded pruning: only its place is taken (its id may be bound anew)
    drop(victim, gone[1], false)
    reason = ''
  else
    drop(victim, gone[1], true)
  end
end
local exp = now + ttl
redis.call('ZADD', P .. 'utall', exp, src .. '\n' .. id)
-- counted once: a member left expired for this id (bounded pruning) is only moved
if redis.call('ZADD', P .. 'uts:' .. src, exp, id) == 1 then redis.call('ZINCRBY', P .. 'utn', 1, src) end
local keep = ARGV[8]
redis.call('PEXPIRE', P .. 'uts:' .. src, keep)
redis.call('PEXPIRE', P .. 'utall', keep)
redis.call('PEXPIRE', P .. 'utn', keep)
return {owner, reason, victim or ''}
`)

func (r *Redis) BindUpstreamTask(ctx context.Context, src, id, owner string, expires time.Time) (string, error) {
	if r.closed.Load() {
		return "", ErrClosed
	}
	ttl := min(time.Until(expires), MaxUpstreamTaskTTL)
	if ttl < time.Second {
		ttl = time.Second
	}
	lim := r.upTasks
	if lim.perSource <= 0 {
		lim.perSource = DefaultUpstreamTasksPerSource
	}
	if lim.total <= 0 {
		lim.total = DefaultUpstreamTasksTotal
	}
	got, err := redisBindUpstreamTask.Run(ctx, r.client, nil, r.prefix, id, owner, strconv.FormatInt(ttl.Milliseconds(), 10), src,
		lim.perSource, lim.total, strconv.FormatInt(MaxUpstreamTaskTTL.Milliseconds()+60_000, 10)).StringSlice()
	if err != nil {
		return "", r.wrap("bind upstream task", "", err)
	}
	if len(got) != 3 {
		return "", r.wrap("bind upstream task", "", redis.Nil)
	}
	if got[1] != "" && lim.evicted != nil {
		lim.evicted(got[1], got[2])
	}
	return got[0], nil
}

func (r *Redis) UpstreamTaskOwner(ctx context.Context, id string) (string, time.Time, bool, error) {
	if r.closed.Load() {
		return "", time.Time{}, false, ErrClosed
	}
	var get *redis.StringCmd
	var ttl *redis.DurationCmd
	_, err := r.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		get, ttl = p.Get(ctx, r.prefix+"ut:"+id), p.PTTL(ctx, r.prefix+"ut:"+id)
		return nil
	})
	owner, gerr := get.Result()
	if gerr == redis.Nil {
		return "", time.Time{}, false, nil
	}
	if err != nil {
		return "", time.Time{}, false, r.wrap("upstream task owner", "", err)
	}
	left := ttl.Val()
	if left <= 0 { // every binding is set with an expiry: none left means it just ended
		return "", time.Time{}, false, nil
	}
	return owner, time.Now().Add(left), true, nil
}
