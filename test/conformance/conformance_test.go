//go:build unix

package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Environment knobs. TOLLGATE_CONFORMANCE: "" runs when Node 22 and the suite are installed and
// skips loudly otherwise; "require" fails instead of skipping (make conformance); "skip" skips
// (make test-unit, so `make test` runs the suite once).
const (
	envMode     = "TOLLGATE_CONFORMANCE"
	envNode     = "TOLLGATE_NODE22"          // node ≥ 22 binary; default .tools/node22/…/bin/node
	envCLI      = "TOLLGATE_CONFORMANCE_CLI" // suite entry point; default .tools/npm/…/dist/index.js
	envTollgate = "TOLLGATE_BIN"             // use this binary instead of building ./cmd/tollgate
	envSuite    = "TOLLGATE_CONFORMANCE_SUITE"
)

// Bounds: every step has one so a wedged child can never hang CI.
const (
	buildTimeout = 5 * time.Minute
	readyTimeout = 30 * time.Second
	suiteTimeout = 5 * time.Minute
	stopGrace    = 5 * time.Second
	// Retries absorb scenarios that are flaky against the server itself (e.g. a log or
	// progress notification racing the tool result in tools-call-with-logging/-progress).
	retries = 2
)

// knownFlaky lists scenarios that mcp-go's conformance server fails at random even when tested
// directly (measured here: 6/20 and 8/20 passes). A failure through Tollgate is reported for
// them but does not fail the run.
var knownFlaky = map[string]string{
	"tools-call-with-logging":  "upstream flaky: the last notifications/message can lose the race with the tool result",
	"tools-call-with-progress": "upstream flaky: the last notifications/progress can lose the race with the tool result",
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Result of one scenario in one run.
type outcome string

const (
	pass    outcome = "pass"
	fail    outcome = "FAIL"
	noCheck outcome = "n/a"     // only INFO/SKIPPED checks
	missing outcome = "missing" // the suite wrote no result (crash, timeout)
)

type scenarioResult struct {
	outcome  outcome
	failures []string // "check-id: message" of failed checks
	attempts int
}

// needSuite finds the repository root, Node 22 and the suite's CLI, or skips (fails under
// TOLLGATE_CONFORMANCE=require) when they are missing.
func needSuite(t *testing.T, cliEnv, pkg string) (root, node, cli string) {
	t.Helper()
	mode := os.Getenv(envMode)
	if mode == "skip" {
		t.Skipf("%s=skip", envMode)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	node, cli, why := findSuite(root, cliEnv, pkg)
	if why != "" {
		if mode == "require" {
			t.Fatalf("conformance suite unavailable: %s (run scripts/ensure-deps.sh)", why)
		}
		t.Skipf("SKIPPING MCP conformance: %s (run scripts/ensure-deps.sh or `make conformance`)", why)
	}
	return root, node, cli
}

func TestConformanceThroughTollgate(t *testing.T) {
	root, node, cli := needSuite(t, envCLI, "@modelcontextprotocol/conformance")

	ctx, cancel := context.WithTimeout(context.Background(), 14*time.Minute)
	defer cancel()
	logDir := t.TempDir()

	serverBin := filepath.Join(t.TempDir(), "conformance-server")
	goBuild(ctx, t, root, serverBin, "github.com/mark3labs/mcp-go/examples/conformance")
	tollgateBin := buildTollgate(ctx, t, root)

	// Upstream: mcp-go's conformance server.
	upAddr := freeAddr(t)
	upExited := startProc(t, logDir, "conformance-server", root, []string{"CONFORMANCE_ADDR=" + upAddr}, serverBin)
	waitReady(ctx, t, "http://"+upAddr+"/health", upExited, logDir, "conformance-server")
	upstreamURL := "http://" + upAddr + "/mcp"

	suite := &suiteRunner{node: node, cli: cli, root: root, outDir: filepath.Join(logDir, "results"), suite: os.Getenv(envSuite)}
	direct := suite.run(ctx, t, "direct", upstreamURL, "")
	if len(direct) == 0 {
		t.Fatalf("direct run produced no scenario results; see %s", logDir)
	}
	// Strengthen the baseline: a scenario that fails directly may only be flaky.
	for name, r := range direct {
		if r.outcome == fail || r.outcome == missing {
			direct[name] = suite.retry(ctx, t, "direct", upstreamURL, name, r)
		}
	}

	tollgateURL := startTollgate(ctx, t, root, logDir, tollgateBin, upstreamURL)
	suite.compare(ctx, t, direct, tollgateURL, knownFlaky, upstreamURL, "last-run.md", logDir)
}

// compare runs the suite through Tollgate at tollgateURL and fails the test for every scenario
// that passes directly but not through Tollgate (after retries), unless flaky upstream
// (knownFlaky, or passed directly only on a retry). The table goes to stdout and to table.
func (s *suiteRunner) compare(ctx context.Context, t *testing.T, direct map[string]scenarioResult, tollgateURL string,
	knownFlaky map[string]string, upstream, table, logDir string) {
	t.Helper()
	through := s.run(ctx, t, "tollgate", tollgateURL, "")
	var regressions []string
	flaky := map[string]string{}
	for name, d := range direct {
		if d.outcome != pass {
			continue
		}
		r, ok := through[name]
		if !ok {
			r = scenarioResult{outcome: missing}
		}
		if r.outcome != pass {
			r = s.retry(ctx, t, "tollgate", tollgateURL, name, r)
		}
		through[name] = r
		if r.outcome == pass {
			continue
		}
		// A scenario the server itself fails at random cannot tell us anything about Tollgate.
		why := knownFlaky[name]
		if why == "" && d.attempts > 1 {
			why = fmt.Sprintf("passed directly only on attempt %d", d.attempts)
		}
		if why != "" {
			flaky[name] = why
			t.Logf("scenario %s fails through Tollgate but is flaky upstream (%s); not gating", name, why)
			continue
		}
		regressions = append(regressions, name)
	}

	text := renderTable(direct, through, flaky, upstream)
	fmt.Println(text)
	if err := os.WriteFile(table, []byte(text), 0o644); err != nil {
		t.Errorf("write %s: %v", table, err)
	}
	slices.Sort(regressions)
	for _, name := range regressions {
		t.Errorf("scenario %s passes directly but fails through Tollgate: %s", name, strings.Join(through[name].failures, "; "))
	}
	if len(regressions) > 0 {
		dumpLog(t, logDir, "tollgate")
	}
}

// buildTollgate returns TOLLGATE_BIN, or builds ./cmd/tollgate into the test's temp dir: never
// into bin/, where it replaced the stripped static binary of `make build` with a dev build.
func buildTollgate(ctx context.Context, t *testing.T, root string) string {
	t.Helper()
	if bin := os.Getenv(envTollgate); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "tollgate")
	goBuild(ctx, t, root, bin, "./cmd/tollgate")
	return bin
}

// startTollgate runs the gateway in front of upstreamURL, configured to forward everything
// (tollgate.yaml, docs/contract.md §4 contract), and returns its MCP endpoint once /readyz answers.
func startTollgate(ctx context.Context, t *testing.T, root, logDir, bin, upstreamURL string) string {
	t.Helper()
	listen, admin := freeAddr(t), freeAddr(t)
	env := []string{
		"TOLLGATE_LISTEN=" + listen,
		"TOLLGATE_ADMIN_LISTEN=" + admin,
		"TOLLGATE_UPSTREAM_URL=" + upstreamURL,
		"TOLLGATE_DATA_DIR=" + filepath.Join(logDir, "data"),
	}
	exited := startProc(t, logDir, "tollgate", root, env, bin, "run", "--config", filepath.Join(root, "test", "conformance", "tollgate.yaml"))
	waitReady(ctx, t, "http://"+admin+"/readyz", exited, logDir, "tollgate")
	return "http://" + listen + "/mcp"
}

// findSuite locates Node ≥ 22 and the conformance CLI (cliEnv overrides the default package
// entry point pkg under .tools/npm/node_modules); why is non-empty when either is missing.
func findSuite(root, cliEnv, pkg string) (node, cli, why string) {
	node = os.Getenv(envNode)
	if node == "" {
		node = filepath.Join(root, ".tools", "node22", "node_modules", "node", "bin", "node")
	}
	cli = os.Getenv(cliEnv)
	if cli == "" {
		cli = filepath.Join(root, ".tools", "npm", "node_modules", filepath.FromSlash(pkg), "dist", "index.js")
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		return "", "", fmt.Sprintf("node 22 not runnable at %s: %v", node, err)
	}
	v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	major, _ := strconv.Atoi(strings.SplitN(v, ".", 2)[0])
	if major < 22 {
		return "", "", fmt.Sprintf("%s is node %s; the suite needs ≥ 22", node, v)
	}
	if _, err := os.Stat(cli); err != nil {
		return "", "", fmt.Sprintf("conformance CLI missing: %v", err)
	}
	return node, cli, ""
}

func goBuild(ctx context.Context, t *testing.T, root, out, pkg string) {
	t.Helper()
	bctx, cancel := context.WithTimeout(ctx, buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(bctx, "go", "build", "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
}

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startProc starts a child in its own process group, logging to logDir/name.log; cleanup
// sends SIGTERM to the group, then SIGKILL after stopGrace.
func startProc(t *testing.T, logDir, name, dir string, env []string, bin string, args ...string) (exited <-chan struct{}) {
	t.Helper()
	logf, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	stop := func() {
		pgid := cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		timer := time.NewTimer(stopGrace)
		defer timer.Stop()
		select {
		case <-done:
		case <-timer.C:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-done
		}
		logf.Close()
	}
	t.Cleanup(stop)
	return done
}

// waitReady polls url until it answers 200; it fails fast when the child exits.
func waitReady(ctx context.Context, t *testing.T, url string, exited <-chan struct{}, logDir, name string) {
	t.Helper()
	rctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last := "no attempt"
	for {
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				client.CloseIdleConnections()
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-exited:
			dumpLog(t, logDir, name)
			t.Fatalf("%s exited before %s answered 200", name, url)
		case <-rctx.Done():
			dumpLog(t, logDir, name)
			t.Fatalf("%s not ready at %s within %s: %s", name, url, readyTimeout, last)
		case <-tick.C:
		}
	}
}

func dumpLog(t *testing.T, logDir, name string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(logDir, name+".log"))
	if err != nil {
		return
	}
	if len(b) > 8<<10 {
		b = b[len(b)-8<<10:]
	}
	t.Logf("--- tail of %s.log ---\n%s", name, b)
}

type suiteRunner struct {
	node, cli, root, outDir, suite string
	n                              int
}

// run executes the suite (or one scenario) against url and returns per-scenario results.
func (s *suiteRunner) run(ctx context.Context, t *testing.T, label, url, scenario string) map[string]scenarioResult {
	t.Helper()
	s.n++
	out := filepath.Join(s.outDir, fmt.Sprintf("%02d-%s", s.n, label))
	args := []string{s.cli, "server", "--url", url, "-o", out}
	if scenario != "" {
		args = append(args, "--scenario", scenario)
	} else {
		suite := s.suite
		if suite == "" {
			suite = "all" // pending scenarios too: the comparison, not the absolute result, gates
		}
		args = append(args, "--suite", suite)
	}
	rctx, cancel := context.WithTimeout(ctx, suiteTimeout)
	defer cancel()
	cmd := exec.CommandContext(rctx, s.node, args...)
	cmd.Dir = s.root
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "CI=true")
	cmd.SysProcAttr = procAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = stopGrace
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run() // non-zero exit when any scenario fails; results are read from out
	if rctx.Err() != nil {
		t.Errorf("conformance suite (%s) timed out after %s", label, suiteTimeout)
	}
	res, perr := readResults(out)
	if scenario != "" {
		if _, ok := res[scenario]; !ok && perr == nil {
			res[scenario] = scenarioResult{outcome: missing, attempts: 1}
		}
	}
	// A scenario that wrote no checks crashed or timed out: its reason is in the CLI's output.
	for name, r := range res {
		if r.outcome == missing {
			r.failures = append(r.failures, "suite output: "+string(tail(buf.Bytes(), 600)))
			res[name] = r
		}
	}
	if perr != nil || (len(res) == 0 && err != nil) {
		t.Logf("suite output (%s):\n%s", label, tail(buf.Bytes(), 4<<10))
		if perr != nil {
			t.Errorf("reading results of %s run: %v", label, perr)
		}
	}
	return res
}

