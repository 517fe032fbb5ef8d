package store

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults for the query parameters OpenRedis understands besides go-redis's own.
const (
	DefaultRedisKeyPrefix = "tollgate:"
	// DefaultRedisExpiryMargin is how long Redis keeps a record past its ExpiresAt (or past its
	// last write, if later) before it drops it by itself. It must exceed tasks.retention, or
	// finished tasks vanish before the sweeper would delete them.
	DefaultRedisExpiryMargin = 24 * time.Hour
)

// Redis is the shared backend (tasks.store.type: redis): several Tollgate replicas use one
// Redis so any of them can answer tasks/get and apply a decision (docs/contract.md §1).
//
// Layout under the key prefix P (Redis 5 or newer, whose scripts may write after TIME; one
// server, not Cluster, since the scripts derive key names from the prefix and the owner):
//
//	P t:<id>        hash: one record (fields below)
//	P ids           zset: every id, scored by its drop deadline (ms)
//	P owner         hash: id -> owner, to clean the owner sets when a record is gone
//	P o:<owner>     zset: the owner's ids, scored by drop deadline
//	P pending       zset: pending ids, scored by drop deadline; ZCARD = pending total
//	P p:<owner>     zset: the owner's pending ids; ZCARD = pending per owner
//	P pbytes        hash: pending id -> ArgBytes
//	P pbytes_total  string: sum of P pbytes
//	P pst:<state>   zset: the pending ids in that state, all scored 0, each as its order member
//	                (redisOrderMember: CreatedAt then id, so ZRANGEBYLEX reads them in order; Page)
//	P pord          hash: pending id -> "<state> <order member>", to take it out of its pst: set
//	P k:<key>       string: id of the record created last with that idempotency key
//	P changed       pub/sub channel: Update publishes the id it changed (Watch)
//	P ut:<id>       string: owner an upstream task id is bound to (upstream_tasks_redis.go)
//	P epoch         string: random marker written once, never expiring (Check): when it is
//	                gone, Redis lost its data (restarted without persistence, flushed)
//
// A record is a hash rather than a JSON blob so the Lua scripts read and bump the version and
// read the owner with HGET/HINCRBY instead of decoding JSON (Redis's Lua numbers are doubles,
// too narrow for nanosecond times), and Data stays byte-exact without base64.
//
// Every change runs as one Lua script, so the quota check and the insert in Create, and the
// version compare and the write in Update, are atomic across replicas. Record keys expire at
// max(ExpiresAt, now)+margin so Redis cleans up even if no replica runs; the index entries
// carry the same deadline as score and the scripts prune the passed ones first, so the
// counters never keep quota for records Redis already dropped.
type Redis struct {
	client  *redis.Client
	prefix  string
	margin  time.Duration
	closed  atomic.Bool
	upTasks upstreamTaskLimits     // LimitUpstreamTasks
	epoch   atomic.Pointer[string] // the marker the last Check found (nil before the first)
}

var (
	_ Store   = (*Redis)(nil)
	_ Shared  = (*Redis)(nil)
	_ Checker = (*Redis)(nil)
	_ Pager   = (*Redis)(nil)
)

// RedisConfig says how to reach Redis (config tasks.store): URL alone names one server;
// with MasterName and SentinelAddrs Tollgate asks those Sentinels for the primary (go-redis's
// failover client, which follows a failover) and URL, if given, names no host and carries
// only scheme, credentials, database and options. The TLS files (PEM) apply to Redis and
// to the Sentinels alike; any of them, or ServerName, turns TLS on.
type RedisConfig struct {
	URL              string
	MasterName       string
	SentinelAddrs    []string
	SentinelUsername string
	SentinelPassword string // never logged, never in an error
	CAFile           string
	CertFile         string
	KeyFile          string
	ServerName       string
}

func (c RedisConfig) sentinel() bool { return c.MasterName != "" || len(c.SentinelAddrs) > 0 }

func (c RedisConfig) tls() bool {
	return c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" || c.ServerName != ""
}

// CheckRedisURL reports whether OpenRedis could parse rawURL, without connecting (tollgate
// validate). The error never contains the URL.
func CheckRedisURL(rawURL string) error {
	return CheckRedisConfig(RedisConfig{URL: rawURL})
}

