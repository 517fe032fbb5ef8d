package storetest

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

// ErrDown is what a Failing store answers while it is down. It names an address and a file
// path, as a real backend's error does, so tests can check neither reaches a client.
var ErrDown = errors.New("dial tcp 10.9.8.7:6379: connect: connection refused (redis://10.9.8.7:6379/0, /var/lib/tollgate/tasks.db)")

// Failing wraps a store; while Down it fails every call with ErrDown (a store outage).
type Failing struct {
	store.Store
	down   atomic.Bool
	failed atomic.Int64 // calls failed
}

// Failures is how many calls failed so far.
func (f *Failing) Failures() int64 { return f.failed.Load() }

// NewFailing wraps st, up.
func NewFailing(st store.Store) *Failing { return &Failing{Store: st} }

// SetDown starts (true) or ends (false) the outage.
func (f *Failing) SetDown(down bool) { f.down.Store(down) }

func (f *Failing) err() error {
	if f.down.Load() {
		f.failed.Add(1)
		return ErrDown
	}
	return nil
}

func (f *Failing) Create(ctx context.Context, rec store.Record, lim store.Limits) (store.Record, error) {
	if err := f.err(); err != nil {
		return store.Record{}, err
	}
	return f.Store.Create(ctx, rec, lim)
}

func (f *Failing) CreateOrAttach(ctx context.Context, rec store.Record, lim store.Limits, now time.Time) (store.Record, bool, error) {
	if err := f.err(); err != nil {
		return store.Record{}, false, err
	}
	return f.Store.CreateOrAttach(ctx, rec, lim, now)
}

func (f *Failing) Keyed(ctx context.Context, key string) (store.Record, error) {
	if err := f.err(); err != nil {
		return store.Record{}, err
	}
	return f.Store.Keyed(ctx, key)
}

func (f *Failing) Get(ctx context.Context, id string) (store.Record, error) {
	if err := f.err(); err != nil {
		return store.Record{}, err
	}
	return f.Store.Get(ctx, id)
}

func (f *Failing) Update(ctx context.Context, rec store.Record, expect uint64) (store.Record, error) {
	if err := f.err(); err != nil {
		return store.Record{}, err
	}
	return f.Store.Update(ctx, rec, expect)
}

func (f *Failing) Delete(ctx context.Context, id string) error {
	if err := f.err(); err != nil {
		return err
	}
	return f.Store.Delete(ctx, id)
}

func (f *Failing) List(ctx context.Context, fl store.Filter) ([]store.Record, error) {
	if err := f.err(); err != nil {
		return nil, err
	}
	return f.Store.List(ctx, fl)
}

func (f *Failing) Usage(ctx context.Context, owner string) (store.Usage, error) {
	if err := f.err(); err != nil {
		return store.Usage{}, err
	}
	return f.Store.Usage(ctx, owner)
}

// Check fails while down; otherwise it is the wrapped store's Check (nil when it has none).
func (f *Failing) Check(ctx context.Context) (bool, error) {
	if err := f.err(); err != nil {
		return false, err
	}
	if c, ok := f.Store.(store.Checker); ok {
		return c.Check(ctx)
	}
	return false, nil
}

func (f *Failing) Page(ctx context.Context, q store.PageQuery) (store.PageResult, error) {
	if err := f.err(); err != nil {
		return store.PageResult{}, err
	}
	return f.Store.Page(ctx, q)
}
