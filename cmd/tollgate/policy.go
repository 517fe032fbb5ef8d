package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/governance"
	"github.com/tollgate-mcp/tollgate/internal/policytest"
)

const policyUsage = `Usage:
  tollgate policy test [--config FILE] CASES.yaml…
      run policy test cases against a configuration's rules and Cedar policies; exit 1 on
      any mismatch (each shown as want/got), 2 on bad usage or unreadable files. A case file
      may name its configuration (config:, relative to the file); --config overrides it.
`

// cmdPolicy runs the policy subcommands.
func cmdPolicy(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, policyUsage)
		return 2
	}
	switch args[0] {
	case "test":
		return cmdPolicyTest(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, policyUsage)
		return 0
	}
	fmt.Fprintf(stderr, "tollgate policy: unknown subcommand %q\n\n%s", args[0], policyUsage)
	return 2
}

// parseInterleaved parses flags that may come before, between or after the positional
// arguments (`policy test a.yaml --config x.yaml b.yaml`).
func parseInterleaved(fl *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fl.Parse(args); err != nil {
			return nil, err
		}
		if fl.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fl.Arg(0))
		args = fl.Args()[1:]
	}
}

func cmdPolicyTest(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("policy test", flag.ContinueOnError)
	fl.SetOutput(stderr)
	flagPath := fl.String("config", "", "configuration file (overrides the case files' config:)")
	files, err := parseInterleaved(fl, args)
	if err != nil {
		return 2
	}
	if len(files) == 0 {
		fmt.Fprint(stderr, "tollgate policy test: no case files\n\n"+policyUsage)
		return 2
	}
	snaps := map[string]*governance.Snapshot{}
	snapshot := func(path string) (*governance.Snapshot, bool) {
		if s, ok := snaps[path]; ok {
			return s, true
		}
		cfg, err := config.Load(path, os.LookupEnv)
		if err != nil {
			fmt.Fprintf(stderr, "%s: invalid configuration\n%s\n", path, indent(err))
			return nil, false
		}
		s, err := governance.Build(cfg, nil)
		if err != nil {
			fmt.Fprintf(stderr, "%s: invalid configuration\n%s\n", path, indent(err))
			return nil, false
		}
		snaps[path] = s
		return s, true
	}
	var results []policytest.Result
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			fmt.Fprintf(stderr, "tollgate policy test: %v\n", err)
			return 2
		}
		f, err := policytest.Parse(name, src)
		if err != nil {
			fmt.Fprintf(stderr, "tollgate policy test: invalid case file\n%s\n", indent(err))
			return 2
		}
		cfgPath := *flagPath
		if cfgPath == "" && f.Config != "" {
			cfgPath = f.Config
			if !filepath.IsAbs(cfgPath) {
				cfgPath = filepath.Join(filepath.Dir(name), cfgPath)
			}
		}
		if cfgPath == "" {
			p, ok := resolveConfig("tollgate policy test", "", stderr)
			if !ok {
				return 2
			}
			cfgPath = p
		}
		s, ok := snapshot(cfgPath)
		if !ok {
			return 2
		}
		results = append(results, policytest.Run(s, name, f)...)
	}
	if policytest.Report(stdout, results) > 0 {
		return 1
	}
	return 0
}
