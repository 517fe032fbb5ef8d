// Package upstreamcred is Tollgate's own credential for the upstream (sources[].credential):
// the header it sets on every request to the server behind it — a static value from an
// environment variable or a file, or an OAuth client-credentials access token it obtains and
// refreshes — in place of anything a caller sent under that name. The caller's own token is
// never passed on unless forward_authorization says so (docs/SECURITY.md, no token
// passthrough); this package only supplies Tollgate's.
package upstreamcred

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/logcap"
)

// Credential is sources[0].credential, read: one header set on every request to the upstream
// (Tollgate's own sessions, forwarded calls, approved calls run later), in place of anything
// a caller sent under that name. Its value is static, or a client-credentials access token
// (tokens) obtained when first needed and again shortly before it expires.
type Credential struct {
	header, value string
	tokens        oauth2.TokenSource // client_credentials; nil for a static value
	log           *slog.Logger
}

// tokenTimeout bounds one request to the token endpoint.
const tokenTimeout = 10 * time.Second

// New reads c: the secret from its variable or file now, a client-credentials token when the
// first request needs it. lookupEnv nil is os.LookupEnv.
func New(c config.Credential, lookupEnv func(string) (string, bool), log *slog.Logger) (*Credential, error) {
	h := c.Header
	if h == "" {
		h = "Authorization"
	}
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	if cc := c.ClientCredentials; cc.Set() {
		ts, err := clientCredentialsSource(cc, lookupEnv)
		return &Credential{header: h, tokens: ts, log: log}, err
	}
	if c.ValueFile != "" {
		v, err := config.ReadSecretFile(c.ValueFile, "sources[0].credential.value_file", 1)
		return &Credential{header: h, value: v}, err
	}
	v, ok := lookupEnv(c.ValueEnv)
	if !ok || strings.TrimSpace(v) == "" {
		return nil, fmt.Errorf("sources[0].credential.value_env: $%s is not set", c.ValueEnv)
	}
	return &Credential{header: h, value: v}, nil
}

// clientCredentialsSource is the token source of an OAuth client-credentials grant
// (golang.org/x/oauth2/clientcredentials): it keeps the token and asks for a new one when the
// current one expires within oauth2's expiry delta, one request at a time.
func clientCredentialsSource(cc config.ClientCredentials, lookupEnv func(string) (string, bool)) (oauth2.TokenSource, error) {
	const what = "sources[0].credential.client_credentials"
	var secret string
	if cc.ClientSecretFile != "" {
		v, err := config.ReadSecretFile(cc.ClientSecretFile, what+".client_secret_file", 1)
		if err != nil {
			return nil, err
		}
		secret = v
	} else {
		v, ok := lookupEnv(cc.ClientSecretEnv)
		if !ok || strings.TrimSpace(v) == "" {
			return nil, fmt.Errorf("%s.client_secret_env: $%s is not set", what, cc.ClientSecretEnv)
		}
		secret = v
	}
	params := url.Values{}
	if cc.Resource != "" {
		params.Set("resource", cc.Resource) // RFC 8707
	}
	if cc.Audience != "" {
		params.Set("audience", cc.Audience)
	}
	style := oauth2.AuthStyleInHeader
	if cc.AuthStyle == config.AuthStylePost {
		style = oauth2.AuthStyleInParams
	}
	conf := &clientcredentials.Config{
		ClientID: cc.ClientID, ClientSecret: secret, TokenURL: cc.TokenURL,
		Scopes: cc.Scopes, EndpointParams: params, AuthStyle: style,
	}
	// Its own client: bounded in time, and a redirect is refused (the client secret goes
	// only to the configured endpoint).
	hc := &http.Client{
		Timeout:   tokenTimeout,
		Transport: http.DefaultTransport.(*http.Transport).Clone(),
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return errors.New("the token endpoint redirected; not followed")
		},
	}
	return conf.TokenSource(context.WithValue(context.Background(), oauth2.HTTPClient, hc)), nil
}

// tokenWarn samples the warning of a failed token request (every upstream request meanwhile
// fails the same way).
var tokenWarn = logcap.NewSampler(10*time.Second, 1)

// Wrap returns rt setting the credential's header on every request it sends.
func (c *Credential) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		v := c.value
		if c.tokens != nil {
			tok, err := c.tokens.Token()
			if err != nil {
				err = tokenError(err)
				if ok, held := tokenWarn.Allow(); ok && c.log != nil {
					c.log.Warn("upstream credential: no access token from the token endpoint", "error", err.Error(), "suppressed", held)
				}
				return nil, fmt.Errorf("upstream credential: %w", err)
			}
			v = tok.Type() + " " + tok.AccessToken
		}
		r = r.Clone(r.Context())
		r.Header.Set(c.header, v)
		return rt.RoundTrip(r)
	})
}

// tokenError says why the token endpoint gave no token without its answer's body (which
// might echo what was sent).
func tokenError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		if re.ErrorCode != "" {
			return fmt.Errorf("token endpoint answered HTTP %d, error %q", status, re.ErrorCode)
		}
		return fmt.Errorf("token endpoint answered HTTP %d", status)
	}
	return err
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
