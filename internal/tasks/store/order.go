package store

import (
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Position is a place in the order Page reads: a record's CreatedAt and ID. It is not an
// offset, so records created or removed between two pages neither repeat nor skip the others.
type Position struct {
	CreatedAt time.Time
	ID        string
}

// PageQuery selects one bounded read of the ordered index of pending records (Page).
type PageQuery struct {
	State  string    // pending records in this state (a non-terminal state)
	After  *Position // exclusive; nil = from the first (or, with Newest, the last)
	Newest bool      // newest first
	Limit  int       // index entries to read, at least 1
}

// PageResult is what Page read. Last is the position of the last index entry read, whether
// its record was still there or not (Redis may drop a record before its entry is pruned); nil
// when no entry followed After, i.e. the end of the order.
type PageResult struct {
	Records []Record
	Last    *Position
}

// Pager is the ordered index of pending records by state, CreatedAt and ID, kept by every
// backend in step with each write (Create, Update, Delete and expiry), so a page of n records
// costs n index reads and n record reads however many are pending (docs/PERFORMANCE.md
// "Approvals page").
type Pager interface {
	Page(ctx context.Context, q PageQuery) (PageResult, error)
}

// orderKey is a record's place in the order as one comparable value.
type orderKey struct {
	created int64 // unixNano(CreatedAt)
	id      string
}

func (a orderKey) compare(b orderKey) int {
	return cmp.Or(cmp.Compare(a.created, b.created), strings.Compare(a.id, b.id))
}

func keyOf(p Position) orderKey { return orderKey{created: unixNano(p.CreatedAt), id: p.ID} }

func (k orderKey) position() *Position {
	return &Position{CreatedAt: fromUnixNano(k.created), ID: k.id}
}

// orderChunk bounds the sorted runs of an orderedSet: insert and remove move at most this
// many keys, and a seek is two binary searches.
const orderChunk = 512

// orderedSet is a sorted set of orderKeys in runs of at most 2*orderChunk keys (a flat
// B-tree of one level): O(log n + orderChunk) per insert, remove and seek, with no pointer per
// key. Callers hold the store's lock.
type orderedSet struct {
	runs [][]orderKey
	n    int
}

// run returns the index of the run that holds (or would hold) k.
func (s *orderedSet) run(k orderKey) int {
	i, _ := slices.BinarySearchFunc(s.runs, k, func(r []orderKey, k orderKey) int { return r[len(r)-1].compare(k) })
	return min(i, len(s.runs)-1)
}

func (s *orderedSet) insert(k orderKey) {
	if len(s.runs) == 0 {
		s.runs = [][]orderKey{{k}}
		s.n = 1
		return
	}
	i := s.run(k)
	r := s.runs[i]
	j, found := slices.BinarySearchFunc(r, k, orderKey.compare)
	if found {
		return
	}
	r = slices.Insert(r, j, k)
	s.n++
	if len(r) <= 2*orderChunk {
		s.runs[i] = r
		return
	}
	tail := slices.Clone(r[orderChunk:])
	s.runs[i] = slices.Clip(r[:orderChunk])
	s.runs = slices.Insert(s.runs, i+1, tail)
}

func (s *orderedSet) remove(k orderKey) {
	if len(s.runs) == 0 {
		return
	}
	i := s.run(k)
	r := s.runs[i]
	j, found := slices.BinarySearchFunc(r, k, orderKey.compare)
	if !found {
		return
	}
	s.n--
	if r = slices.Delete(r, j, j+1); len(r) == 0 {
		s.runs = slices.Delete(s.runs, i, i+1)
		return
	}
	s.runs[i] = r
}

// page returns up to limit keys after (exclusive; nil = from the end it starts at), ascending
// or, with desc, descending.
func (s *orderedSet) page(after *orderKey, desc bool, limit int) []orderKey {
	out := make([]orderKey, 0, min(limit, s.n))
	if len(s.runs) == 0 || limit <= 0 {
		return out
	}
	if !desc {
		i, j := 0, 0
		if after != nil {
			i = s.run(*after)
			var found bool
			j, found = slices.BinarySearchFunc(s.runs[i], *after, orderKey.compare)
			if found {
				j++
			}
		}
		for ; i < len(s.runs) && len(out) < limit; i, j = i+1, 0 {
			r := s.runs[i][j:]
			out = append(out, r[:min(len(r), limit-len(out))]...)
		}
		return out
	}
	i, j := len(s.runs)-1, len(s.runs[len(s.runs)-1])
	if after != nil {
		i = s.run(*after)
		j, _ = slices.BinarySearchFunc(s.runs[i], *after, orderKey.compare) // keys before j are < after
	}
	for i >= 0 && len(out) < limit {
		for j--; j >= 0 && len(out) < limit; j-- {
			out = append(out, s.runs[i][j])
		}
		if i--; i >= 0 {
			j = len(s.runs[i])
		}
	}
	return out
}

// redisOrderMember is a record's member in a Redis order set (all scores 0, ordered by the
// member's bytes, ZRANGEBYLEX): CreatedAt's Unix nanoseconds with the sign bit flipped, as 16
// hex digits so they sort as numbers, then the id.
func redisOrderMember(created time.Time, id string) string {
	var b [8]byte
	u := uint64(unixNano(created)) ^ (1 << 63)
	for i := range b {
		b[i] = byte(u >> (56 - 8*i))
	}
	return hex.EncodeToString(b[:]) + id
}

func parseRedisOrderMember(m string) (Position, error) {
	if len(m) < 16 {
		return Position{}, fmt.Errorf("order member %q is too short", m)
	}
	b, err := hex.DecodeString(m[:16])
	if err != nil {
		return Position{}, fmt.Errorf("order member %q: %w", m, err)
	}
	var u uint64
	for _, c := range b {
		u = u<<8 | uint64(c)
	}
	return Position{CreatedAt: fromUnixNano(int64(u ^ (1 << 63))), ID: m[16:]}, nil
}
