// Package docs checks that the reference tables in docs/ match the code (docs/contract.md §5.8).
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/config"
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

// TestReadmeEnvTable: the README's environment table lists exactly the variables the code reads.
func TestReadmeEnvTable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	inReadme := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(TOLLGATE_[A-Z_]+)` \\|").FindAllStringSubmatch(string(readme), -1) {
		inReadme[m[1]] = true
	}
	for _, e := range config.EnvVars {
		if !inReadme[e.Name] {
			t.Errorf("README environment table lacks %s", e.Name)
		}
		delete(inReadme, e.Name)
	}
	for name := range inReadme {
		t.Errorf("README documents %s, which config.EnvVars does not list", name)
	}
	for _, cmd := range []string{"make demo", "make test"} {
		if !strings.Contains(string(readme), cmd) {
			t.Errorf("README does not show %q", cmd)
		}
	}
}
