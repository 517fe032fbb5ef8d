package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/governance"
	"github.com/tollgate-mcp/tollgate/internal/policy"
	"github.com/tollgate-mcp/tollgate/internal/policyschema"
	"github.com/tollgate-mcp/tollgate/internal/policytest"
	"github.com/tollgate-mcp/tollgate/internal/rules"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

const policyUsage = `Usage:
  tollgate policy schema [--config FILE] [--tools TOOLS.json] [--out FILE] [--warn]
      write a Cedar schema built from the upstream's tools/list (each argument typed from
      the tools' inputSchema; principal, groups and the context Tollgate provides) and check
      the configuration's Cedar policies against it: a missing argument, a wrong type, an
      unknown tool, context attribute or entity type is reported with file:line; exit 1 then.
      --tools reads a saved tools/list result instead of asking the upstream; --warn
      reports mismatches without failing.
  tollgate policy explain [--config FILE] [--caller NAME] [--groups G1,G2]
                          [--annotations HINT=BOOL,…] [--json] TOOL [ARGUMENTS-JSON]
      say how a call would be decided and why: the rule that matches, each Cedar policy
      satisfied or failing (with its file:line), the outcome and what would change it.
      A held call's explanation: tollgate approvals explain ID (GET /api/v1/approvals/ID/explain).
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
	case "explain":
		return cmdPolicyExplain(args[1:], stdout, stderr)
	case "schema":
		return cmdPolicySchema(args[1:], stdout, stderr)
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
	// Every file is parsed first: a configuration among them (policies/tests/*.yaml holds the
	// one its cases name) is passed over when a case file or --config names it.
	parsed := make([]*policytest.File, len(files))
	cfgOf := make([]string, len(files))
	named := map[string]bool{}
	if *flagPath != "" {
		named[filepath.Clean(*flagPath)] = true
	}
	var configs []int
	for i, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			fmt.Fprintf(stderr, "tollgate policy test: %v\n", err)
			return 2
		}
		f, err := policytest.Parse(name, src)
		if errors.Is(err, policytest.ErrConfiguration) {
			configs = append(configs, i)
			continue
		}
		if err != nil {
			fmt.Fprintf(stderr, "tollgate policy test: invalid case file\n%s\n", indent(err))
			return 2
		}
		parsed[i] = f
		cfgOf[i] = *flagPath
		if cfgOf[i] == "" && f.Config != "" {
			cfgOf[i] = f.Config
			if !filepath.IsAbs(cfgOf[i]) {
				cfgOf[i] = filepath.Join(filepath.Dir(name), cfgOf[i])
			}
			named[filepath.Clean(cfgOf[i])] = true
		}
	}
	for _, i := range configs {
		if !named[filepath.Clean(files[i])] {
			fmt.Fprintf(stderr, "tollgate policy test: invalid case file\n  - %s: %v\n", files[i], policytest.ErrConfiguration)
			return 2
		}
		fmt.Fprintf(stderr, "tollgate policy test: %s is the configuration the cases run against, not a case file; passed over\n", files[i])
	}
	var results []policytest.Result
	for i, name := range files {
		f, cfgPath := parsed[i], cfgOf[i]
		if f == nil {
			continue
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

func cmdPolicyExplain(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("policy explain", flag.ContinueOnError)
	fl.SetOutput(stderr)
	flagPath := fl.String("config", "", "configuration file")
	caller := fl.String("caller", "", "the caller's verified identity (default: an anonymous session)")
	groups := fl.String("groups", "", "the caller's groups, comma-separated")
	annotations := fl.String("annotations", "", "the tool's MCP annotations, e.g. destructiveHint=true,readOnlyHint=false")
	asJSON := fl.Bool("json", false, "print the explanation as JSON")
	pos, err := parseInterleaved(fl, args)
	if err != nil {
		return 2
	}
	if len(pos) < 1 || len(pos) > 2 {
		fmt.Fprint(stderr, "tollgate policy explain: want TOOL [ARGUMENTS-JSON]\n\n"+policyUsage)
		return 2
	}
	tool, rawArgs := pos[0], json.RawMessage(nil)
	if len(pos) == 2 {
		if !json.Valid([]byte(pos[1])) || !strings.HasPrefix(strings.TrimSpace(pos[1]), "{") {
			fmt.Fprintln(stderr, "tollgate policy explain: ARGUMENTS-JSON must be a JSON object")
			return 2
		}
		rawArgs = json.RawMessage(pos[1])
	}
	var hints rules.Hints
	if *annotations != "" {
		m := map[string]bool{}
		for _, kv := range strings.Split(*annotations, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			b, err := strconv.ParseBool(v)
			if !ok || err != nil || !slices.Contains(config.AnnotationHints, k) {
				fmt.Fprintf(stderr, "tollgate policy explain: --annotations %q: want HINT=true|false with HINT one of %s\n", kv, strings.Join(config.AnnotationHints, ", "))
				return 2
			}
			m[k] = b
		}
		b, _ := json.Marshal(m)
		hints = rules.ParseHints(b)
	}
	path, ok := resolveConfig("tollgate policy explain", *flagPath, stderr)
	if !ok {
		return 2
	}
	cfg, err := config.Load(path, os.LookupEnv)
	if err != nil {
		fmt.Fprintf(stderr, "%s: invalid configuration\n%s\n", path, indent(err))
		return 2
	}
	s, err := governance.Build(cfg, nil)
	if err != nil {
		fmt.Fprintf(stderr, "%s: invalid configuration\n%s\n", path, indent(err))
		return 2
	}
	c := governance.Caller{Subject: *caller, SessionID: "policy-explain"}
	if *groups != "" {
		c.Groups = strings.Split(*groups, ",")
	}
	x := s.Explain(context.Background(), c, tool, hints, rawArgs, time.Now())
	if *asJSON {
		b, _ := json.MarshalIndent(x, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
		return 0
	}
	PrintExplanation(stdout, x)
	return 0
}

// PrintExplanation writes an explanation for people.
func PrintExplanation(w io.Writer, x governance.Explanation) {
	r := x.Rule
	fmt.Fprintf(w, "tool:    %s\n", x.Tool)
	where := "governance.defaults"
	if r.Index >= 0 {
		where = fmt.Sprintf("governance.rules[%d] %q", r.Index, r.Match)
	}
	extra := []string{r.Mode}
	if r.PolicyID != "" {
		extra = append(extra, "policy_id "+r.PolicyID)
	}
	if r.Workflow != "" {
		extra = append(extra, "workflow "+r.Workflow)
	}
	fmt.Fprintf(w, "rule:    %s → %s (%s)\n", where, r.Action, strings.Join(extra, ", "))
	if x.Cedar != "" {
		fmt.Fprintf(w, "cedar:   %s\n", x.Cedar)
		for _, p := range x.Policies {
			kind := p.Effect
			if p.Decision == "approve" {
				kind += " @decision(approve)"
			}
			line := fmt.Sprintf("  %-9s %-26s %s  %s", p.Outcome, kind, p.ID, p.Position)
			if p.Error != "" {
				line += "  error: " + p.Error
			}
			fmt.Fprintln(w, line)
		}
		if x.NotMatched > 0 {
			fmt.Fprintf(w, "  (%d other policies did not apply)\n", x.NotMatched)
		}
	}
	out := string(x.Outcome)
	if x.Would != "" {
		out += fmt.Sprintf(" (audit mode: would %s)", x.Would)
	}
	if x.Workflow != "" {
		out += " — workflow " + x.Workflow
	}
	fmt.Fprintf(w, "outcome: %s\n", out)
	fmt.Fprintln(w, "what would change it:")
	for _, c := range x.Changes {
		fmt.Fprintf(w, "  - %s\n", c)
	}
}

func cmdPolicySchema(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("policy schema", flag.ContinueOnError)
	fl.SetOutput(stderr)
	flagPath := fl.String("config", "", "configuration file")
	toolsFile := fl.String("tools", "", "a saved tools/list result (JSON) instead of the upstream's")
	out := fl.String("out", "", "write the schema to this file (default: standard output)")
	warnOnly := fl.Bool("warn", false, "report mismatches as warnings and exit 0 (policies written for tools this upstream does not have)")
	pos, err := parseInterleaved(fl, args)
	if err != nil {
		return 2
	}
	if len(pos) > 0 {
		fmt.Fprintf(stderr, "tollgate policy schema: unexpected arguments %q\n", pos)
		return 2
	}
	path, ok := resolveConfig("tollgate policy schema", *flagPath, stderr)
	if !ok {
		return 2
	}
	cfg, err := config.Load(path, os.LookupEnv)
	if err != nil {
		fmt.Fprintf(stderr, "%s: invalid configuration\n%s\n", path, indent(err))
		return 2
	}
	var raw []byte
	if *toolsFile != "" {
		raw, err = os.ReadFile(*toolsFile)
	} else {
		raw, err = fetchTools(cfg.Sources[0])
	}
	if err != nil {
		fmt.Fprintf(stderr, "tollgate policy schema: %v\n", err)
		return 2
	}
	tools, err := policyschema.ParseTools(raw)
	if err != nil {
		fmt.Fprintf(stderr, "tollgate policy schema: %v\n", err)
		return 2
	}
	schema, warns := policyschema.Build(tools)
	for _, w := range warns {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	target := *out
	if target == "" {
		f, err := os.CreateTemp("", "tollgate-*.cedarschema")
		if err != nil {
			fmt.Fprintf(stderr, "tollgate policy schema: %v\n", err)
			return 2
		}
		f.Close()
		target = f.Name()
		defer os.Remove(target)
		fmt.Fprint(stdout, schema)
	}
	if err := os.WriteFile(target, []byte(schema), 0o644); err != nil {
		fmt.Fprintf(stderr, "tollgate policy schema: %v\n", err)
		return 2
	}
	files := make([]string, len(cfg.Cedar.Policies))
	for i, p := range cfg.Cedar.Policies {
		files[i] = cfg.ResolvePath(p)
	}
	var problems []error
	if len(files) > 0 {
		if _, err := policy.Load(files, target); err != nil {
			problems = append(problems, err)
		}
		for _, f := range files {
			if src, err := os.ReadFile(f); err == nil {
				problems = append(problems, policyschema.Check(f, src, tools)...)
			}
		}
	}
	if err := errors.Join(problems...); err != nil {
		fmt.Fprintf(stderr, "%s: Cedar policies do not match the upstream's %d tools:\n%s\n", path, len(tools), indent(err))
		if *warnOnly {
			return 0
		}
		return 1
	}
	fmt.Fprintf(stderr, "%s: %d policy files match the schema of the upstream's %d tools\n", path, len(files), len(tools))
	return 0
}

// fetchTools reads every tools/list page of a URL upstream as one {"tools": [...]} result.
func fetchTools(src config.Source) ([]byte, error) {
	if src.Stdio() {
		return nil, errors.New("sources[0] is a command: save its tools/list result and pass it with --tools")
	}
	up, err := upstream.New(src.URL, upstream.Options{ConnectTimeout: src.ConnectTimeout.D()})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sess, err := up.Handshake(ctx, json.RawMessage(
		`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"tollgate","version":"policy-schema"}}`), "")
	if err != nil {
		return nil, fmt.Errorf("upstream: %w (or pass a saved tools/list result with --tools)", err)
	}
	defer up.EndSession(sess)
	var all []json.RawMessage
	if _, err := up.Pages(ctx, sess.Header(), "tools/list", "tollgate-schema-", config.DefaultToolsMaxPages, nil, func(result json.RawMessage) error {
		var page struct {
			Tools []json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal(result, &page); err != nil {
			return err
		}
		all = append(all, page.Tools...)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("upstream: %w", err)
	}
	return json.Marshal(map[string]any{"tools": all})
}