// CheckRedisConfig reports whether OpenRedisConfig could build a client from c (the URL
// parses, the TLS files load), without connecting. The error never contains the URL.
func CheckRedisConfig(c RedisConfig) error {
	_, _, err := redisOptions(c, &Redis{})
	return err
}

// redisOptions builds the client options of c: one server's, or (Sentinel) the failover
// client's. Exactly one of the two results is non-nil without an error.
func redisOptions(c RedisConfig, r *Redis) (*redis.Options, *redis.FailoverOptions, error) {
	rawURL := c.URL
	if c.sentinel() {
		if c.MasterName == "" || len(c.SentinelAddrs) == 0 {
			return nil, nil, errors.New("redis task store: Sentinel needs both a master name and at least one Sentinel address")
		}
		if rawURL == "" {
			rawURL = "redis://"
			if c.tls() {
				rawURL = "rediss://"
			}
		}
		if u, err := url.Parse(rawURL); err == nil && (u.Host != "" || u.Scheme == "unix") {
			return nil, nil, errors.New("redis task store: tasks.store.url must name no host with Sentinel (the Sentinels name the primary)")
		}
	}
	opt, err := parseRedisURL(rawURL, r)
	if err != nil {
		return nil, nil, err
	}
	if c.tls() {
		if opt.TLSConfig == nil {
			return nil, nil, errors.New("redis task store: tasks.store.tls is set but tasks.store.url is plain redis://; use rediss://")
		}
		if err := applyTLSFiles(opt.TLSConfig, c); err != nil {
			return nil, nil, err
		}
	}
	if !c.sentinel() {
		return opt, nil, nil
	}
	if opt.TLSConfig != nil && c.ServerName == "" {
		// go-redis put the URL's (empty) host there; let each dial verify the address the
		// Sentinels (or the seed list) name instead.
		opt.TLSConfig.ServerName = ""
	}
	fo := &redis.FailoverOptions{
		MasterName:       c.MasterName,
		SentinelAddrs:    slices.Clone(c.SentinelAddrs),
		SentinelUsername: c.SentinelUsername,
		SentinelPassword: c.SentinelPassword,
		ClientName:       opt.ClientName,
		Protocol:         opt.Protocol,
		Username:         opt.Username,
		Password:         opt.Password,
		DB:               opt.DB,
		MaxRetries:       opt.MaxRetries,
		MinRetryBackoff:  opt.MinRetryBackoff,
		MaxRetryBackoff:  opt.MaxRetryBackoff,
		DialTimeout:      opt.DialTimeout,
		ReadTimeout:      opt.ReadTimeout,
		WriteTimeout:     opt.WriteTimeout,
		PoolFIFO:         opt.PoolFIFO,
		PoolSize:         opt.PoolSize,
		PoolTimeout:      opt.PoolTimeout,
		MinIdleConns:     opt.MinIdleConns,
		MaxIdleConns:     opt.MaxIdleConns,
		MaxActiveConns:   opt.MaxActiveConns,
		ConnMaxIdleTime:  opt.ConnMaxIdleTime,
		ConnMaxLifetime:  opt.ConnMaxLifetime,
		TLSConfig:        opt.TLSConfig,

		ContextTimeoutEnabled: opt.ContextTimeoutEnabled,
	}
	return nil, fo, nil
}

// applyTLSFiles loads c's CA bundle, client key pair and server name into tc. Errors name
// the file, never its contents.
func applyTLSFiles(tc *tls.Config, c RedisConfig) error {
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return fmt.Errorf("redis task store: tasks.store.tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("redis task store: tasks.store.tls.ca_file %s: no PEM certificate in it", c.CAFile)
		}
		tc.RootCAs = pool
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return errors.New("redis task store: tasks.store.tls: cert_file and key_file go together")
	}
	if c.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return fmt.Errorf("redis task store: tasks.store.tls cert_file %s / key_file %s: %w", c.CertFile, c.KeyFile, err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	if c.ServerName != "" {
		tc.ServerName = c.ServerName
	}
	if tc.MinVersion == 0 {
		tc.MinVersion = tls.VersionTLS12
	}
	return nil
}

