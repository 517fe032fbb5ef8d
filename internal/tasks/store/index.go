package store

import (
	"slices"
	"strings"
	"time"
)

// index is the in-process table behind the memory and file backends: records by id plus the
// pending counters the quotas need, kept in step on every change. Callers hold a lock.
type index struct {
	recs         map[string]Record
	keys         map[string]string // idempotency key → id of the record created last with it
	pendingOwner map[string]int
	// pendingSource counts pending records by non-empty Source.
	pendingSource map[string]int
	pendingTotal  int
	pendingBytes  int64
}

func newIndex() *index {
	return &index{recs: make(map[string]Record), keys: make(map[string]string), pendingOwner: make(map[string]int),
		pendingSource: make(map[string]int)}
}

// attached returns the record to attach to for key at now, if any.
func (ix *index) attached(key string, now time.Time) (Record, bool) {
	if key == "" {
		return Record{}, false
	}
	r, ok := ix.recs[ix.keys[key]]
	if !ok || !attachable(r, now) {
		return Record{}, false
	}
	return r, true
}

// claim makes rec the record of its key: the newest one wins (loading a file in any order).
func (ix *index) claim(rec Record) {
	if rec.Key == "" {
		return
	}
	if cur, ok := ix.recs[ix.keys[rec.Key]]; ok && cur.ID != rec.ID && cur.CreatedAt.After(rec.CreatedAt) {
		return
	}
	ix.keys[rec.Key] = rec.ID
}

// checkCreate validates an insert without changing anything.
func (ix *index) checkCreate(rec Record, lim Limits) error {
	if _, ok := ix.recs[rec.ID]; ok {
		return ErrExists
	}
	if !rec.Pending {
		return nil
	}
	src := int64(-1)
	if rec.Source != "" {
		src = int64(ix.pendingSource[rec.Source])
	}
	return checkLimits(lim, rec.ArgBytes, int64(ix.pendingOwner[rec.Owner]), src, int64(ix.pendingTotal), ix.pendingBytes)
}

// checkLimits is shared by every backend so they report the same limit names in the same order:
// the narrowest bound first, so the error names the limit this caller hit rather than one
// everybody shares. source is -1 for a record without a source.
func checkLimits(lim Limits, argBytes, owner, source, total, bytes int64) error {
	switch {
	case lim.MaxArgBytes > 0 && argBytes > lim.MaxArgBytes:
		return &QuotaError{Limit: "max_argument_bytes", Current: argBytes, Max: lim.MaxArgBytes}
	case lim.MaxPendingPerOwner > 0 && owner >= int64(lim.MaxPendingPerOwner):
		return &QuotaError{Limit: "max_pending_per_owner", Current: owner, Max: int64(lim.MaxPendingPerOwner)}
	case lim.MaxPendingPerSource > 0 && source >= int64(lim.MaxPendingPerSource):
		return &QuotaError{Limit: "max_pending_per_source", Current: source, Max: int64(lim.MaxPendingPerSource)}
	case lim.MaxPendingTotal > 0 && total >= int64(lim.MaxPendingTotal):
		return &QuotaError{Limit: "max_pending_total", Current: total, Max: int64(lim.MaxPendingTotal)}
	case lim.MaxStoredBytes > 0 && bytes+argBytes > lim.MaxStoredBytes:
		return &QuotaError{Limit: "max_stored_bytes", Current: bytes, Max: lim.MaxStoredBytes}
	}
	return nil
}

// checkUpdate validates a CAS update and returns the record as it will be stored.
func (ix *index) checkUpdate(rec Record, expect uint64) (Record, error) {
	old, ok := ix.recs[rec.ID]
	if !ok {
		return Record{}, ErrNotFound
	}
	if old.Version != expect {
		return Record{}, ErrVersionConflict
	}
	rec.Owner, rec.Source, rec.CreatedAt, rec.Key = old.Owner, old.Source, old.CreatedAt, old.Key
	rec.Version = expect + 1
	return rec, nil
}

// put stores rec, replacing any record with the same id.
func (ix *index) put(rec Record) {
	ix.remove(rec.ID)
	rec.Data = slices.Clone(rec.Data)
	ix.recs[rec.ID] = rec
	if rec.Pending {
		ix.pendingOwner[rec.Owner]++
		if rec.Source != "" {
			ix.pendingSource[rec.Source]++
		}
		ix.pendingTotal++
		ix.pendingBytes += rec.ArgBytes
	}
}

// drop deletes the record with id, and its key's entry when the key points to it.
func (ix *index) drop(id string) {
	if old, ok := ix.recs[id]; ok && old.Key != "" && ix.keys[old.Key] == id {
		delete(ix.keys, old.Key)
	}
	ix.remove(id)
}

// remove takes the record with id out of the table and the counters (put replaces with it).
func (ix *index) remove(id string) {
	old, ok := ix.recs[id]
	if !ok {
		return
	}
	delete(ix.recs, id)
	if old.Pending {
		if ix.pendingOwner[old.Owner]--; ix.pendingOwner[old.Owner] <= 0 {
			delete(ix.pendingOwner, old.Owner)
		}
		if old.Source != "" {
			if ix.pendingSource[old.Source]--; ix.pendingSource[old.Source] <= 0 {
				delete(ix.pendingSource, old.Source)
			}
		}
		ix.pendingTotal--
		ix.pendingBytes -= old.ArgBytes
	}
}

func (ix *index) list(f Filter) []Record {
	var out []Record
	for _, r := range ix.recs {
		if matches(r, f) {
			out = append(out, r)
		}
	}
	sortRecords(out)
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out
}

func (ix *index) usage(owner string) Usage {
	return Usage{PendingOwner: ix.pendingOwner[owner], PendingTotal: ix.pendingTotal, PendingBytes: ix.pendingBytes}
}

func matches(r Record, f Filter) bool {
	if f.Owner != "" && r.Owner != f.Owner {
		return false
	}
	if f.PendingOnly && !r.Pending {
		return false
	}
	return len(f.States) == 0 || slices.Contains(f.States, r.State)
}

func sortRecords(rs []Record) {
	slices.SortFunc(rs, func(a, b Record) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}
