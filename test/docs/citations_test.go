package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	// outside are citations of files outside the repository (the contract now lives in
	// docs/contract.md).
	outside = regexp.MustCompile(`DESIGN\.md|CONVENTIONS\.md|\.\./shared/`)
	// contractRef is a citation of a contract section: "docs/contract.md §3" or "contract.md §5.8".
	contractRef = regexp.MustCompile(`contract\.md §(\d+)(?:\.(\d+))?`)
	// requirementRef is a cited seed or requirement id.
	requirementRef = regexp.MustCompile(`\b(seed 00\d|REQ-[A-Z]+-\d+|F-\d{3})`)
)

// TestCitationsResolveInRepository: comments and docs cite documents in this repository, and
// every contract section, seed and requirement id they cite is in docs/contract.md
// (docs/contract.md §5.7).
func TestCitationsResolveInRepository(t *testing.T) {
	b, err := os.ReadFile("../../docs/contract.md")
	if err != nil {
		t.Fatal(err)
	}
	contract := string(b)
	sections := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## §(\d+) `).FindAllStringSubmatch(contract, -1) {
		sections[m[1]] = true
	}
	habits := len(regexp.MustCompile(`(?m)^\d+\. `).FindAllString(contract[strings.Index(contract, "## §5 "):], -1))
	checked := 0
	err = filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "../.." && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(path); ext != ".go" && ext != ".md" {
			return nil
		}
		rel, _ := filepath.Rel("../..", path)
		if rel == filepath.Join("docs", "contract.md") || rel == filepath.Join("test", "docs", "citations_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		s := string(src)
		for _, loc := range outside.FindAllStringIndex(s, -1) {
			t.Errorf("%s:%d cites %q, a file outside the repository; cite docs/contract.md", rel, line(s, loc[0]), s[loc[0]:loc[1]])
		}
		for _, m := range contractRef.FindAllStringSubmatchIndex(s, -1) {
			sec, sub := s[m[2]:m[3]], ""
			if m[4] >= 0 {
				sub = s[m[4]:m[5]]
			}
			if !sections[sec] || (sub != "" && (sec != "5" || len(sub) > 1 || int(sub[0]-'0') > habits || sub == "0")) {
				t.Errorf("%s:%d cites %s, which docs/contract.md does not have", rel, line(s, m[0]), s[m[0]:m[1]])
			}
		}
		for _, m := range requirementRef.FindAllStringIndex(s, -1) {
			if id := s[m[0]:m[1]]; !strings.Contains(contract, id) {
				t.Errorf("%s:%d cites %s, which docs/contract.md does not describe", rel, line(s, m[0]), id)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("only %d files checked; the walk missed the source tree", checked)
	}
}

func line(s string, off int) int { return strings.Count(s[:off], "\n") + 1 }
