package store

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

// redisOpenTimeout bounds connecting to Redis at startup.
const redisOpenTimeout = 10 * time.Second

// Open builds the backend config tasks.store selects.
func Open(cfg config.Store) (Store, error) {
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
		r, err := OpenRedis(ctx, cfg.URL)
		if err != nil {
			return nil, err
		}
		return r, nil
	default:
		return nil, fmt.Errorf("tasks.store.type %q: want memory, file or redis", cfg.Type)
	}
}
