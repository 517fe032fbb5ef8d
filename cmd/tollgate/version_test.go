package main

import (
	"bytes"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersion: the -ldflags stamps win; without them the module version of a `go install
// …@vX.Y.Z` build and the VCS revision of a checkout build are used; with nothing, "dev" and
// "unknown". `tollgate version` prints version, commit and Go version.
func TestVersion(t *testing.T) {
	vcs := &debug.BuildInfo{Main: debug.Module{Version: "v0.2.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "true"}}}
	for _, tt := range []struct {
		name, version, commit string
		info                  *debug.BuildInfo
		want                  buildInfo
	}{
		{"ldflags", "v0.1.0", "feedface", vcs, buildInfo{Version: "v0.1.0", Commit: "feedface", Modified: true}},
		{"build info fallback", "dev", "", vcs, buildInfo{Version: "v0.2.0", Commit: "0123abcd", Modified: true}},
		{"devel checkout", "dev", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, buildInfo{Version: "dev", Commit: "unknown"}},
		{"nothing", "", "", nil, buildInfo{Version: "dev", Commit: "unknown"}},
	} {
		got := combineBuildInfo(tt.version, tt.commit, tt.info)
		tt.want.Go, tt.want.Platform = runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH
		if got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
	var out bytes.Buffer
	if code := run([]string{"version"}, &out, &out); code != 0 {
		t.Fatalf("tollgate version: exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "tollgate ") || !strings.HasPrefix(lines[1], "commit ") ||
		!strings.Contains(lines[2], runtime.Version()) {
		t.Errorf("tollgate version printed %q", out.String())
	}
}

// TestRunStartErrorsAreText: a configuration `run` cannot start with is reported in one form —
// text on stderr, one "  - " line per problem, exit 1 — whether config.Load refuses it or
// server.New does (an approver token shared with $TOLLGATE_ADMIN_TOKEN used to come out as a
// JSON log line "startup failed"); the hint says what to do about the exported admin token.
func TestRunStartErrorsAreText(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/tollgate.yaml"
	if err := os.WriteFile(path, []byte("schema: 1\nsources: [{id: u, kind: mcp, url: \"http://127.0.0.1:1/mcp\"}]\n"+
		"approvers: [{name: alice, token_env: ALICE_TOKEN}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const tok = "0123456789abcdef0123456789abcdef"
	t.Setenv("ALICE_TOKEN", tok)
	t.Setenv("TOLLGATE_ADMIN_TOKEN", tok)
	t.Setenv("TOLLGATE_DATA_DIR", dir)
	t.Setenv("TOLLGATE_LISTEN", "127.0.0.1:0")
	t.Setenv("TOLLGATE_ADMIN_LISTEN", "127.0.0.1:0")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"run", "--config", path}, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr.String())
	}
	out := stderr.String()
	want := "tollgate: cannot start with configuration " + path + ":\n  - $TOLLGATE_ADMIN_TOKEN: approver \"admin\" has the same token as approver \"alice\"; " +
		"the gateway reads $TOLLGATE_ADMIN_TOKEN as approver \"admin\": unset it in the shell that runs tollgate"
	if !strings.Contains(out, want) {
		t.Errorf("stderr:\n%s\nwant it to contain:\n%s", out, want)
	}
	if strings.Contains(out, `"level":"ERROR"`) || strings.Contains(out, tok) {
		t.Errorf("the start error came out as a JSON log line or with the token:\n%s", out)
	}
}

// TestHelpExitsZero: `tollgate COMMAND --help` (docs/cli.md: "prints its flags") is a request,
// not a usage mistake: exit 0 with the usage, as `tollgate call --help` did; an unknown flag
// stays exit 2. run's usage names the stdio form (-- CMD ARGS…).
func TestHelpExitsZero(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--help"}, "-- CMD ARGS…"},
		{[]string{"validate", "--help"}, "tollgate validate [--config FILE] [--offline]"},
		{[]string{"backup", "--help"}, "tollgate backup --out FILE"},
		{[]string{"call", "--help"}, "tollgate call TOOL"},
	} {
		var out, errOut bytes.Buffer
		if code := run(tc.args, &out, &errOut); code != 0 || !strings.Contains(out.String()+errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, output %s%s; want 0 and %q", tc.args, code, out.String(), errOut.String(), tc.want)
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"run", "--bogus"}, &out, &errOut); code != 2 {
		t.Errorf("run --bogus: exit %d, want 2", code)
	}
}
