package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Page reads up to q.Limit members of the state's order set after q.After (ZRANGEBYLEX, or
// ZREVRANGEBYLEX for Newest), then those records in one pipeline. A member whose record Redis
// has already dropped (past its deadline, not pruned yet) is read but skipped.
func (r *Redis) Page(ctx context.Context, q PageQuery) (PageResult, error) {
	if r.closed.Load() {
		return PageResult{}, ErrClosed
	}
	set := r.prefix + "pst:" + q.State
	by := &redis.ZRangeBy{Min: "-", Max: "+", Count: int64(max(q.Limit, 1))}
	var members []string
	var err error
	if q.Newest {
		if q.After != nil {
			by.Max = "(" + redisOrderMember(q.After.CreatedAt, q.After.ID)
		}
		members, err = r.client.ZRevRangeByLex(ctx, set, by).Result()
	} else {
		if q.After != nil {
			by.Min = "(" + redisOrderMember(q.After.CreatedAt, q.After.ID)
		}
		members, err = r.client.ZRangeByLex(ctx, set, by).Result()
	}
	if err != nil {
		return PageResult{}, r.wrap("page", "", err)
	}
	var res PageResult
	if len(members) == 0 {
		return res, nil
	}
	ids := make([]string, len(members))
	for i, m := range members {
		p, err := parseRedisOrderMember(m)
		if err != nil {
			return PageResult{}, fmt.Errorf("redis task store: page: %w", err)
		}
		ids[i] = p.ID
		if i == len(members)-1 {
			res.Last = &p
		}
	}
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	if _, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, r.key(id))
		}
		return nil
	}); err != nil {
		return PageResult{}, r.wrap("page", "", err)
	}
	res.Records = make([]Record, 0, len(ids))
	for i, c := range cmds {
		m := c.Val()
		if len(m) == 0 {
			continue
		}
		rec, err := decodeRedis(ids[i], m)
		if err != nil {
			return PageResult{}, err
		}
		res.Records = append(res.Records, rec)
	}
	return res, nil
}

// redisOrderAdd puts one pending record an older Tollgate stored into its state's order set
// (ARGV 2 id, 3 order member computed from its created_at). It rereads the record, so a
// record decided or deleted since the caller read it is left alone.
var redisOrderAdd = redis.NewScript(luaCommon + `
local id = ARGV[2]
local f = redis.call('HMGET', P .. 't:' .. id, 'pending', 'state', 'ord')
if f[1] ~= '1' then return 0 end
local ord = f[3]
if not ord or ord == '' then
  ord = ARGV[3]
  redis.call('HSET', P .. 't:' .. id, 'ord', ord)
end
unorder(id)
order(id, f[2], ord)
return 1
`)

// migrateOrder builds the order sets (Page) when they do not hold every pending record (ZCARD
// pending against HLEN pord): a Redis written by a Tollgate without them, or an older replica
// sharing the Redis that created records meanwhile. Each record is added
// by its own script, atomically with a reread, so replicas running meanwhile stay consistent.
func (r *Redis) migrateOrder(ctx context.Context) error {
	pending, err := r.client.ZCard(ctx, r.prefix+"pending").Result()
	if err != nil {
		return r.wrap("verify order index", "", err)
	}
	ordered, err := r.client.HLen(ctx, r.prefix+"pord").Result()
	if err != nil {
		return r.wrap("verify order index", "", err)
	}
	if pending == ordered {
		return nil
	}
	var cursor uint64
	for {
		ids, next, err := r.client.ZScan(ctx, r.prefix+"pending", cursor, "*", listBatch).Result()
		if err != nil {
			return r.wrap("build order index", "", err)
		}
		for i := 0; i+1 < len(ids); i += 2 { // member, score pairs
			if err := r.orderOne(ctx, ids[i]); err != nil {
				return err
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	return nil
}

func (r *Redis) orderOne(ctx context.Context, id string) error {
	created, err := r.client.HGet(ctx, r.key(id), "created_at").Result()
	if errors.Is(err, redis.Nil) {
		return nil // gone meanwhile
	}
	if err != nil {
		return r.wrap("build order index", id, err)
	}
	var rec Record
	if err := rec.CreatedAt.UnmarshalText([]byte(created)); err != nil {
		return fmt.Errorf("redis task store: build order index: task %s: created_at: %w", id, err)
	}
	if err := redisOrderAdd.Run(ctx, r.client, nil, r.prefix, id, redisOrderMember(rec.CreatedAt, id)).Err(); err != nil {
		return r.wrap("build order index", id, err)
	}
	return nil
}
