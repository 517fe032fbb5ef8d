package testkit

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Issuer is a token issuer stand-in for tests of Tollgate's own verification (RFC 8414
// metadata, a JWKS, RS256 tokens). End-to-end tests with a real authorization server use
// oidc-provider (test/interop).
type Issuer struct {
	URL string
	srv *httptest.Server

	mu   sync.Mutex
	key  *rsa.PrivateKey
	kid  string
	down bool
}

// StartIssuer serves an issuer on loopback until the test ends.
func StartIssuer(t testing.TB) *Issuer {
	t.Helper()
	is := &Issuer{}
	is.Rotate(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		if is.isDown() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": is.URL, "jwks_uri": is.URL + "/jwks", "token_endpoint": is.URL + "/token"})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		if is.isDown() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		is.mu.Lock()
		set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &is.key.PublicKey, KeyID: is.kid, Algorithm: "RS256", Use: "sig"}}}
		is.mu.Unlock()
		_ = json.NewEncoder(w).Encode(set)
	})
	is.srv = httptest.NewServer(mux)
	is.URL = is.srv.URL
	t.Cleanup(is.srv.Close)
	return is
}

func (is *Issuer) isDown() bool {
	is.mu.Lock()
	defer is.mu.Unlock()
	return is.down
}

// SetDown makes the metadata and key set endpoints answer 503 (down) or serve again.
func (is *Issuer) SetDown(down bool) {
	is.mu.Lock()
	is.down = down
	is.mu.Unlock()
}

// Rotate replaces the signing key with a new one under a new kid.
func (is *Issuer) Rotate(t testing.TB) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is.mu.Lock()
	is.key, is.kid = k, "k"+time.Now().Format("150405.000000000")
	is.mu.Unlock()
}

// Token signs an access token for audience with claims added to iss, aud, iat and exp (one
// hour); claims may override them.
func (is *Issuer) Token(t testing.TB, audience string, claims map[string]any) string {
	t.Helper()
	is.mu.Lock()
	key, kid := is.key, is.kid
	is.mu.Unlock()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	all := map[string]any{"iss": is.URL, "aud": audience, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	for k, v := range claims {
		all[k] = v
	}
	tok, err := jwt.Signed(signer).Claims(all).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
