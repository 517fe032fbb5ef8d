// Package store persists Tollgate's approval tasks. A Store keeps opaque task bytes plus the
// few fields it must index (owner, state, pending flag, argument bytes) and updates them with
// compare-and-swap on a version, so concurrent approve / reject / cancel / expiry resolve to
// exactly one outcome (docs/contract.md §3).
//
// The package does not import package tasks (which imports it); it never decodes Data.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors every backend returns (compare with errors.Is).
var (
	ErrNotFound        = errors.New("store: task not found")
	ErrExists          = errors.New("store: task id already exists")
	ErrVersionConflict = errors.New("store: version conflict")
	ErrClosed          = errors.New("store: closed")
)

// Record is one stored task.
type Record struct {
	ID    string
	Owner string
	// Source is who created the record (package source: identity, address or IPv6 /64), for
	// the per-source pending quota; "" counts towards no source. Kept by Update like Owner.
	Source    string
	State     string // internal state name; indexed for listing
	Pending   bool   // not terminal: counts towards the pending quotas
	CreatedAt time.Time
	ExpiresAt time.Time // CreatedAt + TTL
	ArgBytes  int64     // size of the stored arguments; counts towards MaxStoredBytes while pending
	Version   uint64    // set by the store: 1 on Create, +1 on every Update
	Data      []byte    // encoded task, opaque to the store; callers must not modify it
	// Key is an idempotency key ("" = none), set on creation and kept by Update: see
	// CreateOrAttach.
	Key string
	// Delivered: the task's outcome has reached its owner, so its key's next call is a new
	// call (CreateOrAttach never attaches to it). Set by Update, never cleared by Tollgate.
	Delivered bool
}

// Limits are checked atomically with the insert in Create; a zero field means unlimited.
type Limits struct {
	MaxPendingPerOwner  int
	MaxPendingPerSource int // pending records with the same non-empty Source
	MaxPendingTotal     int
	MaxArgBytes         int64 // one task's ArgBytes
	MaxStoredBytes      int64 // sum of ArgBytes over pending tasks
	// MaxStoredBytesPerSource bounds that sum over the pending records with the same
	// non-empty Source: one source's share of MaxStoredBytes.
	MaxStoredBytesPerSource int64
}

// QuotaError is returned by Create when a limit would be exceeded; nothing is stored then.
type QuotaError struct {
	Limit   string // max_pending_per_owner | max_pending_per_source | max_pending_total | max_argument_bytes | max_stored_bytes_per_source | max_stored_bytes
	Current int64  // value before this task
	Max     int64
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("store: quota %s exceeded (current %d, limit %d)", e.Limit, e.Current, e.Max)
}

// Filter selects records for List. Results are ordered by CreatedAt, then ID.
type Filter struct {
	Owner       string   // "" = every owner
	States      []string // empty = every state
	PendingOnly bool
	Limit       int // 0 = no limit
	// NoData: the records may come without Data (the file backend then reads nothing from
	// its file; the others may carry it anyway), for a caller that reads each one's Data
	// with Get in turn instead of holding every task at once.
	NoData bool
}

// Usage is what the pending quotas count.
type Usage struct {
	PendingOwner int   // pending tasks of the owner asked about
	PendingTotal int   // pending tasks overall
	PendingBytes int64 // argument bytes of pending tasks overall
}

// Store is implemented by every backend (memory, file, redis) and verified by storetest.Run.
type Store interface {
	// Create inserts rec (its Version is ignored; the stored record has Version 1) if rec.ID is
	// new and, when rec.Pending, no limit in lim is exceeded; the check and the insert are atomic.
	Create(ctx context.Context, rec Record, lim Limits) (Record, error)
	// CreateOrAttach is Create for a record with an idempotency key. When the record created
	// last with rec.Key still exists, is not Delivered, and is pending or not yet expired at
	// now (ExpiresAt after now), that record is returned with attached=true and nothing is
	// stored or counted against lim. Otherwise rec is created as by Create and becomes
	// rec.Key's record. The lookup and the insert are atomic, also across replicas sharing the
	// store. rec.Key "" is Create.
	CreateOrAttach(ctx context.Context, rec Record, lim Limits, now time.Time) (stored Record, attached bool, err error)
	// Keyed returns the record created last with the idempotency key, whatever its state,
	// or ErrNotFound (also for key ""). It reads only; CreateOrAttach decides.
	Keyed(ctx context.Context, key string) (Record, error)
	// Get returns the record or ErrNotFound.
	Get(ctx context.Context, id string) (Record, error)
	// Update replaces the record with rec.ID if its version is still expectVersion and returns
	// the stored record (Version expectVersion+1); else ErrVersionConflict or ErrNotFound.
	// Owner, Source, CreatedAt and Key are kept from the stored record.
	Update(ctx context.Context, rec Record, expectVersion uint64) (Record, error)
	// Delete removes the record; deleting a missing id is not an error.
	Delete(ctx context.Context, id string) error
	// List returns the matching records.
	List(ctx context.Context, f Filter) ([]Record, error)
	// Usage reports pending counts for owner and overall.
	Usage(ctx context.Context, owner string) (Usage, error)
	// Page reads the ordered index of pending records (Pager): O(q.Limit), however many are
	// pending.
	Pager
	// Close releases the backend; later calls return ErrClosed.
	Close() error
}

// attachable reports whether a record found under an idempotency key is still the one to
// attach to at now (every backend applies the same rule).
func attachable(r Record, now time.Time) bool {
	return !r.Delivered && (r.Pending || now.Before(r.ExpiresAt))
}

// Shared is implemented by backends several Tollgate replicas use at once (Redis). A replica
// must then not treat another replica's executing tasks as interrupted, and must not rely on
// in-process notifications alone.
type Shared interface {
	Shared() bool
}

// IsShared reports whether st is used by several replicas.
func IsShared(st Store) bool {
	s, ok := st.(Shared)
	return ok && s.Shared()
}

// Watcher is implemented by shared backends that announce committed updates (Redis pub/sub),
// so a replica waiting on a task (its call waiting for the owner's answer, a tasks/result) is
// woken when another replica changes it. Watch blocks, calling fn with each updated id, until
// ctx ends; announcements may be lost, so waiters still poll, more slowly.
type Watcher interface {
	Watch(ctx context.Context, fn func(id string)) error
}

// Checker is implemented by backends whose health can change while Tollgate runs (Redis, the
// file store). The server probes it in the background, bounded in time, for /readyz
// (docs/operations.md "Health"); it is never called per request.
type Checker interface {
	// Check returns an error when the store cannot take a write now (unreachable, stalled,
	// refusing writes, disk full). lost reports that the store answers but no longer holds
	// what it held at the previous Check (Redis restarted without persistence, or flushed):
	// the tasks stored before are gone.
	Check(ctx context.Context) (lost bool, err error)
}
