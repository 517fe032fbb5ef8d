package identity

import (
	"context"
	"slices"
)

// Caller is who a request to /mcp comes from, resolved once at the door: the subject of a
// bearer token Tollgate verified (server.caller_auth), or the name a trusted proxy asserts
// (server.identity_header). It owns the caller's tasks, is the source of its quotas and rate
// limits, and is the Cedar principal.
type Caller struct {
	// Subject is the caller's stable, issuer-scoped id: the token's subject claim, prefixed
	// with the issuer's name when several issuers are configured; or the asserted header value.
	Subject string `json:"subject"`
	Issuer  string `json:"issuer,omitzero"` // the verified token's iss ("" for an asserted name)
	Email   string `json:"email,omitzero"`  // the token's email claim
	Name    string `json:"name,omitzero"`   // the token's name claim (display only, never compared)
	// Groups are the token's groups claim (Cedar parents Group::"…", rules' callers).
	Groups []string `json:"groups,omitzero"`
	// Scopes are the token's granted scopes (Cedar context.scopes, rules' required scopes).
	Scopes []string `json:"scopes,omitzero"`
	// Verified is true for a token Tollgate verified, false for a name a proxy asserted.
	Verified bool `json:"verified,omitzero"`
}

// Person is the caller as a person to compare (self-approval): its subject and e-mail.
func (c *Caller) Person() Person {
	if c == nil {
		return Person{}
	}
	p := Person{Name: c.Subject}
	if c.Verified {
		p.Subjects = []string{c.Subject}
	}
	if c.Email != "" {
		p.Emails = []string{c.Email}
	}
	return p
}

// HasScope reports whether the caller's token granted scope.
func (c *Caller) HasScope(scope string) bool { return c != nil && slices.Contains(c.Scopes, scope) }

// InGroup reports whether the caller is in group (exact name: groups grant).
func (c *Caller) InGroup(group string) bool { return c != nil && slices.Contains(c.Groups, group) }

// Clone returns a deep copy (nil for nil).
func (c *Caller) Clone() *Caller {
	if c == nil {
		return nil
	}
	d := *c
	d.Groups = slices.Clone(c.Groups)
	d.Scopes = slices.Clone(c.Scopes)
	return &d
}

type callerKey struct{}

// NewContext returns ctx carrying the request's verified caller.
func NewContext(ctx context.Context, c *Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// FromContext returns the caller NewContext put in ctx, nil when the request has none.
func FromContext(ctx context.Context) *Caller {
	c, _ := ctx.Value(callerKey{}).(*Caller)
	return c
}
