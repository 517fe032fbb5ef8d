package store

import (
	"context"
	"sync"
	"time"
)

// Memory is the in-process backend (tasks.store.type: memory). Tasks are lost on restart.
type Memory struct {
	mu     sync.Mutex
	ix     *index
	closed bool

	sessions knownSet             // sessions_memory.go
	pins     map[string]PinRecord // pins_memory.go
}

var (
	_ Store = (*Memory)(nil)
	_ Pager = (*Memory)(nil)
)

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory { return &Memory{ix: newIndex()} }

func (m *Memory) Create(ctx context.Context, rec Record, lim Limits) (Record, error) {
	rec.Key = "" // Create never takes a key's place
	r, _, err := m.CreateOrAttach(ctx, rec, lim, time.Time{})
	return r, err
}

func (m *Memory) CreateOrAttach(_ context.Context, rec Record, lim Limits, now time.Time) (Record, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Record{}, false, ErrClosed
	}
	if r, ok := m.ix.attached(rec.Key, now); ok {
		return r, true, nil
	}
	if err := m.ix.checkCreate(rec, lim); err != nil {
		return Record{}, false, err
	}
	rec.Version = 1
	m.ix.put(rec)
	m.ix.claim(rec)
	r, _ := m.ix.get(rec.ID)
	return r, false, nil
}

func (m *Memory) Keyed(_ context.Context, key string) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Record{}, ErrClosed
	}
	r, ok := m.ix.keyed(key)
	if !ok {
		return Record{}, ErrNotFound
	}
	return r, nil
}

func (m *Memory) Get(_ context.Context, id string) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Record{}, ErrClosed
	}
	r, ok := m.ix.get(id)
	if !ok {
		return Record{}, ErrNotFound
	}
	return r, nil
}

func (m *Memory) Update(_ context.Context, rec Record, expect uint64) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Record{}, ErrClosed
	}
	next, err := m.ix.checkUpdate(rec, expect)
	if err != nil {
		return Record{}, err
	}
	m.ix.put(next)
	r, _ := m.ix.get(rec.ID)
	return r, nil
}

func (m *Memory) Delete(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.ix.drop(id)
	return nil
}

func (m *Memory) List(_ context.Context, f Filter) ([]Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	return m.ix.list(f), nil
}

// Page reads one bounded stretch of the ordered index of pending records (Pager).
func (m *Memory) Page(_ context.Context, q PageQuery) (PageResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return PageResult{}, ErrClosed
	}
	return m.ix.page(q), nil
}

func (m *Memory) Usage(_ context.Context, owner string) (Usage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Usage{}, ErrClosed
	}
	return m.ix.usage(owner), nil
}

func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}
