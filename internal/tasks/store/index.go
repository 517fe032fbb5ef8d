package store

import (
	"math"
	"slices"
	"strings"
	"time"
	"unique"
)

// index is the in-process table behind the memory and file backends: records by id plus the
// pending counters the quotas need, kept in step on every change. Callers hold a lock.
type index struct {
	recs map[string]*entry
	// data holds the encoded tasks of the memory backend; the file backend reads them from
	// its file, so its entries carry no slice header.
	data         map[string][]byte
	keys         map[string]string // idempotency key → id of the record created last with it
	pendingOwner map[string]int
	// pendingSource counts pending records by non-empty Source.
	pendingSource map[string]int
	// pendingSourceBytes sums ArgBytes of pending records by non-empty Source.
	pendingSourceBytes map[string]int64
	pendingTotal       int
	pendingBytes       int64
	// order holds the pending records by state, CreatedAt and ID (Page).
	order map[string]*orderedSet
}

// entry is a Record as the index keeps it, for the pending task the process holds most of:
// the id is the map's key, the owner, source and state are interned (one copy per distinct
// value, not one per task: the owner string is built per request), times are Unix
// nanoseconds, and the encoded task is elsewhere (index.data, memory backend only): 80 bytes
// instead of Record's 176. The map holds a pointer: a map stores values of this size inline,
// and its empty slots after growing would then cost more than the pointer does.
type entry struct {
	owner, source, state unique.Handle[string]
	key                  string
	created, expires     int64
	argBytes             int64
	version              uint64
	pending, delivered   bool
}

func toEntry(r Record) *entry {
	return &entry{owner: unique.Make(r.Owner), source: unique.Make(r.Source), state: unique.Make(r.State), key: r.Key,
		created: unixNano(r.CreatedAt), expires: unixNano(r.ExpiresAt), argBytes: r.ArgBytes,
		version: r.Version, pending: r.Pending, delivered: r.Delivered}
}

func (e *entry) record(id string, data []byte) Record {
	return Record{ID: id, Owner: e.owner.Value(), Source: e.source.Value(), State: e.state.Value(),
		Pending: e.pending, CreatedAt: fromUnixNano(e.created), ExpiresAt: fromUnixNano(e.expires),
		ArgBytes: e.argBytes, Version: e.version, Data: data, Key: e.key, Delivered: e.delivered}
}

