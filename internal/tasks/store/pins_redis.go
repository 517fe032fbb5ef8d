package store

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/redis/go-redis/v9"
)

// The pins live in one hash, P pins: field = tool name, value = encodePin(version, data).
// PutPin's compare-and-swap and the bound on the number of pins run in one script.

// PutPin ARGV: 2 tool, 3 expected version (decimal), 4 new value, 5 max pins (0 = none).
var redisPutPin = redis.NewScript(luaCommon + `
local k = P .. 'pins'
local cur = redis.call('HGET', k, ARGV[2])
local v = 0
if cur then
  v = 0
  for i = 1, 8 do v = v * 256 + string.byte(cur, i) end
end
if v ~= tonumber(ARGV[3]) then return 'conflict' end
local max = tonumber(ARGV[5])
if not cur and max > 0 then
  local n = redis.call('HLEN', k)
  if n >= max then return 'quota:' .. n end
end
redis.call('HSET', k, ARGV[2], ARGV[4])
return 'ok'
`)

func (r *Redis) GetPin(ctx context.Context, tool string) (PinRecord, error) {
	if r.closed.Load() {
		return PinRecord{}, ErrClosed
	}
	v, err := r.client.HGet(ctx, r.prefix+"pins", tool).Bytes()
	if errors.Is(err, redis.Nil) {
		return PinRecord{}, ErrNotFound
	}
	if err != nil {
		return PinRecord{}, r.wrap("get pin", "", err)
	}
	return decodePin(tool, v)
}

func (r *Redis) ListPins(ctx context.Context) ([]PinRecord, error) {
	if r.closed.Load() {
		return nil, ErrClosed
	}
	m, err := r.client.HGetAll(ctx, r.prefix+"pins").Result()
	if err != nil {
		return nil, r.wrap("list pins", "", err)
	}
	out := make([]PinRecord, 0, len(m))
	for tool, v := range m {
		rec, err := decodePin(tool, []byte(v))
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tool < out[j].Tool })
	return out, nil
}

func (r *Redis) PutPin(ctx context.Context, rec PinRecord, expect uint64, maxPins int) (PinRecord, error) {
	if r.closed.Load() {
		return PinRecord{}, ErrClosed
	}
	rec.Version = expect + 1
	res, err := redisPutPin.Run(ctx, r.client, nil, r.prefix, rec.Tool, expect, encodePin(rec.Version, rec.Data), maxPins).Text()
	if err != nil {
		return PinRecord{}, r.wrap("put pin", "", err)
	}
	switch {
	case res == "ok":
		rec.Data = append([]byte(nil), rec.Data...)
		return rec, nil
	case res == "conflict":
		return PinRecord{}, ErrVersionConflict
	default:
		var n int
		_, _ = fmt.Sscanf(res, "quota:%d", &n)
		return PinRecord{}, pinQuota(n, maxPins)
	}
}

func (r *Redis) DeletePin(ctx context.Context, tool string) error {
	if r.closed.Load() {
		return ErrClosed
	}
	if err := r.client.HDel(ctx, r.prefix+"pins", tool).Err(); err != nil {
		return r.wrap("delete pin", "", err)
	}
	return nil
}
