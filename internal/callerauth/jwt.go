package callerauth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/tollgate-mcp/tollgate/internal/identity"
)

// Bounds on the claims Tollgate takes from a token.
const (
	maxClaimBytes = 256
	maxGroups     = 256
	maxScopes     = 256
)

// header is the part of a JWS header read before verification, to refuse what no key may
// verify: "none", HMAC (an attacker could sign with the public key as the secret), unknown
// algorithms, and token types that are not access tokens (an ID token is not a credential
// for a resource server).
type header struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	Typ string `json:"typ"`
}

func parseHeader(tok string) (header, *Failure) {
	var h header
	seg, _, _ := strings.Cut(tok, ".")
	raw, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil || json.Unmarshal(raw, &h) != nil {
		return h, invalid("malformed", "the token's header is not base64url JSON")
	}
	return h, nil
}

// accessTypes are the JWS typ values accepted for an access token: RFC 9068's at+jwt, and
// the plain JWT (or none) most issuers send for access tokens.
var accessTypes = []string{"", "jwt", "at+jwt", "application/at+jwt"}

func (a *Authenticator) verifyJWT(ctx context.Context, tok string) (*identity.Caller, *Failure) {
	key := tokenKey(tok)
	if e, ok := a.verifiedJWTs.get(key, a.now()); ok && e.keys.holds(e.kid) {
		return e.caller.Clone(), nil
	}
	h, f := parseHeader(tok)
	if f != nil {
		return nil, f
	}
	if !slices.Contains(accessTypes, strings.ToLower(h.Typ)) {
		return nil, invalid("malformed", "the token's type %q is not an access token (RFC 9068 at+jwt)", clip(h.Typ))
	}
	// Which issuer: read iss before verifying, then verify with that issuer's keys and
	// algorithms only.
	var unverified struct {
		Issuer string `json:"iss"`
	}
	parts := strings.SplitN(tok, ".", 3)
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || json.Unmarshal(payload, &unverified) != nil {
		return nil, invalid("malformed", "the token's payload is not base64url JSON")
	}
	is := a.byIssuer[unverified.Issuer]
	if is == nil {
		return nil, invalid("issuer", "the token's issuer %q is not trusted", clip(unverified.Issuer))
	}
	if !slices.Contains(is.algs, h.Alg) {
		return nil, invalid("algorithm", "the token's algorithm %q is not accepted", clip(h.Alg))
	}
	algs := make([]jose.SignatureAlgorithm, len(is.algs))
	for i, s := range is.algs {
		algs[i] = jose.SignatureAlgorithm(s)
	}
	parsed, err := jwt.ParseSigned(tok, algs)
	if err != nil || len(parsed.Headers) != 1 {
		return nil, invalid("malformed", "the token is not a JWS compact serialization with one signature")
	}
	keys, err := is.keys.lookup(ctx, h.Kid, h.Alg)
	if errors.Is(err, errKeysUnavailable) {
		return nil, invalid("keys_unavailable", "the issuer's signing keys are unavailable")
	}
	if len(keys) == 0 {
		return nil, invalid("unknown_kid", "the token's key id %q is not in the issuer's key set", clip(h.Kid))
	}
	var claims map[string]any
	verified := false
	for _, k := range keys {
		claims = nil
		if err := parsed.Claims(k.Key, &claims); err == nil {
			verified = true
			break
		}
	}
	if !verified {
		return nil, invalid("signature", "the token's signature does not verify")
	}
	c, f := a.caller(is, claims)
	if f == nil {
		exp, _ := numericDate(claims["exp"])
		a.verifiedJWTs.put(key, introEntry{caller: c.Clone(), until: exp.Add(a.skew), keys: is.keys, kid: h.Kid})
	}
	return c, f
}

