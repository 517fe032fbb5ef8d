package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/demo"
	"github.com/tollgate-mcp/tollgate/internal/server"
)

// strs is a repeatable string flag.
type strs []string

func (s *strs) String() string     { return strings.Join(*s, ",") }
func (s *strs) Set(v string) error { *s = append(*s, v); return nil }

// runFlags are run's flags: --config, and with "-- CMD ARGS…" the shorthands for a stdio
// server (docs/configuration.md, Stdio servers).
type runFlags struct {
	config             string
	approve, deny, env strs
	argv               []string // after "--"
	help               bool     // --help: the usage was printed
}

func parseRunFlags(args []string, stderr io.Writer) (runFlags, bool) {
	var f runFlags
	fl := flag.NewFlagSet("run", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.StringVar(&f.config, "config", "", "configuration file")
	fl.Var(&f.approve, "approve", "with -- CMD: tools matching this glob need approval (repeatable)")
	fl.Var(&f.deny, "deny", "with -- CMD: tools matching this glob are denied (repeatable; before --approve)")
	fl.Var(&f.env, "env", "with -- CMD: pass this variable of Tollgate's environment to the server (repeatable)")
	fl.Usage = func() {
		fmt.Fprint(stderr, "Usage:\n  tollgate run [--config FILE]\n  tollgate run [--config FILE] [--approve GLOB]… [--deny GLOB]… [--env NAME]… -- CMD ARGS…\n\nFlags:\n")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		f.help = errors.Is(err, flag.ErrHelp)
		return f, false
	}
	dash := slices.Index(args, "--")
	if fl.NArg() > 0 && (dash < 0 || len(args)-dash-1 != fl.NArg()) {
		fmt.Fprintf(stderr, "tollgate run: unexpected arguments %q (a stdio server's command goes after --: tollgate run -- CMD ARGS…)\n", fl.Args())
		return f, false
	}
	f.argv = fl.Args()
	if len(f.argv) == 0 && (len(f.approve)+len(f.deny)+len(f.env) > 0 || dash >= 0) {
		fmt.Fprintln(stderr, "tollgate run: --approve, --deny and --env need a stdio server's command after --: tollgate run [--approve GLOB] -- CMD ARGS…")
		return f, false
	}
	return f, true
}

// cmdRunCommand is `tollgate run [--config FILE] [--approve GLOB]… [--deny GLOB]… [--env NAME]…
// -- CMD ARGS…`: a gateway in front of the stdio server CMD, with the file's configuration or,
// without one, the defaults (forward every call) and the shorthand rules; it prints where the
// MCP endpoint and the console are, like tollgate demo.
func cmdRunCommand(ctx context.Context, f runFlags, stdout, stderr io.Writer) int {
	log, err := newLogger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "tollgate:", err)
		return 2
	}
	lookup := os.LookupEnv
	token, generated := os.Getenv(config.EnvAdminToken), false
	var cfg *config.Config
	if f.config != "" {
		cfg, err = config.Load(f.config, os.LookupEnv)
	} else {
		if token == "" && os.Getenv(config.EnvAdminToken+config.FileSuffix) == "" {
			var b [16]byte
			_, _ = rand.Read(b[:])
			token, generated = hex.EncodeToString(b[:]), true
		}
		lookup = func(k string) (string, bool) {
			if k == config.EnvAdminToken {
				return token, true
			}
			return os.LookupEnv(k)
		}
		cfg, err = config.Parse([]byte(config.CommandConfig), "", lookup)
	}
	if err == nil {
		err = cfg.UseCommand(f.argv, f.approve, f.deny, f.env, os.LookupEnv)
	}
	if err != nil {
		fmt.Fprintf(stderr, "tollgate run: invalid configuration:\n%s\n", indent(err))
		return 1
	}
	held, stopHeld := startHeldPrinter(ctx, stdout)
	defer stopHeld()
	label := f.config
	if label == "" {
		label = "(command line)"
	}
	return serve(ctx, cfg, label, stderr, server.Options{Logger: log, Version: readBuildInfo().Version, LookupEnv: lookup}, func(s *server.Server) {
		console := "http://" + s.AdminAddr() + "/approvals"
		s.SubscribeTasks(heldLines(demo.Banner{CLI: cliName(), ConsoleURL: console}, held))
		fmt.Fprint(stdout, runBanner(cfg, "http://"+s.MCPAddr()+"/mcp", console, token, generated))
	})
}

// runBanner says where everything is; the token only when run made it up (else it is the
// operator's own, from $TOLLGATE_ADMIN_TOKEN or the file).
func runBanner(cfg *config.Config, mcpURL, consoleURL, token string, generated bool) string {
	var b strings.Builder
	src := cfg.Sources[0]
	fmt.Fprintf(&b, "Tollgate is running in front of the stdio server %s.\n\n", src.Command)
	fmt.Fprintf(&b, "  MCP endpoint     %s      (point your MCP client here)\n", mcpURL)
	fmt.Fprintf(&b, "  Approval console %s\n", consoleURL)
	if generated {
		fmt.Fprintf(&b, "  Admin token      %s      (for the console and `tollgate approvals`)\n", token)
	}
	b.WriteString("\nRules:")
	if len(cfg.Governance.Rules) == 0 {
		b.WriteString(" none")
	}
	for _, r := range cfg.Governance.Rules {
		fmt.Fprintf(&b, " %s %s;", r.Match, r.Action)
	}
	fmt.Fprintf(&b, " otherwise %s.\nStop with Ctrl-C.\n", cfg.Governance.Defaults.Action)
	return b.String()
}
