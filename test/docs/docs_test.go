// Package docs checks that the reference tables in docs/ match the code (docs/contract.md §5.8).
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/tollgate-mcp/tollgate/internal/era"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
)

// codes maps the jsonrpc.Code* constant names used in the source to their values.
var codes = map[string]int{
	"CodeParseError": jsonrpc.CodeParseError, "CodeInvalidRequest": jsonrpc.CodeInvalidRequest,
	"CodeMethodNotFound": jsonrpc.CodeMethodNotFound, "CodeInvalidParams": jsonrpc.CodeInvalidParams,
	"CodeInternalError": jsonrpc.CodeInternalError, "CodeUpstreamUnreachable": jsonrpc.CodeUpstreamUnreachable,
	"CodeUpstreamTimeout": jsonrpc.CodeUpstreamTimeout, "CodePolicyDenied": jsonrpc.CodePolicyDenied,
	"CodeTaskExpired": jsonrpc.CodeTaskExpired, "CodeApprovalRejected": jsonrpc.CodeApprovalRejected,
	"CodeApprovalTimedOut": jsonrpc.CodeApprovalTimedOut, "CodeRateLimited": jsonrpc.CodeRateLimited,
	"CodePolicyChanged": jsonrpc.CodePolicyChanged, "CodeCapacityExceeded": jsonrpc.CodeCapacityExceeded,
	"CodeUnsupportedProtocol": jsonrpc.CodeUnsupportedProtocol,
	"CodeTaskCancelled":       jsonrpc.CodeInternalError, // tasks.CodeTaskCancelled
	"CodeHeaderMismatch":      era.CodeHeaderMismatch,
	"CodeMissingCapability":   era.CodeMissingCapability,
	"CodeUnsupportedVersion":  era.CodeUnsupportedVersion,
}

// errorSite finds `(jsonrpc.)CodeX, "Name"` pairs: every place Tollgate builds an error.
var errorSite = regexp.MustCompile(`(?:jsonrpc\.)?(Code[A-Za-z]+),\s*(?:name\s*=\s*)?"([A-Z][A-Za-z]+)"`)

func TestErrorTableMatchesCode(t *testing.T) {
	doc, err := os.ReadFile("../../docs/errors.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]int{}
	for _, m := range regexp.MustCompile("(?m)^\\| (-\\d+) \\| `([A-Za-z]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		code, _ := strconv.Atoi(m[1])
		documented[m[2]] = code
	}
	if len(documented) < 20 {
		t.Fatalf("docs/errors.md table not found or too small (%d rows)", len(documented))
	}
	found := map[string]bool{}
	err = filepath.WalkDir("../../internal", func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range errorSite.FindAllStringSubmatch(string(src), -1) {
			code, ok := codes[m[1]]
			if !ok {
				continue
			}
			found[m[2]] = true
			got, ok := documented[m[2]]
			switch {
			case !ok:
				t.Errorf("%s: error %q (code %d) is not in docs/errors.md", p, m[2], code)
			case got != code:
				t.Errorf("%s: error %q has code %d, docs/errors.md says %d", p, m[2], code, got)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range documented {
		if !found[name] {
			t.Errorf("docs/errors.md documents %q, which the code never produces", name)
		}
	}
}

// TestReadmeShowsBothCommands: the README's two commands that do everything on a fresh machine.
// The environment table lives in docs/configuration.md, checked against config.EnvVars by
// internal/config's TestDocsMatchCode.
func TestReadmeShowsBothCommands(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"make demo", "make test"} {
		if !strings.Contains(string(readme), cmd) {
			t.Errorf("README does not show %q", cmd)
		}
	}
}

// mdLink is a Markdown link target: ](path) or ](path#anchor) or ](#anchor).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocLinksResolve: every relative link in README.md and docs/*.md names a file of the
// repository, and every #anchor into a Markdown file names one of its headings (GitHub's
// slugs), so moving a section never leaves a reader at a dead link.
func TestDocLinksResolve(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md")
	slugs := map[string]map[string]bool{}
	headingSlugs := func(path string) map[string]bool {
		if s, ok := slugs[path]; ok {
			return s
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		out := map[string]bool{}
		fence := false
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "```") {
				fence = !fence
			}
			if fence || !strings.HasPrefix(l, "#") {
				continue
			}
			out[githubSlug(strings.TrimLeft(l, "# "))] = true
		}
		slugs[path] = out
		return out
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		fence := false
		for n, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fence = !fence
			}
			if fence {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				full := f
				if path != "" {
					full = filepath.Join(filepath.Dir(f), path)
					if _, err := os.Stat(full); err != nil {
						t.Errorf("%s:%d: link %s: no such file", f, n+1, target)
						continue
					}
				}
				if anchor != "" && strings.HasSuffix(full, ".md") && !headingSlugs(full)[anchor] {
					t.Errorf("%s:%d: link %s: %s has no heading #%s", f, n+1, target, full, anchor)
				}
			}
		}
	}
}

// githubSlug is the anchor GitHub gives a heading: lower case, spaces to hyphens, and every
// character but letters, digits, hyphens and underscores dropped.
func githubSlug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
