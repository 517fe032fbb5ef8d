// Package origin checks the Host and Origin headers of requests to Tollgate's listeners: the
// DNS-rebinding protection the MCP transport requires (spec 2025-11-25 basic/transports:
// servers MUST validate the Origin header; local servers SHOULD bind to loopback). Both the
// MCP and the admin listener use one Guard each, built from the same configuration keys.
package origin

import (
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Options configure a Guard.
type Options struct {
	ListenAddr     string   // the listener's configured address; its host is an allowed Host
	AllowedHosts   []string // Host header values (host or host:port) or "*"
	AllowedOrigins []string // exact origins ("https://app.example.com") or "*"
	// SameOrigin also accepts an Origin naming the request's own Host: for a listener that
	// serves its own pages (the admin console), whose Host was already checked.
	SameOrigin bool
}

// Guard validates Host and Origin of requests to one listener.
type Guard struct {
	anyHost, anyOrigin, sameOrigin bool
	hosts, origins                 map[string]bool
}

// New builds a Guard. A listener bound to every interface (0.0.0.0, [::], ":port") accepts any
// Host on purpose (Kubernetes): rebinding protection is about loopback servers reached from a
// browser. The Origin check applies regardless.
func New(o Options) *Guard {
	g := &Guard{hosts: map[string]bool{}, origins: map[string]bool{}, sameOrigin: o.SameOrigin}
	for _, a := range o.AllowedHosts {
		if a == "*" {
			g.anyHost = true
		}
		g.hosts[strings.ToLower(a)] = true
	}
	if host, _, err := net.SplitHostPort(o.ListenAddr); err == nil {
		if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
			g.anyHost = true
		} else {
			g.hosts[strings.ToLower(host)] = true
		}
	}
	for _, a := range o.AllowedOrigins {
		if a == "*" {
			g.anyOrigin = true
		}
		g.origins[strings.ToLower(strings.TrimSuffix(a, "/"))] = true
	}
	return g
}

// Check reports whether r may be served, and if not, why (a short text for a 403).
func (g *Guard) Check(r *http.Request) (reason string, ok bool) {
	if !g.anyHost && !g.allowedHost(r.Host) {
		return "host not allowed", false
	}
	o := r.Header.Get("Origin")
	if o == "" || g.anyOrigin || g.origins[strings.ToLower(strings.TrimSuffix(o, "/"))] {
		return "", true
	}
	u, err := url.Parse(o)
	if err != nil {
		return "origin not allowed", false
	}
	if isLoopbackHost(u.Hostname()) && !g.anyHost {
		// A loopback page talking to a loopback listener is not a rebinding attack.
		return "", true
	}
	if g.sameOrigin && (u.Scheme == "http" || u.Scheme == "https") && strings.EqualFold(u.Host, r.Host) {
		return "", true
	}
	return "origin not allowed", false
}

// Wrap answers 403 to requests Check refuses and passes the rest to next.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if reason, ok := g.Check(r); !ok {
			http.Error(w, reason, http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (g *Guard) allowedHost(hostport string) bool {
	hostport = strings.ToLower(hostport)
	if g.hosts[hostport] {
		return true
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return isLoopbackHost(host) || g.hosts[host]
}

// isLoopbackHost reports whether host (a name or an IP, brackets allowed) is loopback.
func isLoopbackHost(host string) bool {
	host = strings.Trim(host, "[]")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
