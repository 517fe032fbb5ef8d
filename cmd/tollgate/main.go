// Command tollgate is a governance gateway for one MCP server (docs/contract.md §4).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	configs "github.com/tollgate-mcp/tollgate/config"
	"github.com/tollgate-mcp/tollgate/internal/approval"
	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/demo"
	"github.com/tollgate-mcp/tollgate/internal/server"
	"github.com/tollgate-mcp/tollgate/policies"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

const usage = `Tollgate — a governance gateway for one MCP server.

Usage:
  tollgate [run] [--config FILE]      run the gateway (default)
  tollgate run [--config FILE] [--approve GLOB]… [--deny GLOB]… [--env NAME]… -- CMD ARGS…
                                      run the gateway in front of a stdio MCP server it starts
                                      (every call forwarded unless a rule says otherwise)
  tollgate demo                       run the gateway in front of a built-in demo MCP server
  tollgate validate [--config FILE] [--offline]
                                      check a configuration as run would start it (rules, Cedar,
                                      token variables, task store); an unreachable upstream warns
  tollgate call TOOL [JSON] [--era legacy|modern] [--task] [--url URL]
                                      call a tool through Tollgate; wait for a held one
                                      (tollgate call --help)
  tollgate approvals list|summary|show ID|explain ID|approve ID|reject ID [--json]
                                      decide held calls (tollgate approvals help)
  tollgate backup --out FILE          copy the running gateway's file task store, online
                                      (tollgate backup --help)
  tollgate version                    version (semver tag), commit and Go version of this binary
  tollgate policy test|explain|schema …
                                      test rules and Cedar policies against expected
                                      decisions, explain a decision, check policies
                                      against the upstream's tools (tollgate policy help)
  tollgate pins list|accept TOOL|reject TOOL|export
                                      review changed tool definitions (tollgate pins help)

Config lookup: --config, $TOLLGATE_CONFIG, ./tollgate.yaml, /etc/tollgate/config.yaml.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cmd := "run"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch cmd {
	case "run":
		return cmdRun(ctx, args, stdout, stderr)
	case "demo":
		return cmdDemo(ctx, args, stdout, stderr)
	case "validate":
		return cmdValidate(args, stdout, stderr)
	case "call":
		return cmdCall(ctx, args, stdout, stderr)
	case "approvals":
		return approval.RunCLI(ctx, args, stdout, stderr, os.Getenv)
	case "backup":
		return cmdBackup(ctx, args, stdout, stderr)
	case "policy":
		return cmdPolicy(args, stdout, stderr)
	case "pins":
		return approval.RunPinsCLI(ctx, args, stdout, stderr, os.Getenv)
	case "version", "--version":
		printVersion(stdout)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "tollgate: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
}

func newLogger(w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if v := os.Getenv("TOLLGATE_LOG_LEVEL"); v != "" {
		if err := lvl.UnmarshalText([]byte(v)); err != nil {
			return nil, fmt.Errorf("TOLLGATE_LOG_LEVEL=%q: want debug, info, warn or error", v)
		}
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl})), nil
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f, ok := parseRunFlags(args, stderr)
	if !ok {
		if f.help {
			return 0
		}
		return 2
	}
	if len(f.argv) > 0 {
		return cmdRunCommand(ctx, f, stdout, stderr)
	}
	flagPath := f.config
	log, err := newLogger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		return 2
	}
	path, ok := resolveConfig("tollgate", flagPath, stderr)
	if !ok {
		return 2
	}
	cfg, err := config.Load(path, os.LookupEnv)
	if err != nil {
		// NF-002.1: a config that does not load stops the start with every problem listed.
		fmt.Fprintf(stderr, "tollgate: invalid configuration %s:\n%s\n", path, indent(err))
		return 1
	}
	return serve(ctx, cfg, path, stderr, server.Options{Logger: log, Version: readBuildInfo().Version}, nil)
}

// serve runs a server until ctx ends; SIGHUP reloads the configuration.
//
// Errors have one form each (README "Command line"): a configuration that cannot start —
// refused by config.Load or by server.New (tokens, keys, the task store, the rules) — is
// plain text on stderr, "tollgate: …" with one "  - " line per problem, the form `validate`
// prints, and exit status 1; everything after the start (listening, serving, reloads) is a
// JSON log line.
func serve(ctx context.Context, cfg *config.Config, path string, stderr io.Writer, o server.Options, started func(*server.Server)) int {
	srv, err := server.New(cfg, o)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate: cannot start with configuration %s:\n%s\n", path, indent(err))
		return 1
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				srv.Reload()
			}
		}
	}()
	if started != nil {
		started(srv)
	}
	if err := srv.Run(ctx); err != nil {
		o.Logger.Error("server stopped", "error", err.Error())
		return 1
	}
	return 0
}

func indent(err error) string {
	var b strings.Builder
	for _, line := range strings.Split(err.Error(), "\n") {
		b.WriteString("  - ")
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n")
}

// cmdDemo runs the built-in demo MCP server and the gateway in front of it with the embedded
// config/demo.yaml (the files are written to a temporary directory so hot reload works on them).
func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "tollgate demo: takes no arguments (set TOLLGATE_LISTEN / TOLLGATE_ADMIN_LISTEN to move it)\n")
		return 2
	}
	log, err := newLogger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		return 2
	}
	dir, err := os.MkdirTemp("", "tollgate-demo-")
	if err != nil {
		fmt.Fprintln(stderr, "tollgate demo:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := writeDemoFiles(dir); err != nil {
		fmt.Fprintln(stderr, "tollgate demo:", err)
		return 1
	}
	d := demo.New()
	upURL, stopDemo, err := d.Start(ctx, "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(stderr, "tollgate demo: starting the demo MCP server:", err)
		return 1
	}
	defer stopDemo(context.Background())

	token := os.Getenv("TOLLGATE_ADMIN_TOKEN")
	if token == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		token = hex.EncodeToString(b[:])
	}
	env := func(k string) (string, bool) {
		switch k {
		case "TOLLGATE_UPSTREAM_URL":
			return upURL, true
		case "TOLLGATE_ADMIN_TOKEN":
			return token, true
		}
		return os.LookupEnv(k)
	}
	cfgPath := filepath.Join(dir, "config", "demo.yaml")
	cfg, err := config.Load(cfgPath, env)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate demo: embedded config invalid:\n%s\n", indent(err))
		return 1
	}
	held, stopHeld := startHeldPrinter(ctx, stdout)
	defer stopHeld()
	return serve(ctx, cfg, "(embedded demo)", stderr, server.Options{Logger: log, Version: readBuildInfo().Version, LookupEnv: env}, func(s *server.Server) {
		b := demo.Banner{CLI: cliName(), MCPURL: "http://" + s.MCPAddr() + "/mcp", AdminURL: "http://" + s.AdminAddr(),
			ConsoleURL: "http://" + s.AdminAddr() + "/approvals", Token: token, Upstream: upURL, Config: cfgPath}
		s.SubscribeTasks(heldLines(b, held))
		fmt.Fprint(stdout, b)
	})
}

// writeDemoFiles lays out config/demo.yaml and policies/*.cedar under dir, as in the repo, so
// the config's relative policy paths resolve.
func writeDemoFiles(dir string) error {
	copyFS := func(src fs.FS, sub string, match func(string) bool) error {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return err
		}
		return fs.WalkDir(src, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !match(p) {
				return err
			}
			b, err := fs.ReadFile(src, p)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, sub, p), b, 0o644)
		})
	}
	if err := copyFS(configs.FS, "config", func(p string) bool { return p == "demo.yaml" }); err != nil {
		return err
	}
	if err := copyFS(policies.FS, "policies", func(p string) bool { return strings.HasSuffix(p, ".cedar") }); err != nil {
		return err
	}
	if !exists(filepath.Join(dir, "config", "demo.yaml")) {
		return errors.New("embedded demo.yaml missing")
	}
	return nil
}
