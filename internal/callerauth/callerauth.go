// Package callerauth decides who calls /mcp: it makes Tollgate an OAuth 2.1 resource server
// (MCP authorization, revisions 2025-11-25 and 2026-07-28). A request's bearer token is
// verified — a JWT access token (RFC 9068) against its issuer's keys, or an opaque token by
// RFC 7662 introspection — and the caller it names (identity.Caller) is put in the request's
// context; the proxy asks Authenticate at the door and everything after reads the result.
// A request without a valid token gets 401 with a WWW-Authenticate challenge naming the
// protected resource metadata (RFC 9728), so an MCP client finds its authorization server.
package callerauth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/identity"
	"github.com/tollgate-mcp/tollgate/internal/source"
)

// MaxTokenBytes bounds a bearer token: real access tokens are a few KiB.
const MaxTokenBytes = 16 << 10

// Reasons a token is refused (the reason label of tollgate_caller_auth_failures_total).
var Reasons = []string{
	"missing", "malformed", "oversized", "algorithm", "issuer", "audience", "expired",
	"not_yet_valid", "signature", "unknown_kid", "keys_unavailable", "claims", "inactive",
	"introspection_unavailable", "introspection_throttled", "insufficient_scope",
}

// Failure is why a request has no verified caller: the HTTP status (401 or 403), the
// RFC 6750 error code ("" for a request without a token), the metric reason and a
// description safe to send (never the token).
type Failure struct {
	Status      int
	Code        string // "", invalid_token, insufficient_scope
	Reason      string // one of Reasons
	Description string
	Scope       string // insufficient_scope: the scopes needed
}

func (f *Failure) Error() string { return f.Reason + ": " + f.Description }

func invalid(reason, format string, args ...any) *Failure {
	return &Failure{Status: http.StatusUnauthorized, Code: "invalid_token", Reason: reason, Description: fmt.Sprintf(format, args...)}
}

// Metrics are the caller-auth counters, registered whether caller auth is on or not (so
// dashboards and alerts find them): build them once per registry with NewMetrics.
type Metrics struct {
	failures *prometheus.CounterVec
	verified prometheus.Counter
}

// NewMetrics registers the caller-auth metrics on reg (nil = unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_caller_auth_failures_total",
			Help: "Requests to /mcp refused by caller authentication, by reason."}, []string{"reason"}),
		verified: prometheus.NewCounter(prometheus.CounterOpts{Name: "tollgate_caller_auth_verified_total",
			Help: "Requests to /mcp whose bearer token was verified."}),
	}
	for _, r := range Reasons {
		m.failures.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.failures, m.verified)
	}
	return m
}

// Options configure an Authenticator.
type Options struct {
	// Metrics count verifications (nil = counted nowhere).
	Metrics    *Metrics
	Client     *http.Client          // transport for issuer endpoints (tests); nil = http.DefaultTransport
	Registerer prometheus.Registerer // used when Metrics is nil
	Logger     *slog.Logger
	Now        func() time.Time
	// Secret reads a client secret (client_secret_file / client_secret_env); nil = os files
	// and environment.
	Secret func(file, env string) (string, error)
}

// Authenticator verifies bearer tokens of the configured issuers. Safe for concurrent use.
type Authenticator struct {
	resource  string // the protected resource: public_url + "/mcp"
	metadata  string // its RFC 9728 metadata URL
	scopes    []string
	skew      time.Duration
	issuers   []*issuer
	byIssuer  map[string]*issuer // iss → JWT issuer
	introspec []*issuer
	now       func() time.Time
	log       *slog.Logger
	met       *Metrics
	intro     *introCache
	// introRefused holds introspection refusals apart from intro: anyone can send made-up
	// opaque tokens, and their refusals must never push verified callers' answers out.
	introRefused *introCache
	// refusals throttles introspection of unknown tokens per source after refusals.
	refusals *refusalThrottle
	// verifiedJWTs remembers tokens already verified, by SHA-256 of the token, until their
	// exp and while the key that verified them is current: a client sends the same token on
	// every request, and a signature check costs ~100 µs (BenchmarkVerify).
	verifiedJWTs *introCache
}

// issuer is one configured issuer, compiled.
type issuer struct {
	cfg      config.CallerIssuer
	audience string
	algs     []string
	keys     *keySet // JWT issuers
	secret   string  // introspection client secret
	client   *http.Client
}