// retry reruns one scenario up to retries times until it passes.
func (s *suiteRunner) retry(ctx context.Context, t *testing.T, label, url, name string, prev scenarioResult) scenarioResult {
	t.Helper()
	prev.attempts = max(prev.attempts, 1)
	for i := 0; i < retries; i++ {
		r, ok := s.run(ctx, t, label+"-retry-"+name, url, name)[name]
		if !ok {
			r = scenarioResult{outcome: missing}
		}
		r.attempts = prev.attempts + 1
		if r.outcome == pass {
			if r.failures == nil {
				r.failures = prev.failures
			}
			t.Logf("scenario %s (%s) passed on attempt %d; earlier: %s", name, label, r.attempts, strings.Join(prev.failures, "; "))
			return r
		}
		prev = r
	}
	return prev
}

// dirName is "server-<scenario>-<ISO timestamp with - for :>" as written by the suite's -o.
var dirName = regexp.MustCompile(`^server-(.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$`)

type check struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	ErrorMessage string `json:"errorMessage"`
}

func readResults(dir string) (map[string]scenarioResult, error) {
	res := map[string]scenarioResult{}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return res, nil
	}
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		m := dirName.FindStringSubmatch(e.Name())
		if !e.IsDir() || m == nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "checks.json"))
		if err != nil {
			res[m[1]] = scenarioResult{outcome: missing, failures: []string{err.Error()}}
			continue
		}
		var checks []check
		if err := json.Unmarshal(b, &checks); err != nil {
			return nil, fmt.Errorf("%s/checks.json: %w", e.Name(), err)
		}
		res[m[1]] = classify(checks)
	}
	return res, nil
}

