package main

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// benchResource is the audience the auth target's tokens carry and its public resource
// (server.public_url + /mcp): fixed, because the port is chosen when Tollgate starts.
const benchResource = "https://bench.tollgate.invalid/mcp"

// issuer is a minimal JWT issuer for the "tollgate (caller auth)" target: one RS256 key
// served as a JWKS on loopback (what Tollgate fetches once and caches), and the tokens the
// harness's clients send. RS256 is what most identity providers sign access tokens with.
type issuer struct {
	url  string
	srv  *http.Server
	key  *rsa.PrivateKey
	kid  string
	jwks []byte
}

func startIssuer() (*issuer, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	is := &issuer{key: key, kid: "bench-1"}
	is.jwks, err = json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: is.kid, Algorithm: "RS256", Use: "sig"}}})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	is.url = "http://" + ln.Addr().String()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(is.jwks)
	})
	is.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = is.srv.Serve(ln) }()
	return is, nil
}

func (is *issuer) stop() { _ = is.srv.Close() }

// token is an RFC 9068 access token for subject, valid for an hour.
func (is *issuer) token(subject string, groups []string) (string, error) {
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: is.key},
		(&jose.SignerOptions{}).WithType("at+jwt").WithHeader("kid", is.kid))
	if err != nil {
		return "", err
	}
	now := time.Now()
	claims := map[string]any{
		"iss": is.url, "sub": subject, "aud": benchResource, "client_id": "bench",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "jti": fmt.Sprint(now.UnixNano()),
		"scope": "mcp:tools", "groups": groups,
	}
	return jwt.Signed(sig).Claims(claims).Serialize()
}

// callerAuthSection is the server: section of the auth target's config.
func (is *issuer) callerAuthSection() string {
	return fmt.Sprintf(`server:
  public_url: https://bench.tollgate.invalid
  caller_auth:
    type: jwt
    issuer: %s
    jwks_url: %s/jwks
    required_scopes: [mcp:tools]
`, is.url, is.url)
}

// bearer adds a fixed Authorization header to every request it sends.
type bearer struct {
	next  http.RoundTripper
	value string
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", b.value)
	return b.next.RoundTrip(r)
}
