package proxy

import (
	"net/http"
	"net/textproto"
	"strings"

	"github.com/tollgate-mcp/tollgate/internal/session"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

// hopHeaders are meaningful only for one connection (RFC 9110 §7.6.1) and never forwarded.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// notForwarded are end-to-end headers Tollgate sets itself toward the upstream.
var notForwarded = []string{"Host", "Content-Length", "Accept-Encoding", "Origin"}

// outboundHeader copies the client's end-to-end headers for the upstream request. A session id
// Tollgate minted itself is unknown upstream and is dropped.
func outboundHeader(in http.Header, sess *session.Session) http.Header {
	out := make(http.Header, len(in))
	for k, vs := range in {
		out[k] = vs
	}
	removeHop(out)
	for _, k := range notForwarded {
		delete(out, k)
	}
	if sess != nil && sess.Local {
		delete(out, upstream.HeaderSessionID)
	}
	return out
}

// copyHeader copies the upstream's end-to-end response headers to the client.
func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = vs
	}
	removeHop(dst)
	dst.Del("Content-Length")
}

func removeHop(h http.Header) {
	for _, f := range h["Connection"] {
		for _, name := range strings.Split(f, ",") {
			if name = textproto.TrimString(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, k := range hopHeaders {
		delete(h, k)
	}
}
