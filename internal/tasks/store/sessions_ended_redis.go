package store

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// The ended sessions live in P sessend (sorted set: id hash → expiry ms), P sessend:h (hash:
// id hash → "by|source"), P sessend:s:<source> (the source's entries by expiry) and
// P sessend:n (sorted set: source → its count). Passed entries are pruned on every write (at
// most 100 at a time); each key expires with its last entry, so Redis cleans up by itself.

// EndSession ARGV: 2 id, 3 by, 4 source, 5 expires ms, 6 max per source, 7 max in total.
var redisEndSession = redis.NewScript(luaCommon + `
local now = nowms()
local k = P .. 'sessend'
local function drop(id)
  local v = redis.call('HGET', k .. ':h', id)
  redis.call('ZREM', k, id)
  redis.call('HDEL', k .. ':h', id)
  if v then
    local src = string.sub(v, string.find(v, '|', 1, true) + 1)
    redis.call('ZREM', k .. ':s:' .. src, id)
    if tonumber(redis.call('ZINCRBY', k .. ':n', -1, src)) <= 0 then redis.call('ZREM', k .. ':n', src) end
  end
end
for _, id in ipairs(redis.call('ZRANGEBYSCORE', k, '-inf', ms(now), 'LIMIT', 0, 100)) do drop(id) end
local id, by, src, exp = ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
drop(id)
if exp <= now then return 0 end
if tonumber(redis.call('ZSCORE', k .. ':n', src) or '0') >= tonumber(ARGV[6]) then
  local v = redis.call('ZRANGE', k .. ':s:' .. src, 0, 0)
  if v[1] then drop(v[1]) end
elseif redis.call('ZCARD', k) >= tonumber(ARGV[7]) then
  local top = redis.call('ZREVRANGE', k .. ':n', 0, 0)
  if top[1] then
    local v = redis.call('ZRANGE', k .. ':s:' .. top[1], 0, 0)
    if v[1] then drop(v[1]) end
  end
end
redis.call('ZADD', k, exp, id)
redis.call('HSET', k .. ':h', id, by .. '|' .. src)
redis.call('ZADD', k .. ':s:' .. src, exp, id)
redis.call('ZINCRBY', k .. ':n', 1, src)
for _, key in ipairs({k, k .. ':h', k .. ':n', k .. ':s:' .. src}) do
  if redis.call('PTTL', key) < exp - now then redis.call('PEXPIREAT', key, exp) end
end
return 1
`)

// SessionEnded ARGV: 2 id. Returns {1, by} or {0, ""}.
var redisSessionEnded = redis.NewScript(luaCommon + `
local k = P .. 'sessend'
local s = redis.call('ZSCORE', k, ARGV[2])
if s and tonumber(s) > nowms() then
  local v = redis.call('HGET', k .. ':h', ARGV[2]) or '|'
  return {1, string.sub(v, 1, string.find(v, '|', 1, true) - 1)}
end
return {0, ''}
`)

func (r *Redis) EndSession(ctx context.Context, id, by, source string, expires time.Time) error {
	if r.closed.Load() {
		return ErrClosed
	}
	if err := redisEndSession.Run(ctx, r.client, nil, r.prefix, id, by, source, unixMs(expires), maxEndedPerSource, maxEndedSessions).Err(); err != nil {
		return r.wrap("end session", "", err)
	}
	return nil
}

func (r *Redis) SessionEnded(ctx context.Context, id string) (string, bool, error) {
	if r.closed.Load() {
		return "", false, ErrClosed
	}
	v, err := redisSessionEnded.Run(ctx, r.client, nil, r.prefix, id).Slice()
	if err != nil {
		return "", false, r.wrap("session ended", "", err)
	}
	if len(v) != 2 {
		return "", false, r.wrap("session ended", "", redis.Nil)
	}
	n, _ := v[0].(int64)
	by, _ := v[1].(string)
	return by, n == 1, nil
}
