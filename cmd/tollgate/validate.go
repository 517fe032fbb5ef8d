package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/governance"
	"github.com/tollgate-mcp/tollgate/internal/server"
)

// upstreamProbeTimeout bounds validate's reachability check of the upstream (at most; a
// shorter sources[0].connect_timeout wins).
const upstreamProbeTimeout = 3 * time.Second

// cmdValidate checks a configuration the way `run` would start it: the file (strict decode,
// globs, Cedar), then what server.New refuses (token variables, task store, hash key, audit
// log) as errors, and an upstream that does not answer as a warning. Exit 0 when run would
// start, 1 otherwise, 2 for bad usage.
func cmdValidate(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("validate", flag.ContinueOnError)
	fl.SetOutput(stderr)
	flagPath := fl.String("config", "", "configuration file")
	offline := fl.Bool("offline", false, "skip the upstream reachability check")
	fl.Usage = func() {
		fmt.Fprint(stderr, "Usage: tollgate validate [--config FILE] [--offline]\n\nFlags:\n")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "tollgate validate: unexpected arguments %q\n", fl.Args())
		return 2
	}
	path, ok := resolveConfig("tollgate validate", *flagPath, stderr)
	if !ok {
		return 2
	}
	cfg, err := config.Load(path, os.LookupEnv)
	if err != nil {
		fmt.Fprintf(stderr, "%s: invalid\n%s\n", path, indent(err))
		return 1
	}
	// Compile what a running gateway would: globs and Cedar policies (with positions).
	_, buildErr := governance.Build(cfg, nil)
	warnings, startErr := server.Preflight(cfg, os.LookupEnv)
	if !*offline && !cfg.Sources[0].Stdio() { // a command is checked by Preflight
		if w := probeUpstream(cfg.Sources[0]); w != "" {
			warnings = append(warnings, w)
		}
	}
	for _, w := range warnings {
		fmt.Fprintf(stderr, "%s: warning: %s\n", path, w)
	}
	if err := errors.Join(buildErr, startErr); err != nil {
		fmt.Fprintf(stderr, "%s: invalid (tollgate run would refuse it)\n%s\n", path, indent(err))
		return 1
	}
	fmt.Fprintf(stdout, "%s: valid (%s, %s, %s)\n", path, count(len(cfg.Governance.Rules), "rule", "rules"),
		count(len(cfg.Approval), "workflow", "workflows"), count(len(cfg.Cedar.Policies), "policy file", "policy files"))
	return 0
}

// probeUpstream dials the upstream's host and port once, bounded, and returns a warning when
// nothing answers: run starts without its upstream (and waits for it), so this is no error.
// The URL is never printed (it may carry credentials), only host:port.
func probeUpstream(src config.Source) string {
	u, err := url.Parse(src.URL)
	if err != nil {
		return "" // Load already refused it
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	addr := net.JoinHostPort(u.Hostname(), port)
	timeout := min(upstreamProbeTimeout, src.ConnectTimeout.D())
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		cause := err.Error()
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Err != nil {
			cause = oe.Err.Error()
		}
		if errors.Is(err, context.DeadlineExceeded) {
			cause = fmt.Sprintf("no answer within %s", timeout)
		}
		return fmt.Sprintf("sources[0].url: upstream %s is not reachable (%s); tollgate run starts anyway, with /readyz at 503 and calls failing until it answers (--offline skips this check)", addr, cause)
	}
	_ = conn.Close()
	return ""
}

// resolveConfig finds the config file like run does. Without one, the error says where to
// start: the demo, or a minimal config to save as ./tollgate.yaml.
func resolveConfig(prefix, flagPath string, stderr io.Writer) (string, bool) {
	path, err := config.Resolve(flagPath, os.Getenv, exists)
	if err == nil {
		return path, true
	}
	fmt.Fprintf(stderr, "%s: %v\n", prefix, err)
	if errors.Is(err, config.ErrNoConfig) {
		fmt.Fprintf(stderr, noConfigHint, indentText(config.MinimalConfig, "    "))
	}
	return "", false
}

const noConfigHint = `
To try Tollgate without a config, run the built-in demo:  tollgate demo   (in the repository: make demo)
To put it in front of your MCP server, save this as ./tollgate.yaml (or pass --config FILE):

%s
then set an approver token and start it:

    export TOLLGATE_ADMIN_TOKEN=$(openssl rand -hex 16)
    tollgate validate && tollgate run

Every key and its default: docs/configuration.md.
`

func indentText(s, pad string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(s, "\n") {
		if line != "" {
			b.WriteString(pad + line)
		}
	}
	return b.String()
}

// count is "1 rule", "0 rules", "2 rules".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
