package approval

import (
	"container/list"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/identity"
	"github.com/tollgate-mcp/tollgate/internal/logcap"
	"github.com/tollgate-mcp/tollgate/internal/source"
)

// Authenticator maps a bearer token to the approver's name (docs/contract.md §4: "the approver's
// name comes from the token"). A login proxy may sign approvers in instead (ProxySignIn).
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
// every request of the source that carries credentials is answered 429 without its outcome —
// a correct token included, or the 429 would tell a guesser which guess was right. Requests
// that authenticate take nothing from the budget, however many run at once, so an approver
// (or a script of approvals) that signs in correctly is never throttled by itself.
const (
	AuthFailureBurst = 20
	AuthFailureEvery = time.Second
	// AuthSources bounds the sources remembered; the least recently seen is forgotten first.
	AuthSources = 4096
)

// ThrottleOptions configures Throttle.
type ThrottleOptions struct {
	// Auth checks the bearer token, as the approvals API does: each request's check and its
	// count happen together, so parallel guesses cannot all be answered before any is counted.
	Auth Authenticator
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

// failBucket is a token bucket of failures: a request whose credentials fail takes a token; an
// empty bucket refuses every request with credentials.
type failBucket struct {
	key    string
	tokens float64
	at     time.Time
}

func (t *throttle) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, proxied := SignedIn(r.Context()); proxied || r.Header.Get("Authorization") == "" {
		// Signed in by the login proxy: no guess, and every user behind the proxy shares its
		// address, so one user's failed tokens must not lock the others out.
		t.next.ServeHTTP(w, r)
		return
	}
	valid := false
	if tok, ok := bearerToken(r); ok && t.o.Auth != nil {
		_, valid = t.o.Auth.Approver(tok)
	}
	if wait := t.account(source.Of(r, ""), valid, time.Now()); wait > 0 {
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
	t.next.ServeHTTP(w, r)
}

// account refuses key's request while its bucket is empty (how long until a token is free),
// and otherwise takes a token when the request's credentials are not valid.
func (t *throttle) account(key string, valid bool, now time.Time) time.Duration {
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
		if valid {
			return 0 // nothing to remember of a source that never failed
		}
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
	if !valid {
		b.tokens--
	}
	return 0
}

// sources is the number of sources remembered (tests).
func (t *throttle) sources() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lru.Len()
}

// Sign-in through the cluster's login proxy (server.admin_auth; docs/SECURITY.md "Sign-in
// through a login proxy"). A proxy such as oauth2-proxy authenticates the person and names
// them in request headers; Tollgate believes those headers only from the proxy's addresses,
// and refuses them from anyone else, so a client that reaches the admin listener directly
// cannot name itself an approver.

// SignIn is one configuration snapshot's server.admin_auth, compiled.
type SignIn struct {
	nets                []netip.Prefix
	user, email, groups string // header names
	people              *identity.Directory
}

// NewSignIn compiles server.admin_auth with the approvers it maps users to. It returns nil
// (sign-in off, the headers ignored) when no trusted proxy is configured. Entries Validate
// refuses are skipped here.
func NewSignIn(a config.AdminAuth, approvers []config.Approver) *SignIn {
	// Sign-in maps the proxy's user and e-mail to an approver exactly (identity.Directory.Grant),
	// never "admin": the admin token's holder is no person a proxy can sign in.
	people := make([]identity.Person, len(approvers))
	for i, a := range approvers {
		people[i] = a.Person()
	}
	s := &SignIn{user: a.UserHeader, email: a.EmailHeader, groups: a.GroupsHeader, people: identity.NewDirectory(people)}
	for _, c := range a.TrustedProxy {
		if p, err := netip.ParsePrefix(c); err == nil && p.Bits() > 0 {
			s.nets = append(s.nets, p.Masked())
		}
	}
	if len(s.nets) == 0 {
		return nil
	}
	return s
}

// SignInFrom returns the SignIn of the current configuration, compiled once per snapshot
// (a reload changes the proxy, the headers and the approvers at once).
func SignInFrom(current func() *config.Config) func() *SignIn {
	type compiled struct {
		cfg *config.Config
		s   *SignIn
	}
	var last atomic.Pointer[compiled]
	return func() *SignIn {
		cfg := current()
		if cfg == nil {
			return nil
		}
		if c := last.Load(); c != nil && c.cfg == cfg {
			return c.s
		}
		c := &compiled{cfg: cfg, s: NewSignIn(cfg.Server.AdminAuth, cfg.Approvers)}
		last.Store(c)
		return c.s
	}
}

