package console

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func TestHandlerPaths(t *testing.T) {
	h := Handler()
	tests := []struct {
		method, path string
		status       int
		contentType  string
		bodyHas      string
	}{
		{"GET", "/approvals", 200, "text/html; charset=utf-8", "<title>Tollgate approvals</title>"},
		{"GET", "/approvals/", 200, "text/html; charset=utf-8", `src="/approvals/console.js"`},
		{"GET", "/approvals/console.js", 200, "text/javascript; charset=utf-8", "'use strict'"},
		{"GET", "/approvals/console.css", 200, "text/css; charset=utf-8", "--accent"},
		{"GET", "/approvals/favicon.svg", 200, "image/svg+xml", "<svg"},
		{"HEAD", "/approvals", 200, "text/html; charset=utf-8", ""},
		{"GET", "/approvals/index.html", 404, "", ""},
		{"GET", "/approvals/static/console.js", 404, "", ""},
		{"GET", "/approvals/../go.mod", 404, "", ""},
		{"GET", "/approvals/console.js/", 404, "", ""},
		{"GET", "/approvalsx", 404, "", ""},
		{"GET", "/", 404, "", ""},
		{"POST", "/approvals", 405, "", ""},
		{"DELETE", "/approvals/console.js", 405, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, "http://admin.test"+tt.path, nil)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d", rec.Code, tt.status)
			}
			if tt.contentType != "" && rec.Header().Get("Content-Type") != tt.contentType {
				t.Errorf("Content-Type %q, want %q", rec.Header().Get("Content-Type"), tt.contentType)
			}
			if tt.status == 405 && rec.Header().Get("Allow") != "GET, HEAD" {
				t.Errorf("Allow %q", rec.Header().Get("Allow"))
			}
			body := rec.Body.String()
			if tt.method == "HEAD" && body != "" {
				t.Errorf("HEAD returned a body of %d bytes", len(body))
			}
			if tt.method == "HEAD" && rec.Header().Get("Content-Length") == "" {
				t.Error("HEAD without Content-Length")
			}
			if !strings.Contains(body, tt.bodyHas) {
				t.Errorf("body lacks %q", tt.bodyHas)
			}
		})
	}
}

// Every response, errors included, carries the security headers.
func TestSecurityHeadersOnEveryResponse(t *testing.T) {
	want := map[string]string{
		"Content-Security-Policy": ContentSecurityPolicy,
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "no-referrer",
		"X-Frame-Options":         "DENY",
		"Cache-Control":           "no-store",
	}
	h := Handler()
	for _, c := range []struct{ method, path string }{
		{"GET", "/approvals"}, {"GET", "/approvals/console.js"}, {"GET", "/approvals/console.css"},
		{"GET", "/approvals/nope"}, {"POST", "/approvals"}, {"HEAD", "/approvals/"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		for k, v := range want {
			if got := rec.Header().Get(k); got != v {
				t.Errorf("%s %s: %s = %q, want %q", c.method, c.path, k, got, v)
			}
		}
	}
}

func TestContentSecurityPolicyIsStrict(t *testing.T) {
	directives := map[string]string{}
	for _, d := range strings.Split(ContentSecurityPolicy, ";") {
		name, value, _ := strings.Cut(strings.TrimSpace(d), " ")
		directives[name] = value
	}
	for name, want := range map[string]string{
		"default-src":               "'none'",
		"script-src":                "'self'",
		"style-src":                 "'self'",
		"connect-src":               "'self'",
		"frame-ancestors":           "'none'",
		"base-uri":                  "'none'",
		"form-action":               "'none'",
		"require-trusted-types-for": "'script'",
	} {
		if got := directives[name]; got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	for _, bad := range []string{"unsafe-inline", "unsafe-eval", "http:", "https:", "*", "data:"} {
		if strings.Contains(ContentSecurityPolicy, bad) {
			t.Errorf("CSP allows %q", bad)
		}
	}
}

// The page must work under the CSP: no inline script, style or event handler, and every asset
// it references is served. The script never turns data into markup (XSS) and never puts the
// token in a URL.
func TestPageCompatibleWithPolicy(t *testing.T) {
	get := func(path string) string {
		rec := httptest.NewRecorder()
		Handler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != 200 {
			t.Fatalf("GET %s: %d", path, rec.Code)
		}
		b, _ := io.ReadAll(rec.Body)
		return string(b)
	}
	html := get("/approvals")
	for _, re := range []string{`<script[^>]*>\s*[^<\s]`, `\son[a-z]+\s*=`, `\sstyle\s*=`, `<style`, `javascript:`} {
		if regexp.MustCompile(`(?i)` + re).MatchString(html) {
			t.Errorf("index.html matches %s (inline code is blocked by the CSP)", re)
		}
	}
	for _, tag := range regexp.MustCompile(`(?i)<script[^>]*>`).FindAllString(html, -1) {
		if !strings.Contains(tag, `src="/approvals/`) {
			t.Errorf("script tag without a same-origin src: %s", tag)
		}
	}
	for _, m := range regexp.MustCompile(`(?:src|href)="(/[^"]*)"`).FindAllStringSubmatch(html, -1) {
		get(m[1]) // fails the test when an asset is missing
	}
	js := get("/approvals/console.js")
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "localStorage", "?token", "&token"} {
		if strings.Contains(js, bad) {
			t.Errorf("console.js uses %q", bad)
		}
	}
	for _, need := range []string{"sessionStorage", "headers['Authorization'] = 'Bearer '", "textContent"} {
		if !strings.Contains(js, need) {
			t.Errorf("console.js lacks %q", need)
		}
	}
}

// Mounted on a mux as the admin listener will do it.
func TestMountedOnMux(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle(Path, Handler())
	mux.Handle(Path+"/", Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for path, status := range map[string]int{"/approvals": 200, "/approvals/": 200, "/approvals/console.js": 200, "/approvals/x": 404} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != status || resp.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: %d (X-Frame-Options %q), want %d", path, resp.StatusCode, resp.Header.Get("X-Frame-Options"), status)
		}
	}
}
