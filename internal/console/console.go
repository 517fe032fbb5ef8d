// Package console is the approvers' web console served by the admin listener at GET /approvals
// (docs/contract.md §4). It is a static single page embedded in the binary: no build step, no CDN, no
// server-side state. The page talks to the approvals API on the same origin with the bearer
// token the approver types in, so it grants nothing the API does not.
package console

import (
	"embed"
	"net/http"
	"strconv"
)

// Path is where the console is mounted; its assets live under Path + "/".
const Path = "/approvals"

// ContentSecurityPolicy is sent with every console response. Scripts and styles come only from
// this origin (no inline code), the page may only call its own origin, and Trusted Types are
// required with no policy allowed, so a string can never reach innerHTML or eval even by mistake.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; " +
	"require-trusted-types-for 'script'; trusted-types 'none'"

//go:embed static
var static embed.FS

// asset is one embedded file and the exact Content-Type it is served with (never sniffed).
type asset struct {
	file, contentType string
}

var assets = map[string]asset{
	Path:                  {"static/index.html", "text/html; charset=utf-8"},
	Path + "/":            {"static/index.html", "text/html; charset=utf-8"},
	Path + "/console.js":  {"static/console.js", "text/javascript; charset=utf-8"},
	Path + "/console.css": {"static/console.css", "text/css; charset=utf-8"},
	Path + "/favicon.svg": {"static/favicon.svg", "image/svg+xml"},
}

// Handler serves the console. Mount it on the admin mux for both Path and Path+"/"; it
// matches full paths itself and answers anything else under Path with 404.
func Handler() http.Handler {
	files := make(map[string][]byte, len(assets))
	for p, a := range assets {
		b, err := static.ReadFile(a.file)
		if err != nil {
			panic("console: missing embedded " + a.file) // build-time invariant
		}
		files[p] = b
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setSecurityHeaders(w.Header())
		a, ok := assets[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		body := files[r.URL.Path]
		w.Header().Set("Content-Type", a.contentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = w.Write(body)
		}
	})
}

// setSecurityHeaders applies to every response, errors included: a console page must never
// be framed (clickjacking an approve button), cached (it shows arguments), or leak its URL.
func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=()")
}
