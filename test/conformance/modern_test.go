//go:build unix

package conformance

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// envNextCLI overrides the entry point of the 2026-07-28 suite (npm alias conformance-next =
// @modelcontextprotocol/conformance@0.2.0-alpha.12, pinned in test/npm).
const envNextCLI = "TOLLGATE_CONFORMANCE_NEXT_CLI"

// expectation is what one scenario does against the fixture directly and through Tollgate.
// When the two differ, why says what Tollgate lacks and match is a text that at least one
// failed check's message contains: the scenario must fail for that reason, not another.
type expectation struct {
	direct, through outcome
	why             string
	match           string
}

// modernExpected is the visible record of the 2026-07-28 scenarios through Tollgate. The test
// fails when a scenario does anything else — including an expected failure that now passes:
// then this table is out of date and must be updated with the change that fixed it. With
// Tollgate's 2026-07-28 era in place (era per request, server/discover, header checks, tasks
// routed to the upstream) every scenario behaves through Tollgate as it does directly.
var modernExpected = map[string]expectation{
	"server-stateless":             {pass, pass, "", ""},
	"tasks-lifecycle":              {pass, pass, "", ""},
	"tasks-capability-negotiation": {pass, pass, "", ""},
	"tasks-wire-fields":            {pass, pass, "", ""},
	"tasks-request-state-removal":  {pass, pass, "", ""},
	"tasks-mrtr-input":             {pass, pass, "", ""},
	"tasks-request-headers":        {pass, pass, "", ""},
	"tasks-dispatch-and-envelope":  {pass, pass, "", ""},
	"tasks-required-task-error":    {pass, pass, "", ""},
	"tasks-mrtr-composition":       {pass, pass, "", ""},
	// The suite only reports SKIPPED here: status notifications move to subscriptions/listen
	// and the scenario awaits its rewrite upstream.
	"tasks-status-notifications": {noCheck, noCheck, "", ""},
}

// TestModernConformanceThroughTollgate runs the 2026-07-28 suite's server-stateless and tasks-*
// scenarios against test/fixture/modern (mcp-go v1.2.1 with the SEP-2663 tasks extension)
// directly and through Tollgate (forward everything), and checks both against modernExpected.
func TestModernConformanceThroughTollgate(t *testing.T) {
	root, node, cli := needSuite(t, envNextCLI, "conformance-next")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	logDir := t.TempDir()

	scenarios := modernScenarios(ctx, t, node, cli)
	fixtureBin := filepath.Join(t.TempDir(), "modernfixture")
	goBuild(ctx, t, root, fixtureBin, "./test/fixture/modern/cmd/modernfixture")
	tollgateBin := buildTollgate(ctx, t, root)

	upAddr := freeAddr(t)
	upExited := startProc(t, logDir, "modernfixture", root, nil, fixtureBin, "-addr", upAddr)
	waitReady(ctx, t, "http://"+upAddr+"/health", upExited, logDir, "modernfixture")
	upstreamURL := "http://" + upAddr + "/mcp"
	tollgateURL := startTollgate(ctx, t, root, logDir, tollgateBin, upstreamURL)

	suite := &suiteRunner{node: node, cli: cli, root: root, outDir: filepath.Join(logDir, "results")}
	direct, through := map[string]scenarioResult{}, map[string]scenarioResult{}
	for _, name := range scenarios {
		exp := modernExpected[name]
		direct[name] = suite.runOne(ctx, t, "direct", upstreamURL, name, exp.direct)
		through[name] = suite.runOne(ctx, t, "tollgate", tollgateURL, name, exp.through)
	}

	problems := map[string]string{}
	for _, name := range scenarios {
		if p := judge(modernExpected[name], direct[name], through[name]); p != "" {
			problems[name] = p
		}
	}
	table := renderModernTable(scenarios, direct, through, problems, upstreamURL)
	fmt.Println(table)
	if err := os.WriteFile("last-run-modern.md", []byte(table), 0o644); err != nil {
		t.Errorf("write last-run-modern.md: %v", err)
	}
	for _, name := range scenarios {
		if p := problems[name]; p != "" {
			t.Errorf("scenario %s: %s", name, p)
		}
	}
	if len(problems) > 0 {
		dumpLog(t, logDir, "tollgate")
	}
}

