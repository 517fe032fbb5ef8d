package deploy_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

// instruction is one Dockerfile instruction with its continuation lines joined.
type instruction struct {
	Cmd  string // upper case: FROM, RUN, …
	Args string
	Line int
}

// parseDockerfile reads instructions, skipping comments and parser directives and joining
// lines that end in a backslash (the default escape character).
func parseDockerfile(t *testing.T, path string) []instruction {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []instruction
	var cur strings.Builder
	start := 0
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && cur.Len() == 0) {
			continue // comments may sit between continuation lines too
		}
		if cur.Len() == 0 {
			start = n
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\"))
			cur.WriteByte(' ')
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(strings.TrimSpace(cur.String()), " ")
		out = append(out, instruction{Cmd: strings.ToUpper(cmd), Args: strings.TrimSpace(args), Line: start})
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// stage is one FROM … section of a multi-stage Dockerfile.
type stage struct {
	Image, Name string
	Instr       []instruction
}

func stages(t *testing.T, instrs []instruction) []stage {
	t.Helper()
	var out []stage
	for _, in := range instrs {
		if in.Cmd == "FROM" {
			var words []string
			for _, w := range strings.Fields(in.Args) {
				if !strings.HasPrefix(w, "--") { // --platform=…
					words = append(words, w)
				}
			}
			s := stage{Image: words[0]}
			if len(words) == 3 && strings.EqualFold(words[1], "AS") {
				s.Name = words[2]
			}
			out = append(out, s)
			continue
		}
		if len(out) == 0 {
			if in.Cmd != "ARG" {
				t.Errorf("line %d: %s before the first FROM", in.Line, in.Cmd)
			}
			continue
		}
		out[len(out)-1].Instr = append(out[len(out)-1].Instr, in)
	}
	return out
}

func (s *stage) all(cmd string) []instruction {
	var out []instruction
	for _, in := range s.Instr {
		if in.Cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

// jsonArgs decodes an exec-form (JSON array) ENTRYPOINT or CMD.
func jsonArgs(t *testing.T, in instruction) []string {
	t.Helper()
	var v []string
	if err := json.Unmarshal([]byte(in.Args), &v); err != nil {
		t.Errorf("line %d: %s %s: want the exec (JSON array) form: %v", in.Line, in.Cmd, in.Args, err)
	}
	return v
}

func TestDockerfile(t *testing.T) {
	root := repoRoot(t)
	instrs := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	ss := stages(t, instrs)
	if len(ss) != 2 {
		t.Fatalf("%d stages, want 2 (builder, runtime)", len(ss))
	}
	build, final := ss[0], ss[1]
	if build.Image != "golang:1.26" || build.Name == "" {
		t.Errorf("build stage FROM %s AS %q, want golang:1.26 with a name", build.Image, build.Name)
	}
	if final.Image != "gcr.io/distroless/static-debian12:nonroot" {
		t.Errorf("runtime FROM %s, want gcr.io/distroless/static-debian12:nonroot", final.Image)
	}
	for _, in := range instrs {
		if in.Cmd == "HEALTHCHECK" {
			t.Errorf("line %d: no HEALTHCHECK: Kubernetes probes /healthz and /readyz instead", in.Line)
		}
	}

	users := final.all("USER")
	if len(users) == 0 || users[len(users)-1].Args != strconv.Itoa(nonRootUID)+":"+strconv.Itoa(nonRootUID) {
		t.Errorf("runtime stage USER %v, want %d:%d (numeric, so runAsNonRoot can verify it)", users, nonRootUID, nonRootUID)
	}

	var exposed []int
	for _, in := range final.all("EXPOSE") {
		for _, p := range strings.Fields(in.Args) {
			n, err := strconv.Atoi(strings.TrimSuffix(p, "/tcp"))
			if err != nil {
				t.Errorf("line %d: EXPOSE %s", in.Line, p)
			}
			exposed = append(exposed, n)
		}
	}
	sort.Ints(exposed)
	if want := []int{config.DefaultListenPort, config.DefaultAdminPort}; !slices.Equal(exposed, want) {
		t.Errorf("EXPOSE %v, want %v (the binary's default ports)", exposed, want)
	}

	ep, cmd := final.all("ENTRYPOINT"), final.all("CMD")
	if len(ep) != 1 || len(cmd) != 1 {
		t.Fatalf("runtime stage: %d ENTRYPOINT, %d CMD; want one each", len(ep), len(cmd))
	}
	if got := jsonArgs(t, ep[0]); !slices.Equal(got, []string{"/tollgate"}) {
		t.Errorf("ENTRYPOINT %q, want [\"/tollgate\"]", got)
	}
	// The image alone and the Kubernetes container run the same command.
	_, c := baseTollgate(t, loadManifests(t))
	if got := jsonArgs(t, cmd[0]); !slices.Equal(got, c.Args) {
		t.Errorf("CMD %q, want the Deployment's args %q", got, c.Args)
	}

	copied := false
	for _, in := range final.all("COPY") {
		copied = copied || in.Args == "--from="+build.Name+" /out/tollgate /tollgate"
	}
	if !copied {
		t.Errorf("runtime stage does not COPY --from=%s /out/tollgate /tollgate", build.Name)
	}

	labels := map[string]bool{}
	for _, in := range final.all("LABEL") {
		words, err := shellWords(in.Args)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range words {
			k, _, _ := strings.Cut(w, "=")
			labels[k] = true
		}
	}
	for _, k := range []string{"title", "description", "source", "version", "revision"} {
		if !labels["org.opencontainers.image."+k] {
			t.Errorf("no LABEL org.opencontainers.image.%s", k)
		}
	}

	b := dockerBuild(t, build)
	if b.Output != "/out/tollgate" || b.Package != "./cmd/tollgate" {
		t.Errorf("go build -o %s %s, want -o /out/tollgate ./cmd/tollgate", b.Output, b.Package)
	}
}

// goBuild is a `go build` command line, normalised so that the Dockerfile's and the Makefile's
// can be compared: VERSION is a placeholder whatever the syntax that expands it.
type goBuild struct {
	Env     map[string]string // assignments before `go` that change the binary
	Flags   []string          // sorted, without -o; -ldflags=VALUE joined
	Output  string
	Package string
}

var versionRef = regexp.MustCompile(`\$\{VERSION\}|\$\(VERSION\)|\$VERSION\b`)

// revisionRef is the commit stamp (-X main.commit), a placeholder likewise.
var revisionRef = regexp.MustCompile(`\$\{REVISION\}|\$\(REVISION\)|\$REVISION\b`)

// platformEnv selects the target platform; the image cross-compiles, the Makefile builds for
// the host, and neither changes how the binary is built.
var platformEnv = map[string]bool{"GOOS": true, "GOARCH": true, "GOARM": true, "GOAMD64": true}

// parseGoBuild parses the shell command that contains `go build`.
func parseGoBuild(t *testing.T, where, cmdline string) goBuild {
	t.Helper()
	cmdline = versionRef.ReplaceAllString(cmdline, "{VERSION}")
	cmdline = revisionRef.ReplaceAllString(cmdline, "{REVISION}")
	var segment string
	for _, s := range regexp.MustCompile(`&&|;|\|\|`).Split(cmdline, -1) {
		if strings.Contains(s, "go build") {
			segment = s
		}
	}
	words, err := shellWords(segment)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	b := goBuild{Env: map[string]string{}}
	i := 0
	for ; i < len(words) && words[i] != "go"; i++ {
		k, v, ok := strings.Cut(words[i], "=")
		if !ok || strings.HasPrefix(words[i], "-") {
			continue // RUN --mount=… and the like
		}
		if !platformEnv[k] {
			b.Env[k] = v
		}
	}
	if i+1 >= len(words) || words[i+1] != "build" {
		t.Fatalf("%s: no `go build` in %q", where, cmdline)
	}
	for i += 2; i < len(words); i++ {
		w := words[i]
		switch {
		case w == "-o":
			i++
			if i < len(words) {
				b.Output = words[i]
			}
		case w == "-ldflags" || w == "-tags" || w == "-gcflags":
			i++
			if i < len(words) {
				b.Flags = append(b.Flags, w+"="+words[i])
			}
		case strings.HasPrefix(w, "-"):
			b.Flags = append(b.Flags, w)
		default:
			b.Package = w
		}
	}
	sort.Strings(b.Flags)
	return b
}

func dockerBuild(t *testing.T, build stage) goBuild {
	t.Helper()
	for _, in := range build.all("RUN") {
		if strings.Contains(in.Args, "go build") {
			return parseGoBuild(t, "Dockerfile line "+strconv.Itoa(in.Line), in.Args)
		}
	}
	t.Fatal("Dockerfile: no RUN with go build in the build stage")
	return goBuild{}
}

// makeVar matches a simple Makefile variable assignment (optionally exported).
var makeVar = regexp.MustCompile(`^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*(?:\?=|:=|::=|=)\s*(.*)$`)

// makefileBuild returns the `go build` command of the Makefile's `build` target with simple
// variables expanded (VERSION stays a placeholder). Exported assignments count as env.
func makefileBuild(t *testing.T, path string) goBuild {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("Makefile: %v (the image and `make build` must build the same binary)", err)
	}
	// Join continuation lines first.
	text := strings.ReplaceAll(string(data), "\\\n", " ")
	vars := map[string]string{}
	exported := map[string]bool{}
	var recipe []string
	inBuild := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "\t") {
			if inBuild {
				recipe = append(recipe, strings.TrimSpace(line))
			}
			continue
		}
		inBuild = false
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if m := makeVar.FindStringSubmatch(trimmed); m != nil {
			if _, seen := vars[m[1]]; !seen || !strings.Contains(trimmed, "?=") {
				vars[m[1]] = strings.TrimSpace(m[2])
			}
			exported[m[1]] = exported[m[1]] || strings.HasPrefix(trimmed, "export")
			continue
		}
		if target, _, ok := strings.Cut(trimmed, ":"); ok && slices.Contains(strings.Fields(target), "build") {
			inBuild = true
		}
	}
	expandRef := regexp.MustCompile(`\$[({]([A-Za-z_][A-Za-z0-9_]*)[)}]`)
	expand := func(s string) string {
		for range 10 { // nested references, bounded
			next := expandRef.ReplaceAllStringFunc(s, func(ref string) string {
				name := expandRef.FindStringSubmatch(ref)[1]
				if name == "VERSION" || name == "REVISION" {
					return "{" + name + "}"
				}
				return vars[name]
			})
			if next == s {
				break
			}
			s = next
		}
		return s
	}
	for _, r := range recipe {
		r = strings.TrimLeft(r, "@-+")
		full := expand(r)
		if !strings.Contains(full, "go build") {
			continue
		}
		b := parseGoBuild(t, "Makefile build recipe", full)
		for name := range exported {
			if _, set := b.Env[name]; !set && !platformEnv[name] && strings.HasPrefix(name, "CGO_") {
				b.Env[name] = expand(vars[name])
			}
		}
		return b
	}
	t.Fatal("Makefile: no `go build` in the recipe of target build")
	return goBuild{}
}