// parseRedisURL takes key_prefix and expiry_margin out of rawURL into r and parses the rest
// with go-redis.
func parseRedisURL(rawURL string, r *Redis) (*redis.Options, error) {
	if rawURL == "" {
		return nil, errors.New("redis task store: empty tasks.store.url")
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, password included
		}
		return nil, fmt.Errorf("redis task store: invalid tasks.store.url: %v", err)
	}
	q := u.Query()
	if q.Has("key_prefix") {
		r.prefix = q.Get("key_prefix")
		q.Del("key_prefix")
	}
	if q.Has("expiry_margin") {
		d, err := time.ParseDuration(q.Get("expiry_margin"))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("redis task store: expiry_margin %q: want a positive duration such as 24h", q.Get("expiry_margin"))
		}
		r.margin = d
		q.Del("expiry_margin")
	}
	u.RawQuery = q.Encode()
	opt, err := redis.ParseURL(u.String())
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("redis task store: invalid tasks.store.url: %v", err)
	}
	return opt, nil
}

// OpenRedis connects to the Redis at rawURL (config tasks.store.url, a go-redis URL such as
// redis://user:pass@host:6379/0 or rediss://…) and pings it. Two extra query parameters are
// taken out before go-redis sees the URL: key_prefix (default "tollgate:"; replicas sharing
// tasks must use the same one) and expiry_margin (a Go duration, default 24h). Errors never
// contain the URL, which may hold a password.
func OpenRedis(ctx context.Context, rawURL string) (*Redis, error) {
	return OpenRedisConfig(ctx, RedisConfig{URL: rawURL})
}

// OpenRedisConfig connects as c says (one server, or the primary the Sentinels name) and
// pings it. Errors never contain the URL or the Sentinel password.
func OpenRedisConfig(ctx context.Context, c RedisConfig) (*Redis, error) {
	r := &Redis{prefix: DefaultRedisKeyPrefix, margin: DefaultRedisExpiryMargin}
	opt, fo, err := redisOptions(c, r)
	if err != nil {
		return nil, err
	}
	where := ""
	if fo != nil {
		r.client = redis.NewFailoverClient(fo)
		where = fmt.Sprintf("the primary %q of the Sentinels %s", fo.MasterName, strings.Join(fo.SentinelAddrs, ", "))
	} else {
		r.client = redis.NewClient(opt)
		where = opt.Addr
	}
	if err := r.client.Ping(ctx).Err(); err != nil {
		_ = r.client.Close()
		return nil, fmt.Errorf("redis task store: cannot reach Redis at %s: %w", where, err)
	}
	if err := r.migrateOrder(ctx); err != nil {
		_ = r.client.Close()
		return nil, err
	}
	return r, nil
}

// Shared reports true: other replicas may hold and change the same tasks (see IsShared).
func (r *Redis) Shared() bool { return true }

