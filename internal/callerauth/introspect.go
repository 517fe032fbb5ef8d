package callerauth

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/identity"
)

const (
	maxIntrospectionBytes = 64 << 10
	// negativeTTL keeps a refused opaque token's answer briefly, so one token sent again
	// and again does not cost an introspection each time.
	negativeTTL = 10 * time.Second
)

// introspect asks the introspection issuers about an opaque token (RFC 7662), answers
// cached by the token's hash, never past the token's exp.
//
// src is the request's address source: one whose tokens keep being refused is refused
// without asking (refusalThrottle) until its budget refills.
func (a *Authenticator) introspect(ctx context.Context, tok, src string) (*identity.Caller, *Failure) {
	key := tokenKey(tok)
	now := a.now()
	if e, ok := a.intro.get(key, now); ok {
		return e.caller.Clone(), e.failure
	}
	if e, ok := a.introRefused.get(key, now); ok {
		return nil, e.failure
	}
	if !a.refusals.allowed(src, now) {
		return nil, &Failure{Status: http.StatusUnauthorized, Code: "invalid_token", Reason: "introspection_throttled",
			Description: "too many refused tokens from this address; try again later"}
	}
	var last *Failure
	for _, is := range a.introspec {
		c, f, ttl := a.introspectOne(ctx, is, tok, now)
		if f != nil && f.Reason == "introspection_unavailable" {
			last = f
			continue // not cached: the next request asks again
		}
		if f != nil {
			a.introRefused.put(key, introEntry{failure: f, until: now.Add(ttl)})
			a.refusals.refused(src, now)
			return nil, f
		}
		a.intro.put(key, introEntry{caller: c, until: now.Add(ttl)})
		return c.Clone(), nil
	}
	return nil, last
}

func (a *Authenticator) introspectOne(ctx context.Context, is *issuer, tok string, now time.Time) (*identity.Caller, *Failure, time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	form := url.Values{"token": {tok}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, is.cfg.IntrospectionURL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, &Failure{Status: http.StatusUnauthorized, Code: "invalid_token", Reason: "introspection_unavailable", Description: "token introspection failed"}, 0
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(url.QueryEscape(is.cfg.ClientID), url.QueryEscape(is.secret))
	unavailable := func(why string) (*identity.Caller, *Failure, time.Duration) {
		a.log.Warn("caller auth: token introspection failed", "issuer", is.cfg.Issuer, "error", why)
		return nil, &Failure{Status: http.StatusUnauthorized, Code: "invalid_token", Reason: "introspection_unavailable",
			Description: "the token could not be introspected; try again"}, 0
	}
	resp, err := is.client.Do(req)
	if err != nil {
		return unavailable(err.Error())
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return unavailable(fmt.Sprintf("HTTP %d", resp.StatusCode))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxIntrospectionBytes+1))
	if err != nil || len(body) > maxIntrospectionBytes {
		return unavailable("answer unreadable or too large")
	}
	var claims map[string]any
	if err := json.Unmarshal(body, &claims); err != nil {
		return unavailable("answer is not JSON")
	}
	if active, _ := claims["active"].(bool); !active {
		return nil, invalid("inactive", "the token is not active"), negativeTTL
	}
	if iss, ok := claims["iss"].(string); ok && iss != is.cfg.Issuer {
		return nil, invalid("issuer", "the token's issuer is not %q", is.cfg.Issuer), negativeTTL
	}
	if _, ok := claims["aud"]; ok && !audienceHas(claims["aud"], is.audience) {
		return nil, invalid("audience", "the token is not for this resource (aud must include %q)", is.audience), negativeTTL
	}
	ttl := is.cfg.CacheTTL.D()
	if ttl <= 0 {
		ttl = 60 * time.Second
	}
	if exp, ok := numericDate(claims["exp"]); ok {
		if !now.Before(exp.Add(a.skew)) {
			return nil, invalid("expired", "the token expired"), negativeTTL
		}
		ttl = min(ttl, exp.Sub(now))
	}
	if v, ok := claims["nbf"]; ok {
		if nbf, ok := numericDate(v); ok && now.Add(a.skew).Before(nbf) {
			return nil, invalid("not_yet_valid", "the token is not valid yet"), negativeTTL
		}
	}
	c, f := a.claimsCaller(is, claims)
	if f != nil {
		return nil, f, negativeTTL
	}
	return c, nil, ttl
}

type introEntry struct {
	caller  *identity.Caller
	failure *Failure
	until   time.Time
	// A verified JWT's entry (verifiedCache): the key set and key id that verified it; the
	// entry holds only while that key is still in the set and the set is usable.
	keys *keySet
	kid  string
}

// introCache holds introspection answers by token hash, bounded: at the bound the entry
// closest to its end gives way.
type introCache struct {
	mu  sync.Mutex
	max int
	m   map[[32]byte]introEntry
}

func newIntroCache(max int) *introCache {
	return &introCache{max: max, m: make(map[[32]byte]introEntry)}
}

func (c *introCache) get(k [32]byte, now time.Time) (introEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if ok && !now.Before(e.until) {
		delete(c.m, k)
		return introEntry{}, false
	}
	return e, ok
}

func (c *introCache) put(k [32]byte, e introEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; !ok && len(c.m) >= c.max {
		var victim [32]byte
		var soonest time.Time
		n := 0
		for key, v := range c.m { // a sample: map order is random
			if n == 0 || v.until.Before(soonest) {
				victim, soonest = key, v.until
			}
			if n++; n == 8 {
				break
			}
		}
		delete(c.m, victim)
	}
	c.m[k] = e
}

// readSecret reads a client secret from a file (trailing newline trimmed) or an environment
// variable.
func readSecret(file, env string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", err
		}
		s := strings.TrimRight(string(b), "\r\n")
		if s == "" {
			return "", fmt.Errorf("%s is empty", file)
		}
		return s, nil
	}
	v, ok := os.LookupEnv(env)
	if !ok || v == "" {
		return "", fmt.Errorf("$%s is not set", env)
	}
	return v, nil
}
