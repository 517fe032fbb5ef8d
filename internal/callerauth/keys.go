package callerauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Bounds on what an issuer's endpoints may make Tollgate read or wait for.
const (
	maxMetadataBytes = 256 << 10
	maxJWKSBytes     = 1 << 20
	maxJWKSKeys      = 100
	fetchTimeout     = 5 * time.Second
	// unknownKidEvery bounds refreshes caused by tokens naming a key Tollgate does not have:
	// anyone can send such a token, so at most one fetch per interval, per issuer.
	unknownKidEvery = 10 * time.Second
	// refreshEvery is the periodic refresh of an issuer's keys (rotation without restart).
	refreshEvery = 5 * time.Minute
)

// errKeysUnavailable: no usable key set (never fetched, or older than max_key_age).
var errKeysUnavailable = errors.New("the issuer's signing keys are unavailable")

// keySet is one issuer's JSON Web Key Set, cached. A fetch that fails keeps the keys it had
// until they are maxAge old (counted from the last successful fetch); after that every token
// of the issuer is refused (keys_unavailable) until a fetch succeeds.
type keySet struct {
	issuer  string
	jwksURL string // configured, or discovered from the issuer's metadata
	client  *http.Client
	maxAge  time.Duration
	now     func() time.Time

	// fetchMu serialises fetches and guards jwksURL; mu guards the state below and is never
	// held across a fetch, so tokens of cached keys verify while a fetch hangs.
	fetchMu  sync.Mutex
	mu       sync.Mutex
	keys     []jose.JSONWebKey
	fetched  time.Time // last successful fetch
	tried    time.Time // last attempt
	lastErr  error     // last attempt's error, nil after a success
	fetching bool      // a fetch is under way
	gen      uint64    // completed fetch attempts
}

// lookup returns the keys a token's kid (and alg) may be verified with, fetching the set
// when it has none, or when kid is unknown and the last attempt is older than
// unknownKidEvery. A kid in the cached set never waits for a fetch.
func (k *keySet) lookup(ctx context.Context, kid, alg string) ([]jose.JSONWebKey, error) {
	k.mu.Lock()
	now := k.now()
	if k.keys != nil && now.Sub(k.fetched) > k.maxAge {
		k.keys = nil // too old to trust: the issuer may have revoked them
	}
	if found := match(k.keys, kid, alg); len(found) > 0 {
		k.mu.Unlock()
		return found, nil
	}
	if k.keys != nil && now.Sub(k.tried) < unknownKidEvery {
		k.mu.Unlock()
		return nil, nil // known set, unknown kid, refreshed moments ago
	}
	if k.keys == nil && !k.fetching && !k.tried.IsZero() && now.Sub(k.tried) < time.Second {
		k.mu.Unlock()
		return nil, errKeysUnavailable // the issuer just failed: do not hammer it per request
	}
	gen := k.gen
	k.mu.Unlock()
	k.fetchAfter(ctx, gen)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys == nil {
		return nil, errKeysUnavailable
	}
	return match(k.keys, kid, alg), nil
}

// holds reports whether the set still holds a usable key kid ("" = any key): a verified
// token stays verified only while the key that signed it is current.
func (k *keySet) holds(kid string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keys == nil || k.now().Sub(k.fetched) > k.maxAge {
		return false
	}
	for _, key := range k.keys {
		if kid == "" || key.KeyID == kid {
			return true
		}
	}
	return false
}

// match returns the signing keys that kid and alg select. A token without kid may use any
// key of its algorithm (a set of one, typically).
func match(keys []jose.JSONWebKey, kid, alg string) []jose.JSONWebKey {
	var out []jose.JSONWebKey
	for _, key := range keys {
		if kid != "" && key.KeyID != kid {
			continue
		}
		if key.Algorithm != "" && key.Algorithm != alg {
			continue
		}
		out = append(out, key)
		if len(out) == 4 {
			break
		}
	}
	return out
}

// refresh fetches the key set now (the periodic refresh).
func (k *keySet) refresh(ctx context.Context) {
	k.mu.Lock()
	gen := k.gen
	k.mu.Unlock()
	k.fetchAfter(ctx, gen)
}

// fetchAfter fetches the set unless an attempt completed since gen (requests that queued
// behind one fetch share its outcome: one fetch per wave).
func (k *keySet) fetchAfter(ctx context.Context, gen uint64) {
	k.fetchMu.Lock()
	defer k.fetchMu.Unlock()
	k.mu.Lock()
	if k.gen != gen {
		k.mu.Unlock()
		return
	}
	k.tried, k.fetching = k.now(), true
	k.mu.Unlock()
	keys, err := k.fetch(ctx)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.fetching = false
	k.gen++
	if err != nil {
		k.lastErr = err
		if k.keys != nil && k.now().Sub(k.fetched) > k.maxAge {
			k.keys = nil
		}
		return
	}
	k.keys, k.fetched, k.lastErr = keys, k.now(), nil
}