// modernScenarios lists the suite's server-stateless and tasks-* server scenarios and checks
// that modernExpected covers exactly them, so a suite bump cannot add or drop one silently.
func modernScenarios(ctx context.Context, t *testing.T, node, cli string) []string {
	t.Helper()
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(lctx, node, cli, "list").Output()
	if err != nil {
		t.Fatalf("conformance list: %v", err)
	}
	got := serverScenarios(out, func(n string) bool { return n == "server-stateless" || strings.HasPrefix(n, "tasks-") })
	var want []string
	for n := range modernExpected {
		want = append(want, n)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("the suite's scenarios %v differ from modernExpected %v: update the table", got, want)
	}
	return got
}

// serverScenarios parses `conformance list`: "  - name [versions]" lines under "Server
// scenarios", keeping the names keep accepts, sorted.
func serverScenarios(list []byte, keep func(string) bool) []string {
	var names []string
	inServer := false
	sc := bufio.NewScanner(bytes.NewReader(list))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, " ") {
			inServer = strings.HasPrefix(line, "Server scenarios")
			continue
		}
		name, ok := strings.CutPrefix(strings.TrimSpace(line), "- ")
		if !inServer || !ok {
			continue
		}
		name, _, _ = strings.Cut(name, " ")
		if keep(name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// runOne runs one scenario; an outcome other than the expected one is retried (up to retries
// times) so a one-off failure neither hides nor fakes a change.
func (s *suiteRunner) runOne(ctx context.Context, t *testing.T, label, url, name string, want outcome) scenarioResult {
	t.Helper()
	r, ok := s.run(ctx, t, label, url, name)[name]
	if !ok {
		r = scenarioResult{outcome: missing}
	}
	r.attempts = max(r.attempts, 1)
	for r.outcome != want && r.attempts <= retries {
		next, ok := s.run(ctx, t, label+"-retry", url, name)[name]
		if !ok {
			next = scenarioResult{outcome: missing}
		}
		next.attempts = r.attempts + 1
		t.Logf("scenario %s (%s) attempt %d: %s; earlier: %s %s", name, label, next.attempts, next.outcome, r.outcome, strings.Join(r.failures, "; "))
		r = next
	}
	return r
}

// judge says what is wrong with one scenario's results, or "" when they match exp.
func judge(exp expectation, d, tg scenarioResult) string {
	switch {
	case d.outcome != exp.direct:
		return fmt.Sprintf("directly %s, want %s (the fixture or the suite changed): %s", d.outcome, exp.direct, strings.Join(d.failures, "; "))
	case tg.outcome == exp.through && tg.outcome != pass && exp.match != "" && !slices.ContainsFunc(tg.failures, func(f string) bool { return strings.Contains(f, exp.match) }):
		return fmt.Sprintf("fails through Tollgate, but not for the listed reason (no failure mentions %q); update modernExpected: %s", exp.match, strings.Join(tg.failures, "; "))
	case tg.outcome == exp.through:
		return ""
	case exp.through == fail && tg.outcome == pass:
		return fmt.Sprintf("now passes through Tollgate; it was listed as failing (%s): update modernExpected", exp.why)
	case exp.through == pass:
		return fmt.Sprintf("REGRESSION: passed through Tollgate before, now %s: %s", tg.outcome, strings.Join(tg.failures, "; "))
	default:
		return fmt.Sprintf("through Tollgate %s, want %s: %s", tg.outcome, exp.through, strings.Join(tg.failures, "; "))
	}
}

func renderModernTable(names []string, direct, through map[string]scenarioResult, problems map[string]string, upstream string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# MCP 2026-07-28 conformance (suite 0.2.0-alpha.12): direct vs through Tollgate\n\n")
	fmt.Fprintf(&b, "Run %s; upstream test/fixture/modern at %s.\n\n", time.Now().UTC().Format(time.RFC3339), upstream)
	b.WriteString("| scenario | direct | tollgate | expected through Tollgate | notes |\n|---|---|---|---|---|\n")
	var np int
	for _, n := range names {
		exp := modernExpected[n]
		want := string(exp.through)
		if exp.why != "" {
			want += ": " + exp.why
		}
		note := problems[n]
		if note == "" && (through[n].outcome == fail || through[n].outcome == missing) {
			note = "as expected: " + strings.Join(through[n].failures, "; ")
		}
		if through[n].outcome == pass {
			np++
		}
		if len(note) > 400 {
			note = note[:400] + "…"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", n, direct[n].cell(), through[n].cell(), want, strings.ReplaceAll(note, "|", `\|`))
	}
	fmt.Fprintf(&b, "\nthrough Tollgate: %d of %d scenarios pass; %d differ from the expectations.\n", np, len(names), len(problems))
	return b.String()
}
