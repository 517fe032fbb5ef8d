// Package console is the approvers' web console served by the admin listener at GET /approvals
// (docs/contract.md §4). It is a static single page embedded in the binary: no build step, no CDN, no
// server-side state. The page talks to the approvals API on the same origin with the bearer
// token the approver types in, so it grants nothing the API does not.
package console

import (
	_ "embed" // the assets below
	"io"
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

// The assets are embedded as strings: they stay in the binary's read-only data and are
// written from there, never copied onto the heap (reading them from an embed.FS at start kept
// ≈ 38 KB of heap per Handler in every process, console used or not).
var (
	//go:embed static/index.html
	indexHTML string
	//go:embed static/console.js
	consoleJS string
	//go:embed static/console.css
	consoleCSS string
	//go:embed static/favicon.svg
	faviconSVG string
)

// asset is one embedded file and the exact Content-Type it is served with (never sniffed).
type asset struct {
	body, contentType string
}

var assets = map[string]asset{
	Path:                  {indexHTML, "text/html; charset=utf-8"},
	Path + "/":            {indexHTML, "text/html; charset=utf-8"},
	Path + "/console.js":  {consoleJS, "text/javascript; charset=utf-8"},
	Path + "/console.css": {consoleCSS, "text/css; charset=utf-8"},
	Path + "/favicon.svg": {faviconSVG, "image/svg+xml"},
}

// Handler serves the console. Mount it on the admin mux for both Path and Path+"/"; it
// matches full paths itself and answers anything else under Path with 404.
func Handler() http.Handler {
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
		w.Header().Set("Content-Type", a.contentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(a.body)))
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = io.WriteString(w, a.body) // net/http writes a string without copying it
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