// luaCommon is prepended to every script. ARGV[1] is the key prefix.
const luaCommon = `
local P = ARGV[1]
local function nowms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function ms(x) return string.format('%d', x) end
local function unorder(id)
  local o = redis.call('HGET', P .. 'pord', id)
  if o then
    local sp = string.find(o, ' ', 1, true)
    redis.call('ZREM', P .. 'pst:' .. string.sub(o, 1, sp - 1), string.sub(o, sp + 1))
    redis.call('HDEL', P .. 'pord', id)
  end
end
local function order(id, state, ord)
  if ord and ord ~= '' then
    redis.call('ZADD', P .. 'pst:' .. state, 0, ord)
    redis.call('HSET', P .. 'pord', id, state .. ' ' .. ord)
  end
end
local function unpend(id, owner)
  unorder(id)
  if redis.call('ZREM', P .. 'pending', id) == 1 then
    redis.call('ZREM', P .. 'p:' .. owner, id)
    local src = redis.call('HGET', P .. 'source', id)
    if src then redis.call('ZREM', P .. 'ps:' .. src, id) end
    local b = redis.call('HGET', P .. 'pbytes', id)
    redis.call('HDEL', P .. 'pbytes', id)
    if b and redis.call('DECRBY', P .. 'pbytes_total', b) == 0 then redis.call('DEL', P .. 'pbytes_total') end
    if b and src and redis.call('DECRBY', P .. 'psb:' .. src, b) <= 0 then redis.call('DEL', P .. 'psb:' .. src) end
  end
end
local function forget(id)
  local key = redis.call('HGET', P .. 't:' .. id, 'key')
  if key and key ~= '' and redis.call('GET', P .. 'k:' .. key) == id then redis.call('DEL', P .. 'k:' .. key) end
  local owner = redis.call('HGET', P .. 'owner', id)
  if owner then
    unpend(id, owner)
    redis.call('ZREM', P .. 'o:' .. owner, id)
    redis.call('HDEL', P .. 'owner', id)
  end
  redis.call('HDEL', P .. 'source', id)
  redis.call('ZREM', P .. 'ids', id)
  redis.call('DEL', P .. 't:' .. id)
end
-- Drop index entries whose record Redis has expired (bounded, to keep the script short).
local function prune(now)
  local ids = redis.call('ZRANGEBYSCORE', P .. 'ids', '-inf', ms(now), 'LIMIT', 0, 500)
  for _, id in ipairs(ids) do forget(id) end
end
local function index(id, owner, source, pending, bytes, deadline, key, state, ord)
  local d = ms(deadline)
  if source and source ~= '' then redis.call('HSET', P .. 'source', id, source) end
  if key and key ~= '' and redis.call('GET', P .. 'k:' .. key) == id then redis.call('PEXPIREAT', P .. 'k:' .. key, d) end
  redis.call('ZADD', P .. 'ids', d, id)
  redis.call('ZADD', P .. 'o:' .. owner, d, id)
  redis.call('HSET', P .. 'owner', id, owner)
  if pending then
    redis.call('ZADD', P .. 'pending', d, id)
    redis.call('ZADD', P .. 'p:' .. owner, d, id)
    if source and source ~= '' then redis.call('ZADD', P .. 'ps:' .. source, d, id) end
    redis.call('HSET', P .. 'pbytes', id, bytes)
    redis.call('INCRBY', P .. 'pbytes_total', bytes)
    if source and source ~= '' then redis.call('INCRBY', P .. 'psb:' .. source, bytes) end
    order(id, state, ord)
  end
  redis.call('PEXPIREAT', P .. 't:' .. id, d)
end
`

// Create ARGV: 2 id, 3 owner, 4 pending, 5 arg bytes, 6 expires ms, 7 margin ms,
// 8-11 limits (per owner, total, arg bytes, stored bytes), 12 state, 13 created, 14 expires,
// 15 data, 16 idempotency key ("" = none), 17 the caller's now in ms (for the key's record),
// 18 source ("" = none), 19 limit per source, 20 stored bytes per source, 21 delivered,
// 22 order member (redisOrderMember).
var redisCreate = redis.NewScript(luaCommon + `
local now = nowms()
prune(now)
local id, owner, ikey, source = ARGV[2], ARGV[3], ARGV[16], ARGV[18]
if ikey ~= '' then
  local cur = redis.call('GET', P .. 'k:' .. ikey)
  if cur then
    local f = redis.call('HMGET', P .. 't:' .. cur, 'pending', 'expires_ms', 'delivered')
    if f[3] ~= '1' and (f[1] == '1' or (f[2] and tonumber(f[2]) > tonumber(ARGV[17]))) then return {'attached', cur} end
  end
end
local key = P .. 't:' .. id
if redis.call('EXISTS', key) == 1 then return {'exists'} end
forget(id)
local pending = ARGV[4] == '1'
if pending then
  local bytes = tonumber(ARGV[5])
  local o = redis.call('ZCARD', P .. 'p:' .. owner)
  local s, sb = -1, -1
  if source ~= '' then
    s = redis.call('ZCARD', P .. 'ps:' .. source)
    sb = tonumber(redis.call('GET', P .. 'psb:' .. source) or '0')
  end
  local t = redis.call('ZCARD', P .. 'pending')
  local b = tonumber(redis.call('GET', P .. 'pbytes_total') or '0')
  local maxO, maxT, maxA, maxS, maxSrc, maxSB = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11]), tonumber(ARGV[19]), tonumber(ARGV[20])
  if (maxA > 0 and bytes > maxA) or (maxO > 0 and o >= maxO) or (maxSrc > 0 and s >= maxSrc) or (maxT > 0 and t >= maxT) or (maxS > 0 and b + bytes > maxS) or (maxSB > 0 and sb >= 0 and sb + bytes > maxSB) then
    return {'quota', o, s, t, b, sb}
  end
end
redis.call('HSET', key, 'owner', owner, 'source', source, 'state', ARGV[12], 'pending', ARGV[4], 'created_at', ARGV[13],
  'expires_at', ARGV[14], 'expires_ms', ARGV[6], 'arg_bytes', ARGV[5], 'version', '1', 'data', ARGV[15], 'key', ikey,
  'delivered', ARGV[21], 'ord', ARGV[22])
if ikey ~= '' then redis.call('SET', P .. 'k:' .. ikey, id) end
index(id, owner, source, pending, ARGV[5], math.max(tonumber(ARGV[6]), now) + tonumber(ARGV[7]), ikey, ARGV[12], ARGV[22])
return {'ok'}
`)

