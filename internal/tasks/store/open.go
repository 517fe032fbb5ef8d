package store

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

// redisOpenTimeout bounds connecting to Redis at startup.
const redisOpenTimeout = 10 * time.Second

// Open builds the backend config tasks.store selects. lookupEnv answers the secrets kept out
// of the config ($TOLLGATE_REDIS_SENTINEL_PASSWORD); nil means none.
func Open(cfg config.Store, lookupEnv func(string) (string, bool)) (Store, error) {
	switch cfg.Type {
	case "", "memory":
		return NewMemory(), nil
	case "file":
		f, err := OpenFile(cfg.Path)
		if err != nil {
			return nil, err // not a typed nil inside the interface
		}
		return f, nil
	case "redis":
		// Open runs at startup without a context; bound the connect + PING.
		ctx, cancel := context.WithTimeout(context.Background(), redisOpenTimeout)
		defer cancel()
		r, err := OpenRedisConfig(ctx, RedisConfigOf(cfg, lookupEnv))
		if err != nil {
			return nil, err
		}
		return r, nil
	default:
		return nil, fmt.Errorf("tasks.store.type %q: want memory, file or redis", cfg.Type)
	}
}

// RedisConfigOf is the RedisConfig of tasks.store (its relative paths already resolved), with
// the Sentinel password from lookupEnv (nil: none).
func RedisConfigOf(cfg config.Store, lookupEnv func(string) (string, bool)) RedisConfig {
	rc := RedisConfig{
		URL:              cfg.URL,
		MasterName:       cfg.Sentinel.MasterName,
		SentinelAddrs:    cfg.Sentinel.Addresses,
		SentinelUsername: cfg.Sentinel.Username,
		CAFile:           cfg.TLS.CAFile,
		CertFile:         cfg.TLS.CertFile,
		KeyFile:          cfg.TLS.KeyFile,
		ServerName:       cfg.TLS.ServerName,
	}
	if lookupEnv != nil {
		rc.SentinelPassword, _ = lookupEnv(config.EnvRedisSentinelPassword)
	}
	return rc
}
