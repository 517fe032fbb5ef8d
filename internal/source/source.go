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