// Update ARGV: 2 id, 3 expected version, 4 pending, 5 arg bytes, 6 expires ms, 7 margin ms,
// 8 state, 9 expires, 10 data, 11 delivered, 12 order member from the caller's CreatedAt (used
// only for a record an older Tollgate stored without one).
var redisUpdate = redis.NewScript(luaCommon + `
local now = nowms()
local id = ARGV[2]
local key = P .. 't:' .. id
local cur = redis.call('HMGET', key, 'version', 'owner', 'created_at', 'key', 'source', 'ord')
if not cur[1] then return {'notfound'} end
if cur[1] ~= ARGV[3] then return {'conflict'} end
local owner = cur[2]
local ord = cur[6]
if not ord or ord == '' then ord = ARGV[12] end
unpend(id, owner)
redis.call('HSET', key, 'state', ARGV[8], 'pending', ARGV[4], 'expires_at', ARGV[9], 'expires_ms', ARGV[6], 'arg_bytes', ARGV[5], 'data', ARGV[10],
  'delivered', ARGV[11], 'ord', ord)
local v = redis.call('HINCRBY', key, 'version', 1)
index(id, owner, cur[5], ARGV[4] == '1', ARGV[5], math.max(tonumber(ARGV[6]), now) + tonumber(ARGV[7]), cur[4], ARGV[8], ord)
redis.call('PUBLISH', P .. 'changed', id)
return {'ok', owner, cur[3], v, cur[4] or '', cur[5] or ''}
`)

// Delete ARGV: 2 id.
var redisDelete = redis.NewScript(luaCommon + `
forget(ARGV[2])
return 1
`)

// Usage ARGV: 2 owner.
var redisUsage = redis.NewScript(luaCommon + `
prune(nowms())
return {redis.call('ZCARD', P .. 'p:' .. ARGV[2]), redis.call('ZCARD', P .. 'pending'),
  tonumber(redis.call('GET', P .. 'pbytes_total') or '0')}
`)

func (r *Redis) key(id string) string { return r.prefix + "t:" + id }

// wrap maps a client closed underneath a call to ErrClosed.
func (r *Redis) wrap(op, id string, err error) error {
	if errors.Is(err, redis.ErrClosed) || r.closed.Load() {
		return ErrClosed
	}
	if id == "" {
		return fmt.Errorf("redis task store: %s: %w", op, err)
	}
	return fmt.Errorf("redis task store: %s task %s: %w", op, id, err)
}

func redisFlag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// unixMs is the record's expiry for the deadline arithmetic; 0 (the zero time) means "now".
func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return max(t.UnixMilli(), 0)
}

func textTime(t time.Time) (string, error) {
	b, err := t.MarshalText()
	return string(b), err
}

func (r *Redis) Create(ctx context.Context, rec Record, lim Limits) (Record, error) {
	rec.Key = "" // Create never takes a key's place
	out, _, err := r.CreateOrAttach(ctx, rec, lim, time.Time{})
	return out, err
}

// maxAttachTries bounds the retries when the record a key points to is deleted between the
// script and the read that returns it.
const maxAttachTries = 3

