package store

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// The known session set lives in one sorted set, P sessions: member = keyed hash, score = its
// expiry (ms). Passed entries are pruned on every write, the set is cut to MaxKnownSessions
// (soonest expiry first), and the key itself expires with its last member, so Redis cleans up
// even if no replica runs.

// RememberSession ARGV: 2 id, 3 expires ms, 4 max entries.
var redisRememberSession = redis.NewScript(luaCommon + `
local now = nowms()
local k = P .. 'sessions'
redis.call('ZREMRANGEBYSCORE', k, '-inf', ms(now))
local exp = tonumber(ARGV[3])
if exp <= now then
  redis.call('ZREM', k, ARGV[2])
  return 0
end
redis.call('ZADD', k, exp, ARGV[2])
local n = redis.call('ZCARD', k)
local max = tonumber(ARGV[4])
if n > max then redis.call('ZREMRANGEBYRANK', k, 0, n - max - 1) end
local last = redis.call('ZRANGE', k, -1, -1, 'WITHSCORES')
if last[2] then redis.call('PEXPIREAT', k, last[2]) end
return 1
`)

// SessionKnown ARGV: 2 id. Compared with Redis's clock, as the writes are.
var redisSessionKnown = redis.NewScript(luaCommon + `
local s = redis.call('ZSCORE', P .. 'sessions', ARGV[2])
if s and tonumber(s) > nowms() then return 1 end
return 0
`)

func (r *Redis) RememberSession(ctx context.Context, id string, expires time.Time) error {
	if r.closed.Load() {
		return ErrClosed
	}
	if err := redisRememberSession.Run(ctx, r.client, nil, r.prefix, id, unixMs(expires), maxKnownSessions).Err(); err != nil {
		return r.wrap("remember session", "", err)
	}
	return nil
}

func (r *Redis) SessionKnown(ctx context.Context, id string) (bool, error) {
	if r.closed.Load() {
		return false, ErrClosed
	}
	n, err := redisSessionKnown.Run(ctx, r.client, nil, r.prefix, id).Int()
	if err != nil {
		return false, r.wrap("session known", "", err)
	}
	return n == 1, nil
}

func (r *Redis) ForgetSession(ctx context.Context, id string) error {
	if r.closed.Load() {
		return ErrClosed
	}
	if err := r.client.ZRem(ctx, r.prefix+"sessions", id).Err(); err != nil {
		return r.wrap("forget session", "", err)
	}
	return nil
}
