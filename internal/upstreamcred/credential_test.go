package upstreamcred

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

// tokenEndpoint is an OAuth token endpoint for client_id "tollgate" / secret "s3cret-value":
// it checks the client-credentials request and answers with the tokens queued in answers.
type tokenEndpoint struct {
	srv     *httptest.Server
	mu      sync.Mutex
	answers []string // bodies, in order; the last repeats
	forms   []map[string]string
}

func newTokenEndpoint(t *testing.T, answers ...string) *tokenEndpoint {
	e := &tokenEndpoint{answers: answers}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		id, secret, ok := r.BasicAuth()
		form := map[string]string{"grant_type": r.PostForm.Get("grant_type"), "scope": r.PostForm.Get("scope"),
			"resource": r.PostForm.Get("resource"), "audience": r.PostForm.Get("audience"), "basic": fmt.Sprint(ok && id == "tollgate" && secret == "s3cret-value")}
		e.mu.Lock()
		e.forms = append(e.forms, form)
		body := e.answers[0]
		if len(e.answers) > 1 {
			e.answers = e.answers[1:]
		}
		e.mu.Unlock()
		if strings.HasPrefix(body, "401 ") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(strings.TrimPrefix(body, "401 ")))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *tokenEndpoint) requests() []map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]map[string]string(nil), e.forms...)
}

// recordingTransport answers every request 200 and keeps its Authorization header.
type recordingTransport struct {
	mu   sync.Mutex
	seen []string
}

func (rt *recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rt.mu.Lock()
	rt.seen = append(rt.seen, r.Header.Get("Authorization"))
	rt.mu.Unlock()
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
}

func ccConfig(tokenURL string) config.Credential {
	return config.Credential{ClientCredentials: config.ClientCredentials{
		TokenURL: tokenURL, ClientID: "tollgate", ClientSecretEnv: "UP_SECRET",
		Scopes: []string{"tools:call", "tools:list"}, Resource: "https://up.example/mcp", Audience: "up-api",
		AuthStyle: config.AuthStyleBasic,
	}}
}

func env(k string) (string, bool) {
	if k == "UP_SECRET" {
		return "s3cret-value", true
	}
	return "", false
}

// TestClientCredentials: the upstream gets "Bearer <token>" from the token endpoint in place
// of the caller's Authorization; the request carries the grant, scopes, resource (RFC 8707)
// and audience, the client authenticated with HTTP Basic; a token that expires within
// oauth2's expiry delta (expires_in 1) is replaced at the next request, a long-lived one kept.
func TestClientCredentials(t *testing.T) {
	te := newTokenEndpoint(t,
		`{"access_token":"tok-1","token_type":"bearer","expires_in":1}`,
		`{"access_token":"tok-2","token_type":"Bearer","expires_in":3600}`)
	cred, err := New(ccConfig(te.srv.URL+"/token"), env, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingTransport{}
	client := &http.Client{Transport: cred.Wrap(rec)}
	for range 3 {
		req, _ := http.NewRequest(http.MethodPost, "http://upstream.invalid/mcp", strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer the-callers-token")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if want := []string{"Bearer tok-1", "Bearer tok-2", "Bearer tok-2"}; fmt.Sprint(rec.seen) != fmt.Sprint(want) {
		t.Fatalf("upstream saw %q, want %q", rec.seen, want)
	}
	reqs := te.requests()
	if len(reqs) != 2 {
		t.Fatalf("token endpoint asked %d times, want 2 (the second token is reused)", len(reqs))
	}
	want := map[string]string{"grant_type": "client_credentials", "scope": "tools:call tools:list",
		"resource": "https://up.example/mcp", "audience": "up-api", "basic": "true"}
	for _, f := range reqs {
		if fmt.Sprint(f) != fmt.Sprint(want) {
			t.Errorf("token request %v, want %v", f, want)
		}
	}
}

// TestClientCredentialsRefused: a token endpoint that refuses (its body echoing the secret)
// fails the upstream request without sending it; neither the error nor the log carries the
// body or the secret. A redirect from the token endpoint is not followed.
func TestClientCredentialsRefused(t *testing.T) {
	te := newTokenEndpoint(t, `401 {"error":"invalid_client","error_description":"bad secret s3cret-value"}`)
	redirect := httptest.NewServer(http.RedirectHandler(te.srv.URL+"/token", http.StatusTemporaryRedirect))
	t.Cleanup(redirect.Close)
	for name, u := range map[string]string{"refused": te.srv.URL + "/token", "redirect": redirect.URL + "/token"} {
		t.Run(name, func(t *testing.T) {
			var logs bytes.Buffer
			cred, err := New(ccConfig(u), env, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			rec := &recordingTransport{}
			req, _ := http.NewRequest(http.MethodPost, "http://upstream.invalid/mcp", strings.NewReader(`{}`))
			_, err = (&http.Client{Transport: cred.Wrap(rec)}).Do(req)
			if err == nil {
				t.Fatal("the upstream request went through without a token")
			}
			if len(rec.seen) != 0 {
				t.Fatalf("the upstream was sent %d requests", len(rec.seen))
			}
			for what, s := range map[string]string{"error": err.Error(), "log": logs.String()} {
				if strings.Contains(s, "s3cret") || strings.Contains(s, "bad secret") {
					t.Errorf("%s carries the token endpoint's body or the secret: %s", what, s)
				}
			}
			if name == "refused" && !strings.Contains(err.Error(), `HTTP 401, error "invalid_client"`) {
				t.Errorf("error %q does not say why", err)
			}
		})
	}
	if n := len(te.requests()); n != 1 {
		t.Errorf("token endpoint asked %d times, want 1 (the redirect is not followed)", n)
	}
}

// TestClientCredentialsSecret: the client secret comes from its variable or file; a missing
// one stops the start with the key's path.
func TestClientCredentialsSecret(t *testing.T) {
	c := ccConfig("https://idp.example/token")
	c.ClientCredentials.ClientSecretEnv = "MISSING"
	if _, err := New(c, env, nil); err == nil || !strings.Contains(err.Error(), "client_credentials.client_secret_env: $MISSING is not set") {
		t.Errorf("missing variable: %v", err)
	}
	c.ClientCredentials.ClientSecretEnv, c.ClientCredentials.ClientSecretFile = "", t.TempDir()+"/none"
	if _, err := New(c, env, nil); err == nil || !strings.Contains(err.Error(), "client_credentials.client_secret_file") {
		t.Errorf("missing file: %v", err)
	}
}