func (r *Redis) CreateOrAttach(ctx context.Context, rec Record, lim Limits, now time.Time) (Record, bool, error) {
	for range maxAttachTries {
		out, attachedID, err := r.create(ctx, rec, lim, now)
		if err != nil || attachedID == "" {
			return out, false, err
		}
		got, err := r.Get(ctx, attachedID)
		if errors.Is(err, ErrNotFound) {
			continue // deleted meanwhile: try again
		}
		return got, err == nil, err
	}
	return Record{}, false, fmt.Errorf("redis task store: create task %s: the key's record kept vanishing", rec.ID)
}

// create runs the create script; attachedID is set when the key's record was found instead.
func (r *Redis) create(ctx context.Context, rec Record, lim Limits, now time.Time) (out Record, attachedID string, err error) {
	if r.closed.Load() {
		return Record{}, "", ErrClosed
	}
	created, err := textTime(rec.CreatedAt)
	if err != nil {
		return Record{}, "", fmt.Errorf("redis task store: create task %s: created_at: %w", rec.ID, err)
	}
	expires, err := textTime(rec.ExpiresAt)
	if err != nil {
		return Record{}, "", fmt.Errorf("redis task store: create task %s: expires_at: %w", rec.ID, err)
	}
	res, err := redisCreate.Run(ctx, r.client, nil,
		r.prefix, rec.ID, rec.Owner, redisFlag(rec.Pending), rec.ArgBytes, unixMs(rec.ExpiresAt), r.margin.Milliseconds(),
		lim.MaxPendingPerOwner, lim.MaxPendingTotal, lim.MaxArgBytes, lim.MaxStoredBytes,
		rec.State, created, expires, rec.Data, rec.Key, unixMs(now), rec.Source, lim.MaxPendingPerSource, lim.MaxStoredBytesPerSource,
		redisFlag(rec.Delivered), redisOrderMember(rec.CreatedAt, rec.ID)).Slice()
	if err != nil {
		return Record{}, "", r.wrap("create", rec.ID, err)
	}
	switch redisStatus(res) {
	case "ok":
	case "attached":
		if len(res) == 2 {
			if id, _ := res[1].(string); id != "" {
				return Record{}, id, nil
			}
		}
		return Record{}, "", fmt.Errorf("redis task store: create task %s: unexpected script reply %v", rec.ID, res)
	case "exists":
		return Record{}, "", ErrExists
	case "quota":
		if len(res) == 6 {
			o, src, t, b, sb := redisInt(res[1]), redisInt(res[2]), redisInt(res[3]), redisInt(res[4]), redisInt(res[5])
			if qe := checkLimits(lim, rec.ArgBytes, o, src, t, b, sb); qe != nil {
				return Record{}, "", qe
			}
		}
		return Record{}, "", fmt.Errorf("redis task store: create task %s: quota exceeded (%v)", rec.ID, res)
	default:
		return Record{}, "", fmt.Errorf("redis task store: create task %s: unexpected script reply %v", rec.ID, res)
	}
	rec.Version = 1
	rec.Data = slices.Clone(rec.Data)
	return rec, "", nil
}

func (r *Redis) Get(ctx context.Context, id string) (Record, error) {
	if r.closed.Load() {
		return Record{}, ErrClosed
	}
	m, err := r.client.HGetAll(ctx, r.key(id)).Result()
	if err != nil {
		return Record{}, r.wrap("get", id, err)
	}
	if len(m) == 0 {
		return Record{}, ErrNotFound
	}
	return decodeRedis(id, m)
}

func (r *Redis) Keyed(ctx context.Context, key string) (Record, error) {
	if r.closed.Load() {
		return Record{}, ErrClosed
	}
	if key == "" {
		return Record{}, ErrNotFound
	}
	id, err := r.client.Get(ctx, r.prefix+"k:"+key).Result()
	if errors.Is(err, redis.Nil) {
		return Record{}, ErrNotFound
	}
	if err != nil {
		return Record{}, r.wrap("keyed lookup", "", err)
	}
	return r.Get(ctx, id)
}

