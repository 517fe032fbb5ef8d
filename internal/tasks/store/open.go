package store

import (
	"fmt"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

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
		// Not built yet; failing loudly beats silently running single-replica in memory.
		return nil, fmt.Errorf("tasks.store.type redis is not supported yet")
	default:
		return nil, fmt.Errorf("tasks.store.type %q: want memory, file or redis", cfg.Type)
	}
}
