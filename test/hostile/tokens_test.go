package hostile

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// Hostile bearer tokens at /mcp (issue 26): each is refused with its reason (the JSON-RPC
// error's data.reason and the tollgate_caller_auth_failures_total label), a 401 with the
// RFC 6750/9728 challenge (403 for a missing scope), never a 500 and never a pass; the
// upstream never sees the request; the token never appears in the logs. Keys are served by a
// local JWKS (httptest) and tokens signed here with go-jose: this is the unit-level hostility;
// the real authorization server is in test/interop.

// tokenIssuers serves the JWKS endpoints of the test issuers under one httptest server:
// /good (RSA k1 and EC e1), /garbage (not JSON), /redirect (302 to /good), /hang (never
// answers until the request ends), /octet (only a symmetric key), /html (200 text/html).
type tokenIssuers struct {
	srv     *httptest.Server
	rsaKey  *rsa.PrivateKey
	ecKey   *ecdsa.PrivateKey
	release chan struct{}
}

func startTokenIssuers(t *testing.T) *tokenIssuers {
	t.Helper()
	ti := &tokenIssuers{release: make(chan struct{})}
	var err error
	if ti.rsaKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		t.Fatal(err)
	}
	if ti.ecKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		t.Fatal(err)
	}
	good, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: ti.rsaKey.Public(), KeyID: "k1", Algorithm: "RS256", Use: "sig"},
		{Key: ti.ecKey.Public(), KeyID: "e1", Algorithm: "ES256", Use: "sig"},
	}})
	octet, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: []byte("0123456789abcdef0123456789abcdef"), KeyID: "k1", Algorithm: "HS256", Use: "sig"},
	}})
	mux := http.NewServeMux()
	mux.HandleFunc("/good/jwks", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(good) })
	mux.HandleFunc("/garbage/jwks", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"keys":[{"kty":`)) })
	mux.HandleFunc("/redirect/jwks", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/good/jwks", http.StatusFound) })
	mux.HandleFunc("/hang/jwks", func(_ http.ResponseWriter, r *http.Request) {
		select { // Tollgate gives up first (its fetch timeout); cleanup releases the rest
		case <-r.Context().Done():
		case <-ti.release:
		}
	})
	mux.HandleFunc("/octet/jwks", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(octet) })
	mux.HandleFunc("/html/jwks", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html>login</html>"))
	})
	ti.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		close(ti.release)
		ti.srv.Close()
	})
	return ti
}

func (ti *tokenIssuers) iss(name string) string { return ti.srv.URL + "/" + name }

// callerAuthYAML: the good issuer first (name good), then one issuer per broken JWKS.
func (ti *tokenIssuers) callerAuthYAML() string {
	var b strings.Builder
	b.WriteString("server:\n  caller_auth:\n    type: jwt\n    name: good\n    issuer: " + ti.iss("good") +
		"\n    jwks_url: " + ti.iss("good") + "/jwks\n    required_scopes: [mcp:tools]\n    issuers:\n")
	for _, n := range []string{"garbage", "redirect", "hang", "octet", "html"} {
		fmt.Fprintf(&b, "      - {name: %s, issuer: %s, jwks_url: %s/jwks}\n", n, ti.iss(n), ti.iss(n))
	}
	return b.String()
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func b64json(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b64(b)
}

// sign makes a compact JWS of claims with key (alg, kid, typ as given).
func sign(t *testing.T, alg jose.SignatureAlgorithm, key any, kid, typ string, claims any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType(jose.ContentType(typ))
	if typ == "" {
		opts = &jose.SignerOptions{}
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	obj, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// hmacToken is a compact HS256 JWS over header and claims with secret.
func hmacToken(header, claims any, secret []byte) string {
	in := b64json(header) + "." + b64json(claims)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(in))
	return in + "." + b64(m.Sum(nil))
}

type tokenCase struct {
	name    string
	headers []string // Authorization values (none = no header)
	status  int
	reason  string
}

func TestHostileTokens(t *testing.T) {
	ti := startTokenIssuers(t)
	up := startTypedUpstream(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(up.URL, ti.callerAuthYAML()), nil, nil)
	g.WaitReady(t)
	resource := g.MCP
	now := time.Now()
	claims := func(mod func(map[string]any)) map[string]any {
		c := map[string]any{
			"iss": ti.iss("good"), "aud": resource, "sub": "agent-1", "scope": "mcp:tools",
			"exp": now.Add(10 * time.Minute).Unix(), "iat": now.Unix(), "nbf": now.Add(-time.Minute).Unix(),
		}
		if mod != nil {
			mod(c)
		}
		return c
	}
	good := func(mod func(map[string]any)) string {
		return sign(t, jose.RS256, ti.rsaKey, "k1", "at+jwt", claims(mod))
	}
	bearer := func(tok string) []string { return []string{"Bearer " + tok} }
	otherKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := func() []byte {
		der, _ := x509.MarshalPKIXPublicKey(ti.rsaKey.Public())
		return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	}()
	deep := strings.Repeat("[", 3000) + strings.Repeat("]", 3000)
	deepClaims := `{"iss":"` + ti.iss("good") + `","aud":"` + resource + `","sub":"agent-1","scope":"mcp:tools","exp":` +
		strconv.FormatInt(now.Add(time.Hour).Unix(), 10) + `,"x":` + deep + `}`
	twoSigs := func() string {
		s, _ := jose.NewMultiSigner([]jose.SigningKey{
			{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: ti.rsaKey, KeyID: "k1"}},
			{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: otherKey, KeyID: "k1"}},
		}, nil)
		p, _ := json.Marshal(claims(nil))
		obj, err := s.Sign(p)
		if err != nil {
			t.Fatal(err)
		}
		return obj.FullSerialize()
	}()

	cases := []tokenCase{
		{"no Authorization header", nil, 401, "missing"},
		{"Basic credentials", []string{"Basic dXNlcjpwYXNz"}, 401, "malformed"},
		{"empty bearer", []string{"Bearer "}, 401, "malformed"},
		{"scheme only", []string{"Bearer"}, 401, "malformed"},
		{"two Authorization headers", []string{"Bearer " + good(nil), "Bearer " + good(nil)}, 401, "malformed"},
		{"not a b64token", bearer("abc def!"), 401, "malformed"},
		{"garbage base64 segments", bearer("@@@.###.$$$"), 401, "malformed"},
		{"garbage in base64url", bearer("Zm9v.YmFy.YmF6"), 401, "malformed"},
		{"JWE-shaped (five parts)", bearer("a.b.c.d.e"), 401, "malformed"},
		{"JWS JSON serialization, two signatures", bearer(twoSigs), 401, "malformed"},
		{"payload is an array", bearer(b64json(map[string]string{"alg": "RS256", "kid": "k1"}) + "." + b64json([]int{1}) + ".c2ln"), 401, "malformed"},
		{"alg none", bearer(b64json(map[string]string{"alg": "none", "typ": "at+jwt"}) + "." + b64json(claims(nil)) + "."), 401, "algorithm"},
		{"alg None (case variant)", bearer(b64json(map[string]string{"alg": "None"}) + "." + b64json(claims(nil)) + ".e30"), 401, "algorithm"},
		{"HS256 signed with the RSA public key (PEM) as secret", bearer(hmacToken(map[string]string{"alg": "HS256", "kid": "k1", "typ": "at+jwt"}, claims(nil), pubPEM)), 401, "algorithm"},
		{"HS256 with the octet key of a JWKS that only has one", bearer(hmacToken(map[string]string{"alg": "HS256", "kid": "k1"},
			claims(func(c map[string]any) { c["iss"] = ti.iss("octet") }), []byte("0123456789abcdef0123456789abcdef"))), 401, "algorithm"},
		{"typ id_token", bearer(sign(t, jose.RS256, ti.rsaKey, "k1", "id_token+jwt", claims(nil))), 401, "malformed"},
		{"typ dpop+jwt", bearer(sign(t, jose.RS256, ti.rsaKey, "k1", "dpop+jwt", claims(nil))), 401, "malformed"},
		{"wrong iss", bearer(good(func(c map[string]any) { c["iss"] = "https://evil.example" })), 401, "issuer"},
		{"iss with a trailing slash", bearer(good(func(c map[string]any) { c["iss"] = ti.iss("good") + "/" })), 401, "issuer"},
		{"wrong aud", bearer(good(func(c map[string]any) { c["aud"] = "https://other.example/mcp" })), 401, "audience"},
		{"aud list without this resource", bearer(good(func(c map[string]any) { c["aud"] = []string{"a", "b"} })), 401, "audience"},
		{"aud missing", bearer(good(func(c map[string]any) { delete(c, "aud") })), 401, "audience"},
		{"expired", bearer(good(func(c map[string]any) { c["exp"] = now.Add(-time.Hour).Unix() })), 401, "expired"},
		{"exp missing", bearer(good(func(c map[string]any) { delete(c, "exp") })), 401, "claims"},
		{"exp a string", bearer(good(func(c map[string]any) { c["exp"] = "9999999999" })), 401, "claims"},
		{"nbf in the future", bearer(good(func(c map[string]any) { c["nbf"] = now.Add(time.Hour).Unix() })), 401, "not_yet_valid"},
		{"iat in the future", bearer(good(func(c map[string]any) { c["iat"] = now.Add(time.Hour).Unix() })), 401, "not_yet_valid"},
		{"unknown kid", bearer(sign(t, jose.RS256, otherKey, "k9", "at+jwt", claims(nil))), 401, "unknown_kid"},
		{"known kid, another key", bearer(sign(t, jose.RS256, otherKey, "k1", "at+jwt", claims(nil))), 401, "signature"},
		{"RS256 kid used with ES256", bearer(sign(t, jose.ES256, ti.ecKey, "k1", "at+jwt", claims(nil))), 401, "unknown_kid"},
		{"signature of another token", bearer(func() string {
			a, b := strings.Split(good(nil), "."), strings.Split(good(func(c map[string]any) { c["sub"] = "root" }), ".")
			return a[0] + "." + b[1] + "." + a[2]
		}()), 401, "signature"},
		{"oversized (20 KiB)", bearer(good(func(c map[string]any) { c["pad"] = strings.Repeat("a", 20<<10) })), 401, "oversized"},
		{"deeply nested claims, forged", bearer(b64json(map[string]string{"alg": "RS256", "kid": "k1", "typ": "at+jwt"}) + "." + b64([]byte(deepClaims)) + ".c2ln"), 401, "signature"},
		{"sub missing", bearer(good(func(c map[string]any) { delete(c, "sub") })), 401, "claims"},
		{"sub with U+200B", bearer(good(func(c map[string]any) { c["sub"] = "agent\u200b-1" })), 401, "claims"},
		{"sub a number", bearer(good(func(c map[string]any) { c["sub"] = 42 })), 401, "claims"},
		{"sub 300 bytes", bearer(good(func(c map[string]any) { c["sub"] = strings.Repeat("s", 300) })), 401, "claims"},
		{"JWKS answers garbage", bearer(good(func(c map[string]any) { c["iss"] = ti.iss("garbage") })), 401, "keys_unavailable"},
		{"JWKS redirects", bearer(good(func(c map[string]any) { c["iss"] = ti.iss("redirect") })), 401, "keys_unavailable"},
		{"JWKS answers HTML", bearer(good(func(c map[string]any) { c["iss"] = ti.iss("html") })), 401, "keys_unavailable"},
		{"JWKS hangs (bounded by the fetch timeout)", bearer(good(func(c map[string]any) { c["iss"] = ti.iss("hang") })), 401, "keys_unavailable"},
		{"no required scope", bearer(good(func(c map[string]any) { c["scope"] = "profile" })), 403, "insufficient_scope"},
	}
	if len(cases) < 20 {
		t.Fatalf("only %d hostile token forms", len(cases))
	}
	counts := map[string]int{}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			marker := fmt.Sprintf("hostile-token-%d", i)
			r := postWithAuth(t, g.MCP, c.headers, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"`+marker+`"}}}`)
			var m map[string]any
			_ = json.Unmarshal(r.Body, &m)
			reason, _ := testkit.Dig(m, "error", "data", "reason").(string)
			if r.Status != c.status || reason != c.reason {
				t.Errorf("HTTP %d reason %q, want %d %q: %s", r.Status, reason, c.status, c.reason, r.Body)
			}
			challenge := r.Header.Get("WWW-Authenticate")
			if !strings.HasPrefix(challenge, `Bearer resource_metadata="`) {
				t.Errorf("WWW-Authenticate %q lacks the resource_metadata challenge", challenge)
			}
			wantCode := `error="invalid_token"`
			switch {
			case c.reason == "missing":
				wantCode = ""
			case c.status == 403:
				wantCode = `error="insufficient_scope"`
			}
			if wantCode != "" && !strings.Contains(challenge, wantCode) || wantCode == "" && strings.Contains(challenge, "error=") {
				t.Errorf("WWW-Authenticate %q, want %s", challenge, cmpOr(wantCode, "no error code"))
			}
			if up.Saw([]byte(marker)) {
				t.Error("the upstream received the refused request")
			}
			counts[c.reason]++
		})
	}
	// Counted by reason; and no token (its signature part) in the logs.
	metrics := scrape(t, g)
	for reason, n := range counts {
		re := regexp.MustCompile(`(?m)^tollgate_caller_auth_failures_total\{reason="` + reason + `"\} (\d+)`)
		got := re.FindStringSubmatch(metrics)
		if got == nil {
			t.Errorf("no tollgate_caller_auth_failures_total for reason %s", reason)
			continue
		}
		if v, _ := strconv.Atoi(got[1]); v < n {
			t.Errorf("tollgate_caller_auth_failures_total{reason=%q} = %d, want ≥ %d", reason, v, n)
		}
	}
	logs := g.Logs.String()
	for _, c := range cases {
		for _, h := range c.headers {
			if parts := strings.Split(h, "."); len(parts) == 3 && len(parts[2]) > 16 && strings.Contains(logs, parts[2]) {
				t.Errorf("%s: a token's signature is in the logs", c.name)
			}
		}
	}
	// The positive control: the same issuer's well-formed token passes, with either case of
	// the scheme.
	for _, scheme := range []string{"Bearer ", "bearer "} {
		r := postWithAuth(t, g.MCP, []string{scheme + good(nil)}, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		if r.Status != http.StatusOK {
			t.Errorf("a valid token (%q): HTTP %d %s", scheme, r.Status, r.Body)
		}
	}
}

// postWithAuth POSTs body to url with exactly the given Authorization values.
func postWithAuth(t *testing.T, url string, auth []string, body string) testkit.Reply {
	t.Helper()
	c := &testkit.RPC{T: t, URL: url, Header: http.Header{}}
	if len(auth) > 0 {
		c.Header["Authorization"] = auth
	}
	return c.Post(body)
}