func (r *Redis) Update(ctx context.Context, rec Record, expect uint64) (Record, error) {
	if r.closed.Load() {
		return Record{}, ErrClosed
	}
	expires, err := textTime(rec.ExpiresAt)
	if err != nil {
		return Record{}, fmt.Errorf("redis task store: update task %s: expires_at: %w", rec.ID, err)
	}
	res, err := redisUpdate.Run(ctx, r.client, nil,
		r.prefix, rec.ID, strconv.FormatUint(expect, 10), redisFlag(rec.Pending), rec.ArgBytes,
		unixMs(rec.ExpiresAt), r.margin.Milliseconds(), rec.State, expires, rec.Data, redisFlag(rec.Delivered),
		redisOrderMember(rec.CreatedAt, rec.ID)).Slice()
	if err != nil {
		return Record{}, r.wrap("update", rec.ID, err)
	}
	switch redisStatus(res) {
	case "ok":
	case "notfound":
		return Record{}, ErrNotFound
	case "conflict":
		return Record{}, ErrVersionConflict
	}
	if len(res) != 6 {
		return Record{}, fmt.Errorf("redis task store: update task %s: unexpected script reply %v", rec.ID, res)
	}
	owner, _ := res[1].(string)
	createdText, _ := res[2].(string)
	if err := rec.CreatedAt.UnmarshalText([]byte(createdText)); err != nil {
		return Record{}, fmt.Errorf("redis task store: update task %s: created_at: %w", rec.ID, err)
	}
	rec.Owner = owner
	rec.Key, _ = res[4].(string)
	rec.Source, _ = res[5].(string)
	rec.Version = uint64(redisInt(res[3]))
	rec.Data = slices.Clone(rec.Data)
	return rec, nil
}

func (r *Redis) Delete(ctx context.Context, id string) error {
	if r.closed.Load() {
		return ErrClosed
	}
	if err := redisDelete.Run(ctx, r.client, nil, r.prefix, id).Err(); err != nil {
		return r.wrap("delete", id, err)
	}
	return nil
}

// listBatch bounds one pipeline of HGETALLs.
const listBatch = 256

// List reads the narrowest index set for f, then the records in pipelined batches; filtering
// and ordering happen here with the same helpers the other backends use. Ids whose record is
// gone meanwhile (deleted or expired) are skipped.
func (r *Redis) List(ctx context.Context, f Filter) ([]Record, error) {
	if r.closed.Load() {
		return nil, ErrClosed
	}
	set := r.prefix + "ids"
	switch {
	case f.Owner != "" && f.PendingOnly:
		set = r.prefix + "p:" + f.Owner
	case f.Owner != "":
		set = r.prefix + "o:" + f.Owner
	case f.PendingOnly:
		set = r.prefix + "pending"
	}
	ids, err := r.client.ZRange(ctx, set, 0, -1).Result()
	if err != nil {
		return nil, r.wrap("list", "", err)
	}
	var out []Record
	for start := 0; start < len(ids); start += listBatch {
		batch := ids[start:min(start+listBatch, len(ids))]
		cmds := make([]*redis.MapStringStringCmd, len(batch))
		_, err := r.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, id := range batch {
				cmds[i] = p.HGetAll(ctx, r.key(id))
			}
			return nil
		})
		if err != nil {
			return nil, r.wrap("list", "", err)
		}
		for i, c := range cmds {
			m := c.Val()
			if len(m) == 0 {
				continue
			}
			rec, err := decodeRedis(batch[i], m)
			if err != nil {
				return nil, err
			}
			if matches(rec, f) {
				out = append(out, rec)
			}
		}
	}
	sortRecords(out)
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

func (r *Redis) Usage(ctx context.Context, owner string) (Usage, error) {
	if r.closed.Load() {
		return Usage{}, ErrClosed
	}
	res, err := redisUsage.Run(ctx, r.client, nil, r.prefix, owner).Slice()
	if err != nil {
		return Usage{}, r.wrap("usage", "", err)
	}
	if len(res) != 3 {
		return Usage{}, fmt.Errorf("redis task store: usage: unexpected script reply %v", res)
	}
	return Usage{PendingOwner: int(redisInt(res[0])), PendingTotal: int(redisInt(res[1])), PendingBytes: redisInt(res[2])}, nil
}

// Watch calls fn with the id of each task any replica updates (Update publishes it on the
// channel P+"changed", in the same script), until ctx ends or the store is closed. Redis
// pub/sub delivers at most once and not while disconnected: callers keep a slower poll.
func (r *Redis) Watch(ctx context.Context, fn func(id string)) error {
	if r.closed.Load() {
		return ErrClosed
	}
	ps := r.client.Subscribe(ctx, r.prefix+"changed")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil { // the subscription is confirmed
		if ctx.Err() != nil {
			return nil
		}
		return r.wrap("watch", "", err)
	}
	ch := ps.Channel()
	for {
		select {
		case <-ctx.Done():
			return nil
		case msg, ok := <-ch:
			if !ok {
				return nil
			}
			fn(msg.Payload)
		}
	}
}

