package store

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"
)

// MaxKnownSessions bounds the session ids a store remembers. When it is full, the id whose
// expiry comes first makes room (docs/SECURITY.md, Limits).
const MaxKnownSessions = 100_000

// maxKnownSessions is MaxKnownSessions, lowered by tests of the bound.
var maxKnownSessions = MaxKnownSessions

// Sessions is the set of MCP session ids Tollgate saw created — the upstream's initialize
// reply passed through it, or it minted a tgs_ id itself — kept in the task store so that a
// restarted process or another replica accepts them, and nothing else (docs/SECURITY.md,
// Sessions). Every backend implements it; storetest.RunSessions is its contract.
//
// Session ids are capability-like secrets: callers pass a keyed hash, never the id itself
// (KnownSessions does). Entries are bounded in time (expires) and in number
// (MaxKnownSessions).
type Sessions interface {
	// RememberSession adds id, or moves its expiry to expires. An expires not after now
	// forgets it.
	RememberSession(ctx context.Context, id string, expires time.Time) error
	// SessionKnown reports whether id is remembered and has not expired.
	SessionKnown(ctx context.Context, id string) (bool, error)
	// ForgetSession removes id (the session ended); a missing id is not an error.
	ForgetSession(ctx context.Context, id string) error
}

var (
	_ Sessions = (*Memory)(nil)
	_ Sessions = (*File)(nil)
	_ Sessions = (*Redis)(nil)
)

// KnownSessions stores keyed hashes of session ids in a backend's Sessions set, and of the
// sessions that ended in its EndedSessions.
type KnownSessions struct {
	s   Sessions
	e   EndedSessions
	key []byte
}

// NewKnownSessions returns the set over backend st, hashing ids with HMAC-SHA256 under key
// (the arguments-hash key: the same on every replica and across restarts of one store; empty,
// as for the memory store, draws a random key for this process).
func NewKnownSessions(st Store, key []byte) (*KnownSessions, error) {
	s, ok := st.(Sessions)
	e, ok2 := st.(EndedSessions)
	if !ok || !ok2 {
		return nil, errors.New("task store keeps no session ids")
	}
	if len(key) == 0 { // the memory store: one process, a key of its own (as the manager's)
		key = make([]byte, 32)
		_, _ = rand.Read(key) // crypto/rand.Read never fails (Go 1.24)
	}
	return &KnownSessions{s: s, e: e, key: key}, nil
}

// hash keeps the id out of the store; the label separates it from the arguments hash made
// with the same key.
func (k *KnownSessions) hash(id string) string { return k.labelled("tollgate mcp-session-id", id) }

// bound is the known-set entry of session id opened by identity: the id's hash for a session
// bound to no one (as every entry was before sessions were bound), else a hash of both, so a
// replica adopting the id learns whom it is bound to and no other identity finds it. An id
// carries no NUL (an HTTP header cannot), so id and identity cannot run into each other.
func (k *KnownSessions) bound(id, identity string) string {
	if identity == "" {
		return k.hash(id)
	}
	return k.hash(id + "\x00" + identity)
}

// labelled is the keyed hash of v under label ("" stays "": no identity).
func (k *KnownSessions) labelled(label, v string) string {
	if v == "" && label != "tollgate mcp-session-id" {
		return ""
	}
	m := hmac.New(sha256.New, k.key)
	m.Write([]byte(label + "\x00"))
	m.Write([]byte(v))
	return hex.EncodeToString(m.Sum(nil))
}

// End records that session id ended, by identity ("" none), charged to source, until expires
// (store.EndedSessions: bounded per source and in total).
func (k *KnownSessions) End(ctx context.Context, id, identity, source string, expires time.Time) error {
	return k.e.EndSession(ctx, k.hash(id), k.labelled("tollgate session ender", identity), k.labelled("tollgate session source", source), expires)
}

// Ended reports whether session id ended in a way a session bound to identity ("" none) must
// honour: any end when it is bound to no one, else only an end by that identity.
func (k *KnownSessions) Ended(ctx context.Context, id, identity string) (bool, error) {
	by, ended, err := k.e.SessionEnded(ctx, k.hash(id))
	if err != nil || !ended {
		return false, err
	}
	return identity == "" || hmac.Equal([]byte(by), []byte(k.labelled("tollgate session ender", identity))), nil
}

// Remember records that Tollgate saw session id created (or used), bound to identity ("" no
// one), until expires.
func (k *KnownSessions) Remember(ctx context.Context, id, identity string, expires time.Time) error {
	return k.s.RememberSession(ctx, k.bound(id, identity), expires)
}

// Known reports whether Tollgate saw session id created, it has not expired or ended, and
// identity may use it: it is bound to identity, or to no one.
func (k *KnownSessions) Known(ctx context.Context, id, identity string) (bool, error) {
	if identity != "" {
		if ok, err := k.s.SessionKnown(ctx, k.bound(id, identity)); ok || err != nil {
			return ok, err
		}
	}
	return k.s.SessionKnown(ctx, k.hash(id))
}

// Forget removes session id (ended by the client or the upstream) as identity may end it:
// its entry bound to identity, and the one bound to no one.
func (k *KnownSessions) Forget(ctx context.Context, id, identity string) error {
	if identity != "" {
		if err := k.s.ForgetSession(ctx, k.bound(id, identity)); err != nil {
			return err
		}
	}
	return k.s.ForgetSession(ctx, k.hash(id))
}

// knownSet is the in-process set behind the memory and file backends: id → expiry. Callers
// hold the backend's lock.
type knownSet struct {
	m      map[string]time.Time
	loaded bool     // the file backend reads its bucket on first use
	ended  endedSet // sessions_ended.go
}

// victims returns the ids to drop before id is added, to stay within MaxKnownSessions: the
// expired ones, else the one expiring soonest. It changes nothing.
func (k *knownSet) victims(id string, now time.Time) []string {
	if _, ok := k.m[id]; ok || len(k.m) < maxKnownSessions {
		return nil
	}
	var out []string
	var first string
	var firstExp time.Time
	for h, exp := range k.m {
		if !now.Before(exp) {
			out = append(out, h)
		} else if first == "" || exp.Before(firstExp) {
			first, firstExp = h, exp
		}
	}
	if len(out) == 0 && first != "" {
		out = append(out, first)
	}
	return out
}

// put adds or refreshes id, dropping victims first.
func (k *knownSet) put(id string, expires, now time.Time) {
	if k.m == nil {
		k.m = map[string]time.Time{}
	}
	for _, h := range k.victims(id, now) {
		delete(k.m, h)
	}
	k.m[id] = expires
}

func (k *knownSet) has(id string, now time.Time) bool {
	exp, ok := k.m[id]
	return ok && now.Before(exp)
}
