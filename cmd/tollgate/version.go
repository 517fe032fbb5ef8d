package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// commit is set at build time with -ldflags "-X main.commit=…" (Makefile REVISION, the
// Dockerfile's REVISION build argument); when it is empty the VCS revision Go stamps into a
// build from a git checkout is used.
var commit = ""

// buildInfo is what `tollgate version` prints and the server logs at start.
type buildInfo struct {
	Version, Commit, Go, Platform string
	Modified                      bool // built from a checkout with uncommitted changes (vcs.modified)
}

// readBuildInfo combines the -ldflags stamps with runtime/debug.ReadBuildInfo: a `go install
// …@v0.1.0` build has no ldflags but knows its module version; a plain `go build` in a checkout
// knows its vcs.revision.
func readBuildInfo() buildInfo {
	info, _ := debug.ReadBuildInfo()
	return combineBuildInfo(version, commit, info)
}

func combineBuildInfo(version, commit string, info *debug.BuildInfo) buildInfo {
	b := buildInfo{Version: version, Commit: commit, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if info != nil {
		if b.Version == "" || b.Version == "dev" {
			if v := info.Main.Version; v != "" && v != "(devel)" {
				b.Version = v
			}
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				if b.Commit == "" {
					b.Commit = s.Value
				}
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	if b.Version == "" {
		b.Version = "dev"
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	return b
}

func printVersion(w io.Writer) {
	b := readBuildInfo()
	c := b.Commit
	if b.Modified {
		c += " (modified)"
	}
	fmt.Fprintf(w, "tollgate %s\ncommit   %s\ngo       %s %s\n", b.Version, c, b.Go, b.Platform)
}