// state reports the set's health for /readyz: "" when the last fetch succeeded.
func (k *keySet) state() (degraded string, usable bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	usable = k.keys != nil && k.now().Sub(k.fetched) <= k.maxAge
	if k.lastErr == nil && k.keys != nil {
		return "", usable
	}
	if k.lastErr == nil {
		return fmt.Sprintf("issuer %s: signing keys not fetched yet", k.issuer), usable
	}
	if usable {
		left := k.maxAge - k.now().Sub(k.fetched)
		return fmt.Sprintf("issuer %s unreachable (%v); cached keys accepted for %s more", k.issuer, k.lastErr, left.Round(time.Second)), true
	}
	return fmt.Sprintf("issuer %s unreachable (%v); no usable keys: its tokens are refused", k.issuer, k.lastErr), false
}

func (k *keySet) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	u := k.jwksURL
	if u == "" {
		var err error
		if u, err = discoverJWKS(ctx, k.client, k.issuer); err != nil {
			return nil, err
		}
		k.jwksURL = u
	}
	body, err := get(ctx, k.client, u, maxJWKSBytes)
	if err != nil {
		return nil, fmt.Errorf("key set: %w", err)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("key set: not a JSON Web Key Set: %w", err)
	}
	var keys []jose.JSONWebKey
	for _, key := range set.Keys {
		// Signing keys only, public only, never symmetric: an HMAC "key" in a public set
		// would let anyone sign (algorithm confusion).
		if key.Use != "" && key.Use != "sig" || !key.Valid() || key.IsPublic() == false {
			continue
		}
		switch key.Key.(type) {
		case []byte:
			continue
		}
		keys = append(keys, key)
		if len(keys) == maxJWKSKeys {
			break
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("key set: no usable public signing key")
	}
	return keys, nil
}

// discoverJWKS reads the issuer's metadata (RFC 8414 first, then OpenID Connect Discovery)
// and returns its jwks_uri. The metadata must name the same issuer.
func discoverJWKS(ctx context.Context, client *http.Client, issuer string) (string, error) {
	var lastErr error
	for _, u := range metadataURLs(issuer) {
		body, err := get(ctx, client, u, maxMetadataBytes)
		if err != nil {
			lastErr = err
			continue
		}
		var md struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		if err := json.Unmarshal(body, &md); err != nil {
			lastErr = fmt.Errorf("issuer metadata %s: not JSON: %w", u, err)
			continue
		}
		if md.Issuer != issuer {
			lastErr = fmt.Errorf("issuer metadata %s names issuer %q, not %q", u, md.Issuer, issuer)
			continue
		}
		ju, err := url.Parse(md.JWKSURI)
		if err != nil || !secureURL(ju) {
			lastErr = fmt.Errorf("issuer metadata %s: jwks_uri %q is not an https URL", u, md.JWKSURI)
			continue
		}
		return md.JWKSURI, nil
	}
	return "", fmt.Errorf("discovery: %w", lastErr)
}

// metadataURLs are the well-known metadata locations of an issuer: RFC 8414 §3.1 inserts
// the well-known segment before the issuer's path; OpenID Connect Discovery appends it.
func metadataURLs(issuer string) []string {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil
	}
	path := strings.TrimRight(u.Path, "/")
	oauth := *u
	oauth.Path = "/.well-known/oauth-authorization-server" + path
	oidc := *u
	oidc.Path = path + "/.well-known/openid-configuration"
	return []string{oauth.String(), oidc.String()}
}

// secureURL: https, or http to a loopback host (a local test issuer).
func secureURL(u *url.URL) bool {
	switch u.Scheme {
	case "https":
		return u.Host != ""
	case "http":
		h := u.Hostname()
		return h == "localhost" || h == "127.0.0.1" || h == "::1"
	}
	return false
}

// get fetches u: 200 only, no redirects (the client refuses them), at most limit bytes.
func get(ctx context.Context, client *http.Client, u string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d", u, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("GET %s: larger than %d bytes", u, limit)
	}
	return body, nil
}

// newClient is the HTTP client for an issuer's endpoints: bounded in time, never following
// a redirect (an endpoint that redirects is misconfigured or hijacked).
func newClient(base *http.Client) *http.Client {
	c := &http.Client{Timeout: fetchTimeout}
	if base != nil {
		c.Transport = base.Transport
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error {
		return errors.New("redirects are not followed")
	}
	return c
}