// Close closes the client; the tasks stay in Redis for the other replicas.
// PersistenceProblems says what in Redis's configuration loses tasks (CONFIG GET appendonly,
// save and maxmemory-policy): no persistence at all (a restart empties it) or an evicting
// policy (keys dropped under memory pressure). An error when CONFIG is refused (renamed or
// disabled, as managed Redis services do, or denied by an ACL): the caller cannot tell then.
func (r *Redis) PersistenceProblems(ctx context.Context) ([]string, error) {
	get := func(name string) (string, error) {
		m, err := r.client.ConfigGet(ctx, name).Result()
		if err != nil {
			return "", err
		}
		return m[name], nil
	}
	aof, err := get("appendonly")
	if err != nil {
		return nil, fmt.Errorf("redis task store: CONFIG GET: %w", err)
	}
	save, err := get("save")
	if err != nil {
		return nil, fmt.Errorf("redis task store: CONFIG GET: %w", err)
	}
	var out []string
	if aof != "yes" && save == "" {
		out = append(out, "no persistence (appendonly no, save \"\"): a Redis restart loses every task")
	}
	if policy, err := get("maxmemory-policy"); err == nil && policy != "" && policy != "noeviction" {
		out = append(out, "maxmemory-policy "+policy+": Redis may evict tasks under memory pressure")
	}
	return out, nil
}

// redisCheck reads the epoch marker, writing it when missing (KEYS[1], ARGV[1] the new
// value). It writes the marker back when present too: a Redis that refuses writes (MISCONF
// after a failed save on a full disk, OOM under maxmemory) fails the check, not only one that
// does not answer. Returns the marker.
var redisCheck = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then v = ARGV[1] end
redis.call('SET', KEYS[1], v)
return v
`)

// Check probes Redis with one small script (the caller bounds it with ctx) and reports, with
// lost, when the epoch marker changed since the previous Check: Redis came back without the
// data it had. Every replica sharing the prefix sees the same marker, so each one notices.
func (r *Redis) Check(ctx context.Context) (lost bool, err error) {
	if r.closed.Load() {
		return false, ErrClosed
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	v, err := redisCheck.Run(ctx, r.client, []string{r.prefix + "epoch"}, hex.EncodeToString(b[:])).Text()
	if err != nil {
		return false, fmt.Errorf("redis task store: %w", err)
	}
	prev := r.epoch.Swap(&v)
	return prev != nil && *prev != v, nil
}

func (r *Redis) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	return r.client.Close()
}

func decodeRedis(id string, m map[string]string) (Record, error) {
	rec := Record{ID: id, Owner: m["owner"], Source: m["source"], State: m["state"], Pending: m["pending"] == "1", Data: []byte(m["data"]), Key: m["key"],
		Delivered: m["delivered"] == "1"}
	var err error
	if rec.ArgBytes, err = strconv.ParseInt(m["arg_bytes"], 10, 64); err != nil {
		return Record{}, fmt.Errorf("redis task store: task %s: arg_bytes: %w", id, err)
	}
	if rec.Version, err = strconv.ParseUint(m["version"], 10, 64); err != nil {
		return Record{}, fmt.Errorf("redis task store: task %s: version: %w", id, err)
	}
	if err := rec.CreatedAt.UnmarshalText([]byte(m["created_at"])); err != nil {
		return Record{}, fmt.Errorf("redis task store: task %s: created_at: %w", id, err)
	}
	if err := rec.ExpiresAt.UnmarshalText([]byte(m["expires_at"])); err != nil {
		return Record{}, fmt.Errorf("redis task store: task %s: expires_at: %w", id, err)
	}
	return rec, nil
}

func redisStatus(res []any) string {
	if len(res) == 0 {
		return ""
	}
	s, _ := res[0].(string)
	return s
}

func redisInt(v any) int64 {
	n, _ := v.(int64)
	return n
}
