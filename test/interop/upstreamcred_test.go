//go:build unix

package interop

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

const upstreamClient, upstreamSecret = "tollgate-upstream", "secret-upstream-0123456789"

// TestUpstreamClientCredentials: Tollgate obtains its own access token for the upstream from a
// real authorization server (oidc-provider, client_credentials grant with the upstream as RFC
// 8707 resource) and sends it on every upstream request — the handshake, a forwarded call, an
// approved call run later — never the caller's token. The recording upstream verifies what it
// receives: a JWT signed by the provider's key, for its own audience, issued to Tollgate's
// client.
func TestUpstreamClientCredentials(t *testing.T) {
	tc := needNode(t)
	needIssuer(t, tc)
	up := startRecordingUpstream(t)
	gwAddr, issAddr := freeAddr(t), freeAddr(t)
	resource := "http://" + gwAddr + "/mcp"
	iss := startIssuer(t, tc, issAddr, issuerConfig{
		Resources: []string{resource, up.URL()}, Scope: "mcp:tools", TTL: 600,
		Keys:    writeKeys(t, t.TempDir(), "keys.json", signingKey(t, "k1")),
		Clients: append(defaultClients(), issuerClient{ClientID: upstreamClient, ClientSecret: upstreamSecret}),
	})
	var md struct {
		TokenEndpoint string `json:"token_endpoint"`
		JWKSURI       string `json:"jwks_uri"`
	}
	getJSON(t, iss.URL+"/.well-known/openid-configuration", &md)
	source := `    credential:
      client_credentials:
        token_url: ` + md.TokenEndpoint + `
        client_id: ` + upstreamClient + `
        client_secret_env: UPSTREAM_CLIENT_SECRET
        scopes: [mcp:tools]
        resource: ` + up.URL() + `
`
	g := testkit.StartGateway(t, authConfig(up.URL(), iss.URL, "", source),
		map[string]string{"TOLLGATE_LISTEN": gwAddr, "ALICE_TOKEN": aliceToken, "UPSTREAM_CLIENT_SECRET": upstreamSecret},
		map[string]string{"grp.cedar": groupPolicy})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- gateway log (tail) ---\n%s", tail(g.Logs.String(), 6<<10))
		}
	})
	g.WaitReady(t)

	tok := iss.token(t, agentA, secretA, resource)
	c := bearerClient(t, g, tok)
	if m := c.Call(1, "greet", map[string]any{"name": "cc"}, 0); !strings.Contains(textOf(testkit.Dig(m, "result")), "Hello, cc") {
		t.Fatalf("forwarded greet: %v", m)
	}
	id := c.CallTask(2, "slow_compute", `{"seconds":0,"label":"cc"}`)
	approve(t, g, id)
	waitTask(t, c, id, "completed")
	if len(up.calls("slow_compute")) == 0 || len(up.calls("greet")) == 0 {
		t.Fatal("the forwarded and the approved call did not both reach the upstream: nothing below is proven")
	}

	var keys jose.JSONWebKeySet
	getJSON(t, md.JWKSURI, &keys)
	up.mu.Lock()
	got := slices.Clone(up.got)
	up.mu.Unlock()
	seen := map[string]bool{}
	for i, r := range got {
		bearer, ok := strings.CutPrefix(r.Authorization, "Bearer ")
		if !ok {
			t.Errorf("upstream request %d (%s %s) carried Authorization %q, want Tollgate's bearer token", i, r.Method, r.Tool, r.Authorization)
			continue
		}
		if bearer == tok {
			t.Errorf("upstream request %d (%s %s) carried the caller's token", i, r.Method, r.Tool)
			continue
		}
		if !seen[bearer] {
			seen[bearer] = true
			checkUpstreamToken(t, bearer, keys, iss.URL, up.URL())
		}
	}
}

// checkUpstreamToken verifies tok as the upstream would: the provider's signature, its
// issuer, the upstream's audience, Tollgate's client.
func checkUpstreamToken(t *testing.T, tok string, keys jose.JSONWebKeySet, issuer, audience string) {
	t.Helper()
	jws, err := jose.ParseSigned(tok, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil || len(jws.Signatures) != 1 {
		t.Fatalf("the upstream's token is not a JWS: %v", err)
	}
	ks := keys.Key(jws.Signatures[0].Header.KeyID)
	if len(ks) != 1 {
		t.Fatalf("the upstream's token names key %q, unknown to the provider", jws.Signatures[0].Header.KeyID)
	}
	payload, err := jws.Verify(ks[0])
	if err != nil {
		t.Fatalf("the upstream's token does not verify with the provider's key: %v", err)
	}
	var claims struct {
		Iss      string `json:"iss"`
		Aud      any    `json:"aud"`
		ClientID string `json:"client_id"`
		Scope    string `json:"scope"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	if claims.Iss != issuer || !strings.Contains(mustJSONString(claims.Aud), `"`+audience+`"`) || claims.ClientID != upstreamClient || claims.Scope != "mcp:tools" {
		t.Errorf("the upstream's token claims %+v: want iss %s, aud %s, client_id %s, scope mcp:tools", claims, issuer, audience, upstreamClient)
	}
}

func mustJSONString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