// New compiles server.caller_auth; nil, nil when it is off.
func New(s config.Server, o Options) (*Authenticator, error) {
	ca := s.CallerAuth
	if !ca.Enabled() {
		return nil, nil
	}
	a := &Authenticator{
		resource: s.Resource(), skew: ca.ClockSkew.D(), now: o.Now, log: o.Logger,
		byIssuer: map[string]*issuer{}, intro: newIntroCache(10000), introRefused: newIntroCache(10000), refusals: newRefusalThrottle(),
		verifiedJWTs: newIntroCache(10000),
	}
	a.metadata = metadataURL(a.resource)
	if a.now == nil {
		a.now = time.Now
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	client := newClient(o.Client)
	secret := o.Secret
	if secret == nil {
		secret = readSecret
	}
	for _, c := range ca.All() {
		is := &issuer{cfg: c, audience: c.Audience, algs: c.Algorithms, client: client}
		if is.audience == "" {
			is.audience = a.resource
		}
		if len(is.algs) == 0 {
			is.algs = config.DefaultAlgorithms
		}
		for _, sc := range c.RequiredScopes {
			if !slices.Contains(a.scopes, sc) {
				a.scopes = append(a.scopes, sc)
			}
		}
		switch c.Type {
		case config.CallerAuthJWT:
			maxAge := c.MaxKeyAge.D()
			if maxAge <= 0 {
				maxAge = config.DefaultMaxKeyAge
			}
			is.keys = &keySet{issuer: c.Issuer, jwksURL: c.JWKSURL, client: client, maxAge: maxAge, now: a.now}
			a.byIssuer[c.Issuer] = is
		case config.CallerAuthIntrospection:
			v, err := secret(c.ClientSecretFile, c.ClientSecretEnv)
			if err != nil {
				return nil, fmt.Errorf("server.caller_auth: issuer %s: client secret: %w", c.Issuer, err)
			}
			is.secret = v
			a.introspec = append(a.introspec, is)
		}
		a.issuers = append(a.issuers, is)
	}
	a.met = o.Metrics
	if a.met == nil {
		a.met = NewMetrics(o.Registerer)
	}
	return a, nil
}

// MetadataURL is where the protected resource metadata is served (RFC 9728 §3.1).
func (a *Authenticator) MetadataURL() string { return a.metadata }

// Resource is the protected resource identifier (the audience tokens must carry).
func (a *Authenticator) Resource() string { return a.resource }

// Run fetches every JWT issuer's keys at once and then every refreshEvery, until ctx ends.
func (a *Authenticator) Run(ctx context.Context) error {
	t := time.NewTicker(refreshEvery)
	defer t.Stop()
	for {
		for _, is := range a.issuers {
			if is.keys != nil {
				is.keys.refresh(ctx)
				if d, _ := is.keys.state(); d != "" {
					a.log.Warn("caller auth: issuer keys", "state", d)
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Degraded is "" when every issuer's keys were fetched at the last attempt, else why not
// (for /readyz; docs/operations.md).
func (a *Authenticator) Degraded() string {
	if a == nil {
		return ""
	}
	var out []string
	for _, is := range a.issuers {
		if is.keys != nil {
			if d, _ := is.keys.state(); d != "" {
				out = append(out, d)
			}
		}
	}
	return strings.Join(out, "; ")
}

// Authenticate returns the verified caller of r, or why there is none.
func (a *Authenticator) Authenticate(r *http.Request) (*identity.Caller, *Failure) {
	c, f := a.authenticate(r)
	if f != nil {
		a.met.failures.WithLabelValues(f.Reason).Inc()
		return nil, f
	}
	a.met.verified.Inc()
	return c, nil
}

func (a *Authenticator) authenticate(r *http.Request) (*identity.Caller, *Failure) {
	vs := r.Header.Values("Authorization")
	if len(vs) == 0 {
		return nil, &Failure{Status: http.StatusUnauthorized, Reason: "missing", Description: "a bearer token is required"}
	}
	if len(vs) > 1 {
		return nil, invalid("malformed", "more than one Authorization header")
	}
	scheme, tok, ok := strings.Cut(strings.TrimSpace(vs[0]), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil, invalid("malformed", "the Authorization header must be \"Bearer <token>\"")
	}
	tok = strings.TrimSpace(tok)
	if len(tok) > MaxTokenBytes {
		return nil, invalid("oversized", "the token is longer than %d bytes", MaxTokenBytes)
	}
	if tok == "" || !b64token(tok) {
		return nil, invalid("malformed", "the token is not an RFC 6750 b64token")
	}
	var c *identity.Caller
	var f *Failure
	if strings.Count(tok, ".") == 2 && len(a.byIssuer) > 0 {
		c, f = a.verifyJWT(r.Context(), tok)
	} else if len(a.introspec) > 0 {
		c, f = a.introspect(r.Context(), tok, source.Addr(r.RemoteAddr))
	} else {
		return nil, invalid("malformed", "the token is not a JWT")
	}
	if f != nil {
		return nil, f
	}
	if missing := a.missingScopes(c); len(missing) > 0 {
		return nil, &Failure{Status: http.StatusForbidden, Code: "insufficient_scope", Reason: "insufficient_scope",
			Description: "the token lacks the scope " + strings.Join(missing, " "), Scope: strings.Join(a.scopes, " ")}
	}
	return c, nil
}

// missingScopes are the required scopes of the caller's issuer the caller lacks.
func (a *Authenticator) missingScopes(c *identity.Caller) []string {
	var need []string
	for _, is := range a.issuers {
		if is.cfg.Issuer == c.Issuer {
			need = is.cfg.RequiredScopes
		}
	}
	var missing []string
	for _, s := range need {
		if !c.HasScope(s) {
			missing = append(missing, s)
		}
	}
	return missing
}

// b64token: RFC 6750 §2.1's token characters.
func b64token(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("-._~+/=", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// Challenge is the WWW-Authenticate value for f (RFC 6750 §3, RFC 9728 §5.1).
func (a *Authenticator) Challenge(f *Failure) string {
	var b strings.Builder
	fmt.Fprintf(&b, `Bearer resource_metadata=%q`, a.metadata)
	if f.Code != "" {
		fmt.Fprintf(&b, `, error=%q, error_description=%q`, f.Code, quoteSafe(f.Description))
	}
	if sc := f.Scope; sc != "" {
		fmt.Fprintf(&b, `, scope=%q`, sc)
	} else if len(a.scopes) > 0 {
		fmt.Fprintf(&b, `, scope=%q`, strings.Join(a.scopes, " "))
	}
	return b.String()
}

// quoteSafe keeps a description to the characters RFC 6750 allows in error_description.
func quoteSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e || r == '"' || r == '\\' {
			return '\''
		}
		return r
	}, s)
}

// metadataURL is the RFC 9728 §3.1 metadata URL of resource: the well-known segment
// inserted before the resource's path.
func metadataURL(resource string) string {
	scheme, rest, _ := strings.Cut(resource, "://")
	host, path, _ := strings.Cut(rest, "/")
	if path != "" {
		path = "/" + path
	}
	return scheme + "://" + host + "/.well-known/oauth-protected-resource" + path
}

// MetadataPaths are the paths the metadata is served at: the path-suffixed form for the
// resource and the root form (clients try both).
func (a *Authenticator) MetadataPaths() []string {
	_, rest, _ := strings.Cut(a.metadata, "://")
	_, path, _ := strings.Cut(rest, "/")
	paths := []string{"/" + path, "/.well-known/oauth-protected-resource"}
	if paths[0] == paths[1] {
		return paths[:1]
	}
	return paths
}

// ServeMetadata answers the protected resource metadata (RFC 9728 §2).
func (a *Authenticator) ServeMetadata(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	servers := make([]string, 0, len(a.issuers))
	for _, is := range a.issuers {
		servers = append(servers, is.cfg.Issuer)
	}
	md := map[string]any{
		"resource":                 a.resource,
		"authorization_servers":    servers,
		"bearer_methods_supported": []string{"header"},
		"resource_name":            "Tollgate",
	}
	if len(a.scopes) > 0 {
		md["scopes_supported"] = a.scopes
	}
	b, _ := json.Marshal(md)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "max-age=300")
	_, _ = w.Write(b)
}

// tokenKey is what caches key a token under: never the token itself.
func tokenKey(tok string) [32]byte { return sha256.Sum256([]byte(tok)) }
