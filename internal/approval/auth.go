package approval

import (
	"container/list"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/source"
	"github.com/tollgate-mcp/tollgate/internal/telemetry"
)

// Authenticator maps a bearer token to the approver's name (docs/contract.md §4: "the approver's
// name comes from the token").
type Authenticator interface {
	Approver(token string) (name string, ok bool)
}

type staticTokens []staticToken

type staticToken struct {
	sum  [sha256.Size]byte
	name string
}

// StaticTokens returns an Authenticator over a fixed token → approver name map. Empty tokens
// and empty names are ignored. Tokens are compared as SHA-256 digests in constant time, and
// every entry is compared on each call, so neither timing nor length reveals a token.
func StaticTokens(m map[string]string) Authenticator {
	s := make(staticTokens, 0, len(m))
	for tok, name := range m {
		if tok == "" || name == "" {
			continue
		}
		s = append(s, staticToken{sum: sha256.Sum256([]byte(tok)), name: name})
	}
	return s
}

func (s staticTokens) Approver(token string) (string, bool) {
	if token == "" {
		return "", false
	}
	sum := sha256.Sum256([]byte(token))
	name, found := "", false
	for _, e := range s {
		if subtle.ConstantTimeCompare(sum[:], e.sum[:]) == 1 && !found {
			name, found = e.name, true
		}
	}
	return name, found
}

// Failed admin authentications are throttled per source (docs/SECURITY.md "Limits"): a
// source may fail AuthFailureBurst times at once, then once per AuthFailureEvery. Beyond that
// every request of the source that carries credentials is answered 429 without being checked —
// a correct token included, or the 429 would tell a guesser which guess was right. Successful
// requests give their slot back, so an approver who signs in correctly is never throttled.
const (
	AuthFailureBurst = 20
	AuthFailureEvery = time.Second
	// AuthSources bounds the sources remembered; the least recently seen is forgotten first.
	AuthSources = 4096
)

// ThrottleOptions configures Throttle.
type ThrottleOptions struct {
	// OnRefuse, if not nil, runs for each request refused with 429 (metrics).
	OnRefuse func()
}

// Throttle wraps the approvals API so failed authentications are rate limited per source.
// The source is the client's address (an IPv6 client by its /64): on the admin listener an
// identity header is not a credential, so anyone could pick a fresh one per guess. A request
// without an Authorization header is no guess and passes unthrottled (it gets its 401 anyway).
func Throttle(next http.Handler, o ThrottleOptions) http.Handler {
	return &throttle{next: next, o: o, lru: list.New(), byKey: make(map[string]*list.Element)}
}

type throttle struct {
	next http.Handler
	o    ThrottleOptions

	mu    sync.Mutex
	lru   *list.List // of *failBucket, most recently seen first
	byKey map[string]*list.Element
}

// failBucket is a token bucket of failures: each request with credentials takes a token up
// front (so parallel guesses cannot all pass a check before any is counted), and a request
// that authenticated gives it back.
type failBucket struct {
	key    string
	tokens float64
	at     time.Time
}

func (t *throttle) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") == "" {
		t.next.ServeHTTP(w, r)
		return
	}
	key := source.Of(r, "")
	if wait := t.take(key, time.Now()); wait > 0 {
		if t.o.OnRefuse != nil {
			t.o.OnRefuse()
		}
		secs := int64((wait + time.Second - 1) / time.Second)
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		writeError(w, http.StatusTooManyRequests, "too_many_failures",
			fmt.Sprintf("too many failed authentication attempts from this address; retry in %d s", secs), nil)
		return
	}
	sw := &telemetry.StatusWriter{ResponseWriter: w}
	t.next.ServeHTTP(sw, r)
	if sw.Code != http.StatusUnauthorized {
		t.refund(key)
	}
}

// take takes one failure token of key's bucket, or returns how long until one is free.
func (t *throttle) take(key string, now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b *failBucket
	if e, ok := t.byKey[key]; ok {
		t.lru.MoveToFront(e)
		b = e.Value.(*failBucket)
		if el := now.Sub(b.at); el > 0 {
			b.tokens = min(AuthFailureBurst, b.tokens+float64(el)/float64(AuthFailureEvery))
		}
		b.at = now
	} else {
		if t.lru.Len() >= AuthSources {
			old := t.lru.Back()
			t.lru.Remove(old)
			delete(t.byKey, old.Value.(*failBucket).key)
		}
		b = &failBucket{key: key, tokens: AuthFailureBurst, at: now}
		t.byKey[key] = t.lru.PushFront(b)
	}
	if b.tokens < 1 {
		return time.Duration((1 - b.tokens) * float64(AuthFailureEvery))
	}
	b.tokens--
	return 0
}

// refund gives back the token of a request that authenticated.
func (t *throttle) refund(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.byKey[key]; ok {
		b := e.Value.(*failBucket)
		b.tokens = min(AuthFailureBurst, b.tokens+1)
	}
}

// sources is the number of sources remembered (tests).
func (t *throttle) sources() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lru.Len()
}