// trusted reports whether the TCP peer (never X-Forwarded-For: anyone can send that) is the
// login proxy.
func (s *SignIn) trusted(remoteAddr string) bool {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return false
	}
	ip := ap.Addr().Unmap().WithZone("")
	for _, p := range s.nets {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Identity is who a login proxy signed a request in as: a configured approver's name and the
// groups the proxy sent.
type Identity struct {
	Approver string
	Groups   []string
	// Via is how: "login_proxy" (ProxySignIn) or "token_issuer" (TokenSignIn).
	Via string
}

type signedInKey struct{}

// SignedIn returns the identity the login proxy signed the request in as (ProxySignIn), if
// any. The approvals API takes the approver's name from it instead of a bearer token.
func SignedIn(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(signedInKey{}).(Identity)
	return id, ok
}

// Bounds on what one request's headers may claim.
const (
	maxGroups     = 256
	maxClaimBytes = 256
)

// ProxyOptions configures ProxySignIn.
type ProxyOptions struct {
	// SignIn returns the current sign-in configuration; nil (or a nil result) = off.
	SignIn func() *SignIn
	// OnUntrusted, if not nil, runs for each request refused for carrying the headers from a
	// peer that is not the login proxy (metrics).
	OnUntrusted func()
	// OnRefused, if not nil, runs for each sign-in the proxy's names refused: "lookalike" (a
	// name only looking like an approver's), "unknown", "ambiguous" (metrics).
	OnRefused func(reason string)
	Logger    *slog.Logger // nil = slog.Default()
}

// ProxySignIn wraps the approvals API (outside Throttle) so a request the login proxy signed
// in reaches it as that approver (SignedIn). Requests without the headers pass unchanged:
// bearer tokens keep working, from the proxy's addresses too.
func ProxySignIn(next http.Handler, o ProxyOptions) http.Handler {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	sampled := logcap.NewSampler(time.Second, 10)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var s *SignIn
		if o.SignIn != nil {
			s = o.SignIn()
		}
		if s == nil {
			next.ServeHTTP(w, r)
			return
		}
		users, emails, groups := r.Header.Values(s.user), r.Header.Values(s.email), r.Header.Values(s.groups)
		if len(users)+len(emails)+len(groups) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		if !s.trusted(r.RemoteAddr) {
			if o.OnUntrusted != nil {
				o.OnUntrusted()
			}
			if ok, held := sampled.Allow(); ok {
				log.Warn("admin API: login-proxy identity headers from a peer outside server.admin_auth.trusted_proxy refused",
					"remote", r.RemoteAddr, "path", r.URL.Path, "suppressed", held)
			}
			writeError(w, http.StatusForbidden, "untrusted_proxy_header",
				fmt.Sprintf("%s, %s and %s are accepted only from the login proxy (server.admin_auth.trusted_proxy); this request did not come from it",
					s.user, s.email, s.groups), nil)
			return
		}
		user, email := firstNonEmpty(users), firstNonEmpty(emails)
		if len(users) > 1 || len(emails) > 1 {
			writeError(w, http.StatusForbidden, "ambiguous_identity",
				fmt.Sprintf("the login proxy sent %s or %s more than once; one of each is expected", s.user, s.email), nil)
			return
		}
		if user == "" && email == "" {
			// Groups alone name nobody: fall back to the bearer token, without the groups.
			next.ServeHTTP(w, r)
			return
		}
		name, err := s.approver(user, email)
		if err != nil {
			if o.OnRefused != nil {
				o.OnRefused(err.reason)
			}
			if err.reason == "lookalike" {
				if ok, held := sampled.Allow(); ok {
					log.Warn("admin API: login-proxy sign-in refused: the name only looks like an approver's",
						"approver", err.other, "path", r.URL.Path, "suppressed", held)
				}
			}
			writeError(w, http.StatusForbidden, err.code, err.msg, nil)
			return
		}
		id := Identity{Approver: name, Groups: parseGroups(groups), Via: "login_proxy"}
		// Tells the console who it is signed in as (percent-encoded: names may be non-ASCII).
		w.Header().Set("Tollgate-Approver", url.PathEscape(name))
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), signedInKey{}, id)))
	})
}

type signInError struct{ code, msg, reason, other string }

