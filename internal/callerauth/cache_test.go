package callerauth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

// TestVerifiedTokenCache: a token verified once is answered from the cache (no second
// signature check) only until its exp, and only while the key that signed it is still in the
// issuer's key set: a key the issuer rotated out ends its tokens at the next refresh.
func TestVerifiedTokenCache(t *testing.T) {
	ti := newTestIssuer(t, nil)
	tok := signWith(t, ti.key, "k1", ti.claims())
	for range 3 {
		if _, f := ti.a.Authenticate(request(tok)); f != nil {
			t.Fatal(f)
		}
	}
	if n := len(ti.a.verifiedJWTs.m); n != 1 {
		t.Fatalf("%d cached tokens, want 1", n)
	}
	ti.now = ti.now.Add(time.Hour + 2*time.Minute) // past exp + skew
	if _, f := ti.a.Authenticate(request(tok)); f == nil || f.Reason != "expired" {
		t.Fatalf("a cached token past its exp: %v, want expired", f)
	}
}

func TestVerifiedTokenCacheFollowsKeyRotation(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	k1, _ := rsa.GenerateKey(rand.Reader, 2048)
	k2, _ := rsa.GenerateKey(rand.Reader, 2048)
	var current atomic.Pointer[rsa.PrivateKey]
	current.Store(k1)
	kids := map[*rsa.PrivateKey]string{k1: "k1", k2: "k2"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		k := current.Load()
		b, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: k.Public(), KeyID: kids[k], Algorithm: "RS256", Use: "sig"}}})
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	a, err := New(config.Server{PublicURL: "https://mcp.example.com", CallerAuth: config.CallerAuth{CallerIssuer: config.CallerIssuer{Type: config.CallerAuthJWT,
		Issuer: srv.URL, JWKSURL: srv.URL + "/jwks"}, ClockSkew: config.Duration(time.Minute)}},
		Options{Client: srv.Client(), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	claims := map[string]any{"iss": srv.URL, "aud": testResource, "sub": "agent-1", "exp": now.Add(time.Hour).Unix(), "iat": now.Unix()}
	tok := signWith(t, k1, "k1", claims)
	if _, f := a.Authenticate(request(tok)); f != nil {
		t.Fatal(f)
	}
	current.Store(k2) // the issuer rotates k1 out
	a.byIssuer[srv.URL].keys.refresh(context.Background())
	if _, f := a.Authenticate(request(tok)); f == nil || f.Reason != "unknown_kid" {
		t.Fatalf("a cached token of a key rotated out: %v, want unknown_kid", f)
	}
	if _, f := a.Authenticate(request(signWith(t, k2, "k2", claims))); f != nil {
		t.Fatalf("a token of the new key: %v", f)
	}
}

// BenchmarkVerifyUncached is BenchmarkVerify without the verified-token cache: the cost of a
// token's first use (signature, claims).
func BenchmarkVerifyUncached(b *testing.B) {
	ti := newTestIssuer(b, nil)
	r := request(signWith(b, ti.key, "k1", ti.claims()))
	if _, f := ti.a.Authenticate(r); f != nil {
		b.Fatal(f)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		ti.a.verifiedJWTs.mu.Lock()
		clear(ti.a.verifiedJWTs.m)
		ti.a.verifiedJWTs.mu.Unlock()
		if _, f := ti.a.Authenticate(r); f != nil {
			b.Fatal(f)
		}
	}
}
