package metrics

import "sync"

// Limiter bounds the values a label takes: known values pass, the first max unknown ones are
// admitted, everything after that becomes "other".
type Limiter struct {
	mu    sync.RWMutex
	known map[string]bool
	max   int
}

// NewLimiter admits known plus up to max (default 0) further distinct values.
func NewLimiter(known []string, max int) *Limiter {
	l := &Limiter{known: make(map[string]bool, len(known)), max: len(known) + max}
	for _, k := range known {
		l.known[k] = true
	}
	return l
}

// Label returns v if admitted, else "other".
func (l *Limiter) Label(v string) string {
	l.mu.RLock()
	ok := l.known[v]
	n := len(l.known)
	l.mu.RUnlock()
	if ok {
		return v
	}
	if n >= l.max {
		return "other"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.known) >= l.max {
		return "other"
	}
	l.known[v] = true
	return v
}
