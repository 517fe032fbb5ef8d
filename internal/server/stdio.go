package server

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/stdio"
)

// stdioURL is the endpoint upstream.Client addresses when a stdio.Transport answers instead
// of the network; it is never dialed.
const stdioURL = "http://stdio.invalid/mcp"

// startStdio returns the transport of a command source, which starts processes only as
// sessions open (docs/configuration.md, Stdio servers). keep reports a client session Tollgate
// still needs (session.Registry.Busy: an open stream or a pending task), which neither
// idle_timeout nor max_processes ends.
// onEnd is told each session that ended (stdio.Options.OnEnd).
func startStdio(src config.Source, lookupEnv func(string) (string, bool), log *slog.Logger, keep func(string) bool, onEnd func(string)) (*stdio.Transport, error) {
	cmd, err := resolveCommand(src, lookupEnv)
	if err != nil {
		return nil, err
	}
	run, err := runAs(src, os.Geteuid())
	if err != nil {
		return nil, err
	}
	return stdio.New(stdio.Options{
		Command: cmd, Args: src.Args, Env: src.ProcessEnv(lookupEnv), Dir: src.Cwd, Share: src.Share,
		MaxProcesses: src.MaxProcesses, IdleTimeout: src.IdleTimeout.D(), Keep: keep, OnEnd: onEnd, RunAs: run,
		Logger: log.With("source", src.ID),
	}), nil
}

// runAs is sources[0].run_as for the transport; changing user needs Tollgate to run as root
// (euid 0), which is checked at start rather than at the first session.
func runAs(src config.Source, euid int) (*stdio.Credential, error) {
	if !src.RunAs.Set() {
		return nil, nil
	}
	if euid != 0 {
		return nil, fmt.Errorf("sources[0].run_as: Tollgate runs as uid %d; only root may start a process as another user (run Tollgate as root, or remove run_as and run it as a user of its own)", euid)
	}
	return &stdio.Credential{UID: uint32(src.RunAs.UID), GID: uint32(src.RunAs.GID)}, nil
}

// resolveCommand checks a command source can run (Preflight, start): the command is found
// — in the process's own PATH, as exec would look it up — and cwd is a directory.
func resolveCommand(src config.Source, lookupEnv func(string) (string, bool)) (string, error) {
	cmd := src.Command
	if !strings.ContainsRune(cmd, filepath.Separator) {
		path := ""
		for _, kv := range src.ProcessEnv(lookupEnv) {
			if v, ok := strings.CutPrefix(kv, "PATH="); ok {
				path = v
			}
		}
		found, err := lookPath(cmd, path)
		if err != nil {
			return "", fmt.Errorf("sources[0].command: %q not found in PATH", cmd)
		}
		cmd = found
	} else if fi, err := os.Stat(cmd); err != nil || fi.IsDir() {
		return "", fmt.Errorf("sources[0].command: %s is not an executable file", cmd)
	}
	if src.Cwd != "" {
		if fi, err := os.Stat(src.Cwd); err != nil || !fi.IsDir() {
			return "", fmt.Errorf("sources[0].cwd: %s is not a directory", src.Cwd)
		}
	}
	return cmd, nil
}

// lookPath finds name in the directories of path (the process's PATH, not necessarily
// Tollgate's).
func lookPath(name, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// upstreamName is how logs name the upstream: its URL, or the command (arguments may carry
// secrets and are left out).
func upstreamName(src config.Source) string {
	if src.Stdio() {
		return "stdio:" + filepath.Base(src.Command)
	}
	return src.URL
}