func classify(checks []check) scenarioResult {
	r := scenarioResult{outcome: noCheck, attempts: 1}
	for _, c := range checks {
		switch c.Status {
		case "FAILURE", "ERROR":
			r.outcome = fail
			r.failures = append(r.failures, c.ID+": "+c.ErrorMessage)
		case "SUCCESS", "WARNING":
			if r.outcome == noCheck {
				r.outcome = pass
			}
		}
	}
	return r
}

// cell is the result as a table cell: the outcome, with the attempt when it took more than one.
func (r scenarioResult) cell() string {
	if r.attempts > 1 {
		return fmt.Sprintf("%s (attempt %d)", r.outcome, r.attempts)
	}
	return string(r.outcome)
}

func renderTable(direct, through map[string]scenarioResult, flaky map[string]string, upstream string) string {
	names := make([]string, 0, len(direct))
	for n := range direct {
		names = append(names, n)
	}
	for n := range through {
		if _, ok := direct[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	cell := func(m map[string]scenarioResult, n string) string {
		r, ok := m[n]
		if !ok {
			return string(missing)
		}
		return r.cell()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# MCP conformance: direct vs through Tollgate\n\n")
	fmt.Fprintf(&b, "Run %s; upstream mcp-go conformance server at %s.\n\n", time.Now().UTC().Format(time.RFC3339), upstream)
	b.WriteString("| scenario | direct | tollgate | notes |\n|---|---|---|---|\n")
	var np, nr int
	for _, n := range names {
		d, tg := direct[n], through[n]
		note := ""
		switch {
		case d.outcome == pass && tg.outcome != pass && flaky[n] != "":
			note = "not gating (" + flaky[n] + "): " + strings.Join(tg.failures, "; ")
		case d.outcome == pass && tg.outcome != pass:
			note = "REGRESSION: " + strings.Join(tg.failures, "; ")
			nr++
		case d.outcome != pass && len(d.failures) > 0:
			note = "fails directly: " + strings.Join(d.failures, "; ")
		}
		if tg.outcome == pass {
			np++
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", n, cell(direct, n), cell(through, n), strings.ReplaceAll(note, "|", `\|`))
	}
	fmt.Fprintf(&b, "\nthrough Tollgate: %d of %d scenarios pass; %d regressions.\n", np, len(names), nr)
	return b.String()
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	// Drop a partial first line.
	if i := bytes.IndexByte(b, '\n'); i >= 0 && len(b) == n {
		b = b[i+1:]
	}
	return bytes.TrimSpace(b)
}