func TestBuildFlagsMatchMakefile(t *testing.T) {
	root := repoRoot(t)
	ss := stages(t, parseDockerfile(t, filepath.Join(root, "Dockerfile")))
	if len(ss) == 0 {
		t.Fatal("Dockerfile has no stages")
	}
	docker := dockerBuild(t, ss[0])
	mk := makefileBuild(t, filepath.Join(root, "Makefile"))

	want := goBuild{
		Env:   map[string]string{"CGO_ENABLED": "0"},
		Flags: []string{"-ldflags=-s -w -X main.version={VERSION} -X main.commit={REVISION}", "-trimpath"},
	}
	for _, b := range []struct {
		name string
		got  goBuild
	}{{"Dockerfile", docker}, {"Makefile", mk}} {
		if b.got.Env["CGO_ENABLED"] != want.Env["CGO_ENABLED"] {
			t.Errorf("%s: CGO_ENABLED=%q, want %q (static binary for distroless/static)", b.name, b.got.Env["CGO_ENABLED"], want.Env["CGO_ENABLED"])
		}
		if b.got.Package != "./cmd/tollgate" {
			t.Errorf("%s: builds %q, want ./cmd/tollgate", b.name, b.got.Package)
		}
	}
	if !slices.Equal(docker.Flags, want.Flags) {
		t.Errorf("Dockerfile go build flags %q, want %q", docker.Flags, want.Flags)
	}
	if !slices.Equal(docker.Flags, mk.Flags) {
		t.Errorf("go build flags differ:\n  Dockerfile %q\n  Makefile   %q", docker.Flags, mk.Flags)
	}
	if len(docker.Env) != len(mk.Env) {
		t.Errorf("build environment differs: Dockerfile %v, Makefile %v", docker.Env, mk.Env)
	}
	for k, v := range docker.Env {
		if mk.Env[k] != v {
			t.Errorf("build environment %s: Dockerfile %q, Makefile %q", k, v, mk.Env[k])
		}
	}
}

