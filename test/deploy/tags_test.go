package deploy_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Image references as they appear in manifests, Dockerfiles and docs: `image: X`, `newTag: X`,
// `FROM X`, `ARG …IMAGE=X`, `docker build … -t X`.
var (
	imageLine    = regexp.MustCompile(`(?m)^\s*-?\s*image:\s*["']?([^\s"'#]+)`)
	newTagLine   = regexp.MustCompile(`(?m)^\s*newTag:\s*["']?([^\s"'#]+)`)
	fromLine     = regexp.MustCompile(`(?m)^FROM\s+(?:--platform=\S+\s+)?(\S+)`)
	argImageLine = regexp.MustCompile(`(?m)^ARG\s+\w*IMAGE\w*=(\S+)`)
	dockerTag    = regexp.MustCompile(`docker (?:buildx )?build\b[^\n]*?\s-t\s+(\S+)`)
	latestWord   = regexp.MustCompile(`[\w./-]+:latest\b`)
	releaseHead  = regexp.MustCompile(`(?m)^## \[(\d+\.\d+\.\d+)\]`)
)

// TestNoLatestImageTags: every image the manifests, Dockerfiles and docs name has a pinned tag
// (or digest), never :latest and never none (which is latest): a rollout must not swap the
// binary under an approval in flight (issue 29). Tollgate's own image is the newest release in
// CHANGELOG.md.
func TestNoLatestImageTags(t *testing.T) {
	root := repoRoot(t)
	var files []string
	for _, dir := range []string{"deploy", "docs"} {
		_ = filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml") ||
				strings.HasSuffix(p, ".md") || strings.Contains(filepath.Base(p), "Dockerfile")) {
				files = append(files, p)
			}
			return nil
		})
	}
	files = append(files, filepath.Join(root, "README.md"), filepath.Join(root, "Dockerfile"))
	if len(files) < 10 {
		t.Fatalf("only %d files found under deploy/ and docs/", len(files))
	}
	checked := 0
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		text := string(data)
		for _, m := range latestWord.FindAllString(text, -1) {
			t.Errorf("%s names %s: pin a tag", rel, m)
		}
		for _, re := range []*regexp.Regexp{imageLine, fromLine, argImageLine, dockerTag} {
			for _, m := range re.FindAllStringSubmatch(text, -1) {
				ref := m[1]
				if strings.Contains(ref, "$") || ref == "scratch" || (re == fromLine && !strings.ContainsAny(ref, ":/@")) {
					continue // a build argument, or a FROM naming an earlier stage
				}
				checked++
				if !pinned(ref) {
					t.Errorf("%s: image %q has no pinned tag", rel, ref)
				}
			}
		}
		for _, m := range newTagLine.FindAllStringSubmatch(text, -1) {
			checked++
			if m[1] == "latest" {
				t.Errorf("%s: newTag latest", rel)
			}
		}
	}
	if checked < 5 {
		t.Errorf("only %d image references checked: the patterns no longer match the manifests", checked)
	}

	changelog, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	rel := releaseHead.FindStringSubmatch(string(changelog))
	if rel == nil {
		t.Fatal("CHANGELOG.md has no release heading ## [X.Y.Z]")
	}
	if want := "ghcr.io/tollgate-mcp/tollgate:v" + rel[1]; tollgateImage != want {
		t.Errorf("deploy/base names %s, the newest release in CHANGELOG.md is %s", tollgateImage, want)
	}
}

// pinned: a digest, or a tag other than latest after the last path segment.
func pinned(ref string) bool {
	if strings.Contains(ref, "@sha256:") {
		return true
	}
	last := ref[strings.LastIndex(ref, "/")+1:]
	_, tag, ok := strings.Cut(last, ":")
	return ok && tag != "" && tag != "latest"
}