// caller checks a verified token's registered claims and reads the caller from it.
func (a *Authenticator) caller(is *issuer, claims map[string]any) (*identity.Caller, *Failure) {
	now := a.now()
	if iss, _ := claims["iss"].(string); iss != is.cfg.Issuer {
		return nil, invalid("issuer", "the token's issuer is not %q", is.cfg.Issuer)
	}
	exp, ok := numericDate(claims["exp"])
	if !ok {
		return nil, invalid("claims", "the token has no valid exp")
	}
	if now.After(exp.Add(a.skew)) {
		return nil, invalid("expired", "the token expired")
	}
	if v, present := claims["nbf"]; present {
		nbf, ok := numericDate(v)
		if !ok {
			return nil, invalid("claims", "the token's nbf is not a date")
		}
		if now.Add(a.skew).Before(nbf) {
			return nil, invalid("not_yet_valid", "the token is not valid yet")
		}
	}
	if v, present := claims["iat"]; present {
		iat, ok := numericDate(v)
		if !ok {
			return nil, invalid("claims", "the token's iat is not a date")
		}
		if now.Add(a.skew).Before(iat) {
			return nil, invalid("not_yet_valid", "the token was issued in the future")
		}
	}
	if !audienceHas(claims["aud"], is.audience) {
		return nil, invalid("audience", "the token is not for this resource (aud must include %q)", is.audience)
	}
	return a.claimsCaller(is, claims)
}

// claimsCaller reads subject, e-mail, name, groups and scopes of verified claims (a JWT's or
// an introspection answer's).
func (a *Authenticator) claimsCaller(is *issuer, claims map[string]any) (*identity.Caller, *Failure) {
	subClaim := is.cfg.SubjectClaim
	if subClaim == "" {
		subClaim = "sub"
	}
	sub, _ := claims[subClaim].(string)
	if sub == "" || len(sub) > maxClaimBytes || identity.Check(sub) != nil {
		return nil, invalid("claims", "the token's %s claim is missing or not a usable subject", subClaim)
	}
	c := &identity.Caller{Subject: sub, Issuer: is.cfg.Issuer, Verified: true}
	if is.cfg.Name != "" {
		c.Subject = is.cfg.Name + ":" + sub
	}
	emailClaim := is.cfg.EmailClaim
	if emailClaim == "" {
		emailClaim = "email"
	}
	if e, _ := claims[emailClaim].(string); e != "" && len(e) <= maxClaimBytes && identity.Check(e) == nil {
		if v, present := claims["email_verified"]; !present || v == true {
			c.Email = e
		}
	}
	if n, _ := claims["name"].(string); len(n) <= maxClaimBytes && identity.Check(n) == nil {
		c.Name = n
	}
	groupsClaim := is.cfg.GroupsClaim
	if groupsClaim == "" {
		groupsClaim = "groups"
	}
	c.Groups = stringList(claims[groupsClaim], maxGroups)
	c.Scopes = stringList(claims["scope"], maxScopes)
	if len(c.Scopes) == 0 {
		c.Scopes = stringList(claims["scp"], maxScopes)
	}
	return c, nil
}

// stringList reads a claim that is a list of strings or one space- (or comma-) separated
// string; values that are too long or carry invisible code points are dropped.
func stringList(v any, limit int) []string {
	var raw []string
	switch x := v.(type) {
	case string:
		raw = strings.FieldsFunc(x, func(r rune) bool { return r == ' ' || r == ',' })
	case []any:
		for _, e := range x {
			if s, ok := e.(string); ok {
				raw = append(raw, s)
			}
		}
	}
	var out []string
	for _, s := range raw {
		s = strings.TrimSpace(s)
		if s == "" || len(s) > maxClaimBytes || identity.Check(s) != nil || slices.Contains(out, s) {
			continue
		}
		if len(out) == limit {
			break
		}
		out = append(out, s)
	}
	return out
}

func numericDate(v any) (time.Time, bool) {
	f, ok := v.(float64)
	if !ok || f < 0 || f > 1e11 {
		return time.Time{}, false
	}
	return time.Unix(int64(f), 0), true
}

func audienceHas(v any, want string) bool {
	switch x := v.(type) {
	case string:
		return x == want
	case []any:
		for _, e := range x {
			if s, ok := e.(string); ok && s == want {
				return true
			}
		}
	}
	return false
}

// clip bounds a token-chosen value quoted in an error.
func clip(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return quoteSafe(s)
}
