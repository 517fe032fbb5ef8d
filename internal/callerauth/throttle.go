package callerauth

import (
	"container/list"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Refused introspections per source: an opaque token Tollgate has not seen costs one request
// to the introspection endpoint, and anyone who reaches /mcp can make tokens up. A source
// (the request's address, an IPv6 address by its /64: the caller is not known yet) whose
// tokens were refused refusalBurst times gets its next unknown tokens refused without asking,
// one more allowed every refusalEvery; tokens that were accepted never count, and cached
// answers are served as before. Sources are remembered LRU, at most refusalSources.
const (
	refusalBurst   = 20
	refusalEvery   = time.Second
	refusalSources = 4096
)

type refusalThrottle struct {
	mu    sync.Mutex
	lru   *list.List // of *refusalBucket, most recently seen first
	byKey map[string]*list.Element
}

type refusalBucket struct {
	key string
	lim *rate.Limiter
}

func newRefusalThrottle() *refusalThrottle {
	return &refusalThrottle{lru: list.New(), byKey: map[string]*list.Element{}}
}

// allowed reports whether src may have an unknown token introspected now.
func (t *refusalThrottle) allowed(src string, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.byKey[src]
	if !ok {
		return true
	}
	return e.Value.(*refusalBucket).lim.TokensAt(now) >= 1
}

// refused charges one refused introspection to src.
func (t *refusalThrottle) refused(src string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.byKey[src]
	if !ok {
		if t.lru.Len() >= refusalSources {
			old := t.lru.Back()
			t.lru.Remove(old)
			delete(t.byKey, old.Value.(*refusalBucket).key)
		}
		e = t.lru.PushFront(&refusalBucket{key: src, lim: rate.NewLimiter(rate.Every(refusalEvery), refusalBurst)})
		t.byKey[src] = e
	} else {
		t.lru.MoveToFront(e)
	}
	e.Value.(*refusalBucket).lim.AllowN(now, 1)
}

// sources is how many sources are remembered (for tests).
func (t *refusalThrottle) sources() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lru.Len()
}
