package source

import (
	"container/list"
	"sync"
	"time"
)

// Shares is a table of values by id, bounded per source and in total, fairly: a source past
// its share gives way with its own least recently used entry, and at the total bound the
// least recently used entry of the source holding the most gives way — the new entry's own
// source, or one holding more, never one holding fewer (as Victim chooses). Finding that
// source costs O(1): sources are kept in buckets by how many entries they hold. An entry may
// expire: then it is gone for Get and Put, and when it is the one to give way that costs
// nobody anything (evicted is not called). Safe for concurrent use; the zero value is not
// usable, call NewShares.
type Shares[V any] struct {
	mu        sync.Mutex
	perSource int
	total     int
	entries   map[string]*list.Element // of *share[V]
	sources   map[string]*list.List    // each source's entries, most recently used at the front
	buckets   map[int]map[string]struct{}
	most      int // the largest count any source holds
	evicted   func(reason, source string)
	dropped   func(V) // set by OnDrop
}

type share[V any] struct {
	id, source string
	v          V
	expires    int64 // Unix nanoseconds; 0: never
}

func (sh *share[V]) expired(now int64) bool { return sh.expires != 0 && sh.expires <= now }

// Reasons an entry gave way, for the evicted callback.
const (
	EvictedSourceShare = "source_share" // its source was at its share
	EvictedTotal       = "total"        // the table was full
)

// NewShares returns a table of at most total entries, perSource of one source (both > 0).
// evicted, if not nil, is called (under the table's lock: keep it cheap) for every entry that
// gives way, with the reason and the source that held it.
func NewShares[V any](perSource, total int, evicted func(reason, source string)) *Shares[V] {
	return &Shares[V]{perSource: max(perSource, 1), total: max(total, 1), entries: map[string]*list.Element{},
		sources: map[string]*list.List{}, buckets: map[int]map[string]struct{}{}, evicted: evicted}
}

// OnDrop sets f to be called (under the table's lock: keep it cheap, and do not call back into
// the table) with the value of every entry the table lets go of by itself — given way, or
// found expired — so a holder of something that must be released (a parked call) releases it.
// Take and Drain hand values back instead. Call before the table is shared.
func (s *Shares[V]) OnDrop(f func(V)) *Shares[V] {
	s.dropped = f
	return s
}

// Take removes id and returns its value when it is live and keep (nil: any) accepts it; a
// refused or missing entry stays as it was.
func (s *Shares[V]) Take(id string, keep func(V) bool) (V, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var zero V
	e, ok := s.entries[id]
	if !ok {
		return zero, false
	}
	sh := e.Value.(*share[V])
	if sh.expired(time.Now().UnixNano()) {
		s.drop(s.remove(e))
		return zero, false
	}
	if keep != nil && !keep(sh.v) {
		return zero, false
	}
	s.remove(e)
	return sh.v, true
}

// Drain removes every entry and returns their values (shutdown).
func (s *Shares[V]) Drain() []V {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]V, 0, len(s.entries))
	for _, e := range s.entries {
		out = append(out, s.remove(e).v)
	}
	return out
}

func (s *Shares[V]) drop(sh *share[V]) {
	if s.dropped != nil {
		s.dropped(sh.v)
	}
}

// Put adds id with v for source until expires (zero: no expiry) unless id is known, and
// returns the value id holds: v, or the one it was first put with (the first wins while it
// lasts; it is marked as used). Room is made first when source is at its share or the table
// is full.
func (s *Shares[V]) Put(source, id string, v V, expires time.Time) V {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UnixNano()
	if e, ok := s.entries[id]; ok {
		sh := e.Value.(*share[V])
		if !sh.expired(now) {
			s.sources[sh.source].MoveToFront(e)
			return sh.v
		}
		s.drop(s.remove(e))
	}
	switch own := s.count(source); {
	case own >= s.perSource:
		s.evictOldest(source, EvictedSourceShare, now)
	case len(s.entries) >= s.total:
		victim := source
		if s.most > own {
			for src := range s.buckets[s.most] { // any source holding the most
				victim = src
				break
			}
		}
		s.evictOldest(victim, EvictedTotal, now)
	}
	l := s.sources[source]
	if l == nil {
		l = list.New()
		s.sources[source] = l
	}
	s.move(source, l.Len(), l.Len()+1)
	sh := &share[V]{id: id, source: source, v: v}
	if !expires.IsZero() {
		sh.expires = expires.UnixNano()
	}
	s.entries[id] = l.PushFront(sh)
	return v
}

// Get returns the value of id and marks it as used.
func (s *Shares[V]) Get(id string) (V, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[id]
	if !ok {
		var zero V
		return zero, false
	}
	sh := e.Value.(*share[V])
	if sh.expired(time.Now().UnixNano()) {
		s.drop(s.remove(e))
		var zero V
		return zero, false
	}
	s.sources[sh.source].MoveToFront(e)
	return sh.v, true
}

// Len is the number of entries.
func (s *Shares[V]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

// Held is the number of entries source holds.
func (s *Shares[V]) Held(source string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count(source)
}

func (s *Shares[V]) count(source string) int {
	if l := s.sources[source]; l != nil {
		return l.Len()
	}
	return 0
}

// evictOldest removes source's least recently used entry, reported to evicted unless it had
// expired. Called with s.mu held.
func (s *Shares[V]) evictOldest(source, reason string, now int64) {
	l := s.sources[source]
	if l == nil || l.Len() == 0 {
		return
	}
	sh := s.remove(l.Back())
	if s.evicted != nil && !sh.expired(now) {
		s.evicted(reason, source)
	}
	s.drop(sh)
}

// remove takes entry e out of the table. Called with s.mu held.
func (s *Shares[V]) remove(e *list.Element) *share[V] {
	sh := e.Value.(*share[V])
	l := s.sources[sh.source]
	l.Remove(e)
	delete(s.entries, sh.id)
	s.move(sh.source, l.Len()+1, l.Len())
	if l.Len() == 0 {
		delete(s.sources, sh.source)
	}
	return sh
}

// move records that source now holds to entries instead of from (they differ by one).
func (s *Shares[V]) move(source string, from, to int) {
	if b := s.buckets[from]; b != nil {
		delete(b, source)
		if len(b) == 0 {
			delete(s.buckets, from)
		}
	}
	if to > 0 {
		b := s.buckets[to]
		if b == nil {
			b = map[string]struct{}{}
			s.buckets[to] = b
		}
		b[source] = struct{}{}
	}
	switch {
	case to > s.most:
		s.most = to
	case from == s.most && s.buckets[from] == nil:
		s.most = to // counts move by one: nobody holds more than to now
	}
}
