package session

import (
	"context"
	"time"
)

// Book keeps the ids of sessions Tollgate saw created beyond this process: the task store's
// known-session set (store.KnownSessions), so that after a restart, or on another replica, an
// id is accepted only if some Tollgate adopted it — never because the upstream answers on it
// (docs/SECURITY.md, Sessions).
type Book interface {
	// Remember records session id, bound to identity ("" no one), until expires.
	Remember(ctx context.Context, id, identity string, expires time.Time) error
	// Known reports whether id is recorded bound to identity or to no one.
	Known(ctx context.Context, id, identity string) (bool, error)
	// Forget removes id's record bound to identity and the one bound to no one.
	Forget(ctx context.Context, id, identity string) error
	// End records that session id ended, by identity ("" none), charged to source, until
	// expires: another replica still holding the session refuses it (bounded per source and
	// in total by the store).
	End(ctx context.Context, id, identity, source string, expires time.Time) error
	// Ended reports whether session id ended in a way a session bound to identity must
	// honour: any end when identity is "", else an end by that identity.
	Ended(ctx context.Context, id, identity string) (bool, error)
}

// DefaultBookTTL is how long a session id stays in the book without use. Use moves it on, at
// most once every half TTL per session (one store write, not one per request).
const DefaultBookTTL = 24 * time.Hour

// bookTimeout bounds one store call made on the way of a request.
const bookTimeout = 5 * time.Second

// KeepIn makes the registry write every session it adopts to book (kept ttl after its last
// use), and forget every session ended by Delete; eviction does not forget (the id stays
// valid). onError, if not nil, hears of failed writes: the session then works in this process
// only. Call it before use.
func (r *Registry) KeepIn(book Book, ttl time.Duration, onError func(op string, err error)) {
	if ttl <= 0 {
		ttl = DefaultBookTTL
	}
	r.mu.Lock()
	r.book, r.bookTTL, r.bookErr = book, ttl, onError
	r.mu.Unlock()
}

// HasBook reports whether the registry keeps its sessions in a book (KeepIn).
func (r *Registry) HasBook() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.book != nil
}

// SharedEnds makes EndedElsewhere read the book: other processes share it (a Redis store).
// Call it before use.
func (r *Registry) SharedEnds() {
	r.mu.Lock()
	r.sharedEnds = true
	r.mu.Unlock()
}

// Known reports whether id is in the book for a request made as identity: a session opened by
// identity, or by no one (false without a book). The proxy asks it for an id this process does
// not hold; the in-process table stays the fast path. A session opened by another identity is
// not known to it, on any replica.
func (r *Registry) Known(ctx context.Context, id, identity string) (bool, error) {
	if r.book == nil || id == "" {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, bookTimeout)
	defer cancel()
	return r.book.Known(ctx, id, identity)
}

// remember writes s to the book when it was never written or half its TTL has passed since.
// Called without r.mu.
func (r *Registry) remember(s *Session, now time.Time) {
	if r.book == nil {
		return
	}
	s.mu.Lock()
	due := s.remembered.IsZero() || now.Sub(s.remembered) >= r.bookTTL/2
	if due {
		s.remembered = now // one writer at a time; a failure retries after the interval
	}
	s.mu.Unlock()
	if !due {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), bookTimeout)
	defer cancel()
	if err := r.book.Remember(ctx, s.ID, s.identity, now.Add(r.bookTTL)); err != nil && r.bookErr != nil {
		r.bookErr("remember", err)
	}
}

// forget removes id from the book as identity may end it. Called without r.mu.
func (r *Registry) forget(id, identity string) {
	if r.book == nil || id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), bookTimeout)
	defer cancel()
	if err := r.book.Forget(ctx, id, identity); err != nil && r.bookErr != nil {
		r.bookErr("forget", err)
	}
}

// end records in the book that id ended, by identity, charged to source. Called without r.mu.
func (r *Registry) end(id, identity, source string) {
	if r.book == nil || id == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), bookTimeout)
	defer cancel()
	if err := r.book.End(ctx, id, identity, source, time.Now().Add(r.bookTTL)); err != nil && r.bookErr != nil {
		r.bookErr("record the end of", err)
	}
}

// EndedElsewhere reports whether s, held in this process, was ended since through another
// replica sharing the book (DELETE, or the upstream's 404 there): by the identity s is bound
// to, or by anyone when it is bound to no one. A session idle for longer than the book's TTL
// — the end's record may have lapsed too — counts as ended unless the book still knows it.
// It is then forgotten here; the caller answers 404. Call it before Get, so an ended session
// is not written back to the book. A store error is returned and ends nothing: the session
// keeps working in this process while the store is away.
//
// Only with SharedEnds: a store no other process writes (memory, file) has no ends but this
// process's own, which Delete applies here at once, so the read would cost every request
// (two keyed hashes) for nothing.
func (r *Registry) EndedElsewhere(ctx context.Context, s *Session) (bool, error) {
	if r.book == nil || !r.sharedEnds || s == nil {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, bookTimeout)
	defer cancel()
	ended, err := r.book.Ended(ctx, s.ID, s.identity)
	if err == nil && !ended {
		s.mu.Lock()
		idle := time.Since(s.lastSeen) >= r.bookTTL
		s.mu.Unlock()
		if idle {
			var known bool
			known, err = r.book.Known(ctx, s.ID, s.identity)
			ended = err == nil && !known
		}
	}
	if err != nil {
		if r.bookErr != nil {
			r.bookErr("check the end of", err)
		}
		return false, err
	}
	if ended {
		if held := r.drop(s.ID); held != nil && r.onDel != nil {
			r.onDel(held) // its streams close
		}
	}
	return ended, nil
}
