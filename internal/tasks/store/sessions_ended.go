package store

import (
	"context"
	"time"
)

// Ended sessions: a session some replica ended (DELETE, or the upstream's 404) is remembered
// for a while, so that a replica still holding it in memory refuses it too (spec 2025-11-25
// transports, session management: a request on an ended session gets HTTP 404). Each entry
// records who ended it (a keyed hash of the identity, "" for none), so a replica honours only
// an end by the identity the session is bound to (docs/SECURITY.md, Sessions), and the source
// it is charged to: entries are bounded per source and in total.
const (
	MaxEndedSessions          = 100_000
	MaxEndedSessionsPerSource = 10_000
)

// maxEndedSessions and maxEndedPerSource are the bounds, lowered by tests.
var (
	maxEndedSessions  = MaxEndedSessions
	maxEndedPerSource = MaxEndedSessionsPerSource
)

// EndedSessions is implemented by every backend; storetest.RunSessions is its contract. Ids,
// identities and sources are keyed hashes (KnownSessions makes them).
type EndedSessions interface {
	// EndSession records that session id ended, by the identity hash by ("" none), charged to
	// source, until expires. Past MaxEndedSessionsPerSource the source's own entry expiring
	// soonest gives way; past MaxEndedSessions that of the source holding the most.
	EndSession(ctx context.Context, id, by, source string, expires time.Time) error
	// SessionEnded reports whether id ended (and has not expired), and by whom.
	SessionEnded(ctx context.Context, id string) (by string, ended bool, err error)
}

var (
	_ EndedSessions = (*Memory)(nil)
	_ EndedSessions = (*File)(nil)
	_ EndedSessions = (*Redis)(nil)
)

type endedEntry struct {
	by, source string
	expires    time.Time
}

// endedSet is the in-process ended set of the memory and file backends (the file backend's
// lives in memory only: one process holds the file, and its known set, from which an ended
// session is removed, is what a restarted process asks).
type endedSet struct {
	m         map[string]endedEntry
	perSource map[string]int
}

func (e *endedSet) drop(id string) {
	x, ok := e.m[id]
	if !ok {
		return
	}
	delete(e.m, id)
	if e.perSource[x.source]--; e.perSource[x.source] <= 0 {
		delete(e.perSource, x.source)
	}
}

// soonest is the entry of source (any source when "") expiring first.
func (e *endedSet) soonest(source string) string {
	var id string
	var exp time.Time
	for k, x := range e.m {
		if (source == "" || x.source == source) && (id == "" || x.expires.Before(exp)) {
			id, exp = k, x.expires
		}
	}
	return id
}

func (e *endedSet) put(id, by, source string, expires, now time.Time) {
	if e.m == nil {
		e.m, e.perSource = map[string]endedEntry{}, map[string]int{}
	}
	e.drop(id)
	if !now.Before(expires) {
		return
	}
	if e.perSource[source] >= maxEndedPerSource || len(e.m) >= maxEndedSessions {
		for k, x := range e.m { // the expired ones first
			if !now.Before(x.expires) {
				e.drop(k)
			}
		}
	}
	if e.perSource[source] >= maxEndedPerSource {
		e.drop(e.soonest(source))
	} else if len(e.m) >= maxEndedSessions {
		heaviest, most := "", 0
		for s, n := range e.perSource {
			if n > most {
				heaviest, most = s, n
			}
		}
		e.drop(e.soonest(heaviest))
	}
	e.m[id] = endedEntry{by: by, source: source, expires: expires}
	e.perSource[source]++
}

func (e *endedSet) get(id string, now time.Time) (string, bool) {
	x, ok := e.m[id]
	if !ok || !now.Before(x.expires) {
		return "", false
	}
	return x.by, true
}

func (m *Memory) EndSession(_ context.Context, id, by, source string, expires time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.sessions.ended.put(id, by, source, expires, time.Now())
	return nil
}

func (m *Memory) SessionEnded(_ context.Context, id string) (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return "", false, ErrClosed
	}
	by, ok := m.sessions.ended.get(id, time.Now())
	return by, ok, nil
}

func (f *File) EndSession(_ context.Context, id, by, source string, expires time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	f.sessions.ended.put(id, by, source, expires, time.Now())
	return nil
}

func (f *File) SessionEnded(_ context.Context, id string) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return "", false, ErrClosed
	}
	by, ok := f.sessions.ended.get(id, time.Now())
	return by, ok, nil
}