// approver maps the proxy's user and e-mail to a configured approver exactly: the user is an
// approver's name, the e-mail an approver's email (ASCII case aside), both the same approver
// when both are sent (identity.Directory.Grant). A name that only looks like an approver's
// ("аlice" with a Cyrillic а, "ａｌｉｃｅ", "alıce") signs in nobody: look-alike folding only
// ever refuses (self-approval), it never grants.
func (s *SignIn) approver(user, email string) (string, *signInError) {
	for _, v := range []string{user, email} {
		if len(v) > maxClaimBytes {
			return "", &signInError{code: "unknown_approver", msg: fmt.Sprintf("the login proxy's user or e-mail is longer than %d bytes", maxClaimBytes), reason: "unknown"}
		}
		if err := identity.Check(v); err != nil {
			return "", &signInError{code: "unknown_approver", msg: "the login proxy's user or e-mail is not usable: " + err.Error(), reason: "unknown"}
		}
	}
	p, err := s.people.Grant(identity.Claim{Kind: identity.KindName, Value: user}, identity.Claim{Kind: identity.KindEmail, Value: email})
	if err == nil {
		return p.Name, nil
	}
	var ne *identity.NameError
	errors.As(err, &ne)
	switch {
	case errors.Is(err, identity.ErrAmbiguous):
		return "", &signInError{code: "ambiguous_identity", reason: "ambiguous",
			msg: fmt.Sprintf("the login proxy's user %q and e-mail %q name two different approvers", user, email)}
	case errors.Is(err, identity.ErrLookalike):
		return "", &signInError{code: "unknown_approver", reason: "lookalike", other: ne.Other,
			msg: fmt.Sprintf("signed in through the login proxy as %q, which only looks like a configured approver's name; names are matched exactly", ne.Name)}
	}
	who := user
	if who == "" {
		who = email
	} else if email != "" {
		who += " <" + email + ">"
	}
	return "", &signInError{code: "unknown_approver", reason: "unknown", msg: fmt.Sprintf("signed in through the login proxy as %q, who is not an approver: add them to approvers (name or email) in Tollgate's configuration", who)}
}

func firstNonEmpty(vs []string) string {
	for _, v := range vs {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}

// parseGroups reads the groups header: comma-separated (oauth2-proxy joins them so) or
// repeated, spaces trimmed, empties and duplicates dropped, bounded.
func parseGroups(vs []string) []string {
	var out []string
	for _, v := range vs {
		for _, g := range strings.Split(v, ",") {
			g = strings.TrimSpace(g)
			if g == "" || len(g) > maxClaimBytes || identity.Check(g) != nil || slices.Contains(out, g) {
				continue
			}
			if len(out) == maxGroups {
				return out
			}
			out = append(out, g)
		}
	}
	return out
}

// TokenSignInOptions configures TokenSignIn.
type TokenSignInOptions struct {
	// Verify verifies the request's bearer token with the configured issuer
	// (server.admin_auth.token_issuer); nil (or a nil result) = off.
	Verify func() func(r *http.Request) (*identity.Caller, error)
	// People is the current directory of approvers.
	People func() *identity.Directory
	// OnRefused, if not nil, runs for each verified token that names no approver exactly
	// ("lookalike", "unknown", "ambiguous").
	OnRefused func(reason string)
}

// TokenSignIn lets approvers use the approvals API with an access token of the configured
// issuer (people through SSO, automation through client credentials): a request whose
// bearer token is a JWT the issuer signed is the approver its subject or e-mail names
// exactly (approvers[].subjects, email; identity.Directory.Grant — never a look-alike), with
// the token's groups as the approver's groups. A token that does not verify passes on
// unchanged, so the approvals API refuses it (401) and the failure throttle counts it; a
// verified token naming no approver is 403 unknown_approver. Static approver tokens are not
// JWTs and pass on unchanged.
func TokenSignIn(next http.Handler, o TokenSignInOptions) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var verify func(*http.Request) (*identity.Caller, error)
		if o.Verify != nil {
			verify = o.Verify()
		}
		tok, present := bearerToken(r)
		if verify == nil || !present || strings.Count(tok, ".") != 2 {
			next.ServeHTTP(w, r)
			return
		}
		if _, proxied := SignedIn(r.Context()); proxied {
			next.ServeHTTP(w, r)
			return
		}
		c, err := verify(r)
		if err != nil || c == nil {
			next.ServeHTTP(w, r)
			return
		}
		var people *identity.Directory
		if o.People != nil {
			people = o.People()
		}
		p, gerr := people.Grant(identity.Claim{Kind: identity.KindSubject, Value: c.Subject}, identity.Claim{Kind: identity.KindEmail, Value: c.Email})
		if gerr != nil {
			reason := "unknown"
			switch {
			case errors.Is(gerr, identity.ErrLookalike):
				reason = "lookalike"
			case errors.Is(gerr, identity.ErrAmbiguous):
				reason = "ambiguous"
			}
			if o.OnRefused != nil {
				o.OnRefused(reason)
			}
			w.Header().Set("Cache-Control", "no-store")
			writeError(w, http.StatusForbidden, "unknown_approver",
				fmt.Sprintf("the token's subject %q names no approver: list it in approvers[].subjects (or the token's e-mail in approvers[].email)", c.Subject), nil)
			return
		}
		id := Identity{Approver: p.Name, Groups: c.Groups, Via: "token_issuer"}
		w.Header().Set("Tollgate-Approver", url.PathEscape(p.Name))
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), signedInKey{}, id)))
	})
}