// TestDockerignoreKeepsSources makes sure the build context still has what go build needs.
func TestDockerignoreKeepsSources(t *testing.T) {
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	needed := []string{"go.mod", "go.sum", "cmd/tollgate/main.go", "internal/config/types.go", "config/demo.yaml", "policies/financial.cedar"}
	for _, line := range strings.Split(string(data), "\n") {
		pat := strings.TrimSpace(line)
		if pat == "" || strings.HasPrefix(pat, "#") || strings.HasPrefix(pat, "!") {
			continue
		}
		pat = strings.TrimSuffix(strings.TrimPrefix(pat, "/"), "/")
		for _, p := range needed {
			// A pattern excludes a path if it matches the path or one of its parent directories.
			for dir := p; dir != "."; dir = filepath.Dir(dir) {
				if ok, _ := filepath.Match(pat, dir); ok {
					t.Errorf(".dockerignore %q excludes %s, which the image build needs", line, p)
				}
			}
		}
	}
}

// TestMakefileParser pins the forms of `build` recipe the comparison above understands.
func TestMakefileParser(t *testing.T) {
	want := []string{"-ldflags=-s -w -X main.version={VERSION}", "-trimpath"}
	tests := []struct {
		name, makefile string
	}{
		{"inline", "VERSION ?= dev\n\nbuild:\n\tCGO_ENABLED=0 go build -trimpath -ldflags \"-s -w -X main.version=$(VERSION)\" -o bin/tollgate ./cmd/tollgate\n"},
		{"variables", "VERSION ?= $(shell git describe)\nLDFLAGS := -s -w -X main.version=$(VERSION)\nGO ?= go\n\n.PHONY: build test\nbuild: ## build\n\t@mkdir -p bin\n\tCGO_ENABLED=0 $(GO) build -trimpath -ldflags \"$(LDFLAGS)\" \\\n\t\t-o bin/tollgate ./cmd/tollgate\n\ntest:\n\tgo test ./...\n"},
		{"exported env", "export CGO_ENABLED := 0\nbuild test: deps\n\tgo build -trimpath -ldflags '-s -w -X main.version=${VERSION}' -o bin/tollgate ./cmd/tollgate\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "Makefile")
			if err := os.WriteFile(p, []byte(tt.makefile), 0o644); err != nil {
				t.Fatal(err)
			}
			b := makefileBuild(t, p)
			if !slices.Equal(b.Flags, want) || b.Env["CGO_ENABLED"] != "0" || b.Package != "./cmd/tollgate" || b.Output != "bin/tollgate" {
				t.Errorf("parsed %+v, want flags %q, CGO_ENABLED=0, -o bin/tollgate ./cmd/tollgate", b, want)
			}
		})
	}
}
