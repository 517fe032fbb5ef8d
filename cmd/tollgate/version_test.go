package main

import (
	"bytes"
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
