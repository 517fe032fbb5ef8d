// Package source names who a request comes from, for the per-source bounds (session rate,
// pending tasks, body bytes, failed admin logins): the caller's identity when
// server.identity_header is configured and present, else the remote address — an IPv4 address
// whole, an IPv6 address by its /64, which one host usually owns whole.
//
// In a sidecar every caller arrives from the same address (the pod or its mesh proxy), so the
// address alone makes all callers one source; configure server.identity_header there
// (docs/SECURITY.md "Per-source bounds").
package source

import (
	"context"
	"net"
	"net/http"
	"strings"
)

// MaxIdentity bounds an identity used as a source key; a longer one is keyed by address.
const MaxIdentity = 256

// Of returns r's source key: "id:<identity>" when identity is not empty (the value of
// server.identity_header, trimmed; the caller decides whether it is trusted), else "ip:<address>"
// or "ip:<IPv6 /64 prefix>".
func Of(r *http.Request, identity string) string {
	if id := strings.TrimSpace(identity); id != "" && len(id) <= MaxIdentity {
		return "id:" + id
	}
	return Addr(r.RemoteAddr)
}

// Request returns the source of r: the key the door attached to r's context (NewContext, set
// by the proxy for every request), else Of(r, identity). Code below the door that charges a
// bound to a request's source calls this, so what a source is stays decided in one place.
func Request(r *http.Request, identity string) string {
	if r == nil {
		return ""
	}
	if k := FromContext(r.Context()); k != "" {
		return k
	}
	return Of(r, identity)
}

// Addr returns the source key of a remote address ("host:port" or a bare host).
func Addr(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	if ip := net.ParseIP(host); ip != nil {
		if ip4 := ip.To4(); ip4 != nil {
			return "ip:" + ip4.String()
		}
		return "ip:" + ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return "ip:" + host
}

type ctxKey struct{}

// NewContext returns ctx carrying key, the source of the request it belongs to, so that a
// bound further down (an upstream session or process opened for the request) can charge it to
// that source.
func NewContext(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, ctxKey{}, key)
}

// FromContext is the source key NewContext put in ctx; "" when there is none (Tollgate's own
// work, such as the annotation cache).
func FromContext(ctx context.Context) string {
	k, _ := ctx.Value(ctxKey{}).(string)
	return k
}

// Victim chooses which idle holder of a bounded resource gives way to a new one for source
// req, when the resource is full. sources[i] is the source of candidate i (each candidate is
// idle, ordered least recently used first) and held counts what every source holds now. It
// returns the index of the least recently used candidate of the source that holds the most,
// among req itself and the sources holding more than req: a source can make its own idle
// holders give way, and a lighter source can take from a heavier one, but a source that
// opens many never pushes out a source that holds fewer. -1: no candidate qualifies.
func Victim(req string, sources []string, held map[string]int) int {
	best, most := -1, -1
	for i, s := range sources {
		if s != req && held[s] <= held[req] {
			continue
		}
		if n := held[s]; n > most {
			best, most = i, n
		}
	}
	return best
}