// zeroTime stands for the zero time.Time, which has no Unix nanoseconds.
const zeroTime = math.MinInt64

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return zeroTime
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == zeroTime {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// get returns the record with id.
func (ix *index) get(id string) (Record, bool) {
	e, ok := ix.recs[id]
	if !ok {
		return Record{}, false
	}
	return e.record(id, ix.data[id]), true
}

func newIndex() *index {
	return &index{recs: make(map[string]*entry), data: make(map[string][]byte), keys: make(map[string]string), pendingOwner: make(map[string]int),
		pendingSource: make(map[string]int), pendingSourceBytes: make(map[string]int64), order: make(map[string]*orderedSet)}
}

// attached returns the record to attach to for key at now, if any.
func (ix *index) attached(key string, now time.Time) (Record, bool) {
	if key == "" {
		return Record{}, false
	}
	r, ok := ix.get(ix.keys[key])
	if !ok || !attachable(r, now) {
		return Record{}, false
	}
	return r, true
}

// keyed returns the record key points to, whatever its state.
func (ix *index) keyed(key string) (Record, bool) {
	if key == "" {
		return Record{}, false
	}
	return ix.get(ix.keys[key])
}

// claim makes rec the record of its key: the newest one wins (loading a file in any order).
func (ix *index) claim(rec Record) {
	if rec.Key == "" {
		return
	}
	if id := ix.keys[rec.Key]; id != rec.ID {
		if cur, ok := ix.recs[id]; ok && cur.created > unixNano(rec.CreatedAt) {
			return
		}
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
	src, srcBytes := int64(-1), int64(-1)
	if rec.Source != "" {
		src, srcBytes = int64(ix.pendingSource[rec.Source]), ix.pendingSourceBytes[rec.Source]
	}
	return checkLimits(lim, rec.ArgBytes, int64(ix.pendingOwner[rec.Owner]), src, int64(ix.pendingTotal), ix.pendingBytes, srcBytes)
}

// checkLimits is shared by every backend so they report the same limit names in the same order:
// the narrowest bound first, so the error names the limit this caller hit rather than one
// everybody shares. source and sourceBytes are -1 for a record without a source.
func checkLimits(lim Limits, argBytes, owner, source, total, bytes, sourceBytes int64) error {
	switch {
	case lim.MaxArgBytes > 0 && argBytes > lim.MaxArgBytes:
		return &QuotaError{Limit: "max_argument_bytes", Current: argBytes, Max: lim.MaxArgBytes}
	case lim.MaxPendingPerOwner > 0 && owner >= int64(lim.MaxPendingPerOwner):
		return &QuotaError{Limit: "max_pending_per_owner", Current: owner, Max: int64(lim.MaxPendingPerOwner)}
	case lim.MaxPendingPerSource > 0 && source >= int64(lim.MaxPendingPerSource):
		return &QuotaError{Limit: "max_pending_per_source", Current: source, Max: int64(lim.MaxPendingPerSource)}
	case lim.MaxStoredBytesPerSource > 0 && sourceBytes >= 0 && sourceBytes+argBytes > lim.MaxStoredBytesPerSource:
		return &QuotaError{Limit: "max_stored_bytes_per_source", Current: sourceBytes, Max: lim.MaxStoredBytesPerSource}
	case lim.MaxPendingTotal > 0 && total >= int64(lim.MaxPendingTotal):
		return &QuotaError{Limit: "max_pending_total", Current: total, Max: int64(lim.MaxPendingTotal)}
	case lim.MaxStoredBytes > 0 && bytes+argBytes > lim.MaxStoredBytes:
		return &QuotaError{Limit: "max_stored_bytes", Current: bytes, Max: lim.MaxStoredBytes}
	}
	return nil
}

// checkUpdate validates a CAS update and returns the record as it will be stored.
func (ix *index) checkUpdate(rec Record, expect uint64) (Record, error) {
	old, ok := ix.get(rec.ID)
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
	ix.recs[rec.ID] = toEntry(rec)
	if rec.Data != nil {
		ix.data[rec.ID] = slices.Clone(rec.Data)
	}
	if rec.Pending {
		ix.pendingOwner[rec.Owner]++
		if rec.Source != "" {
			ix.pendingSource[rec.Source]++
			ix.pendingSourceBytes[rec.Source] += rec.ArgBytes
		}
		ix.pendingTotal++
		ix.pendingBytes += rec.ArgBytes
		o := ix.order[rec.State]
		if o == nil {
			o = &orderedSet{}
			ix.order[rec.State] = o
		}
		o.insert(orderKey{created: unixNano(rec.CreatedAt), id: rec.ID})
	}
}

// drop deletes the record with id, and its key's entry when the key points to it.
func (ix *index) drop(id string) {
	if old, ok := ix.recs[id]; ok && old.key != "" && ix.keys[old.key] == id {
		delete(ix.keys, old.key)
	}
	ix.remove(id)
}

// remove takes the record with id out of the table and the counters (put replaces with it).
func (ix *index) remove(id string) {
	e, ok := ix.recs[id]
	if !ok {
		return
	}
	delete(ix.recs, id)
	delete(ix.data, id)
	if e.pending {
		owner, source := e.owner.Value(), e.source.Value()
		if ix.pendingOwner[owner]--; ix.pendingOwner[owner] <= 0 {
			delete(ix.pendingOwner, owner)
		}
		if source != "" {
			if ix.pendingSource[source]--; ix.pendingSource[source] <= 0 {
				delete(ix.pendingSource, source)
			}
			if ix.pendingSourceBytes[source] -= e.argBytes; ix.pendingSourceBytes[source] <= 0 {
				delete(ix.pendingSourceBytes, source)
			}
		}
		ix.pendingTotal--
		ix.pendingBytes -= e.argBytes
		if o := ix.order[e.state.Value()]; o != nil {
			if o.remove(orderKey{created: e.created, id: id}); o.n == 0 {
				delete(ix.order, e.state.Value())
			}
		}
	}
}

// page reads up to q.Limit entries of the order after q.After: the records (without Data for
// the file backend, which fills it) and the last entry read.
func (ix *index) page(q PageQuery) PageResult {
	var res PageResult
	o := ix.order[q.State]
	if o == nil {
		return res
	}
	var after *orderKey
	if q.After != nil {
		k := keyOf(*q.After)
		after = &k
	}
	keys := o.page(after, q.Newest, max(q.Limit, 1))
	if len(keys) == 0 {
		return res
	}
	res.Records = make([]Record, 0, len(keys))
	for _, k := range keys {
		if r, ok := ix.get(k.id); ok {
			res.Records = append(res.Records, r)
		}
	}
	res.Last = keys[len(keys)-1].position()
	return res
}

func (ix *index) list(f Filter) []Record {
	var out []Record
	for id, e := range ix.recs {
		if r := e.record(id, ix.data[id]); matches(r, f) {
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
