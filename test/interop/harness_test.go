//go:build unix

// Package interop drives Tollgate with clients and servers it did not write: the official
// TypeScript SDK client (@modelcontextprotocol/sdk, client.experimental.tasks), the reference
// server @modelcontextprotocol/server-everything, and for the 2026-07-28 era the tasks
// requester @modelcontextprotocol/ext-tasks and the inspector's mcpdo CLI, in front of
// test/fixture/modern (mcp-go v1.2.1) — all run with Node 22 from .tools
// (scripts/ensure-deps.sh). TOLLGATE_INTEROP: "" runs when Node 22 and the packages are
// installed and skips loudly otherwise; "require" fails instead of skipping (CI); "skip" skips.
package interop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

const (
	envMode = "TOLLGATE_INTEROP"
	envNode = "TOLLGATE_NODE22"      // node ≥ 22 binary; default .tools/node22/…/bin/node
	envNpm  = "TOLLGATE_NPM_MODULES" // the npm packages' node_modules; default .tools/npm/node_modules
	envCI   = "CI"
	envDump = "TOLLGATE_INTEROP_DUMP" // non-empty: log every tsclient event (wire review)

	// Bounds: a wedged child can never hang the run.
	scriptTimeout = 45 * time.Second
	readyTimeout  = 20 * time.Second
	stopGrace     = 3 * time.Second
)

func TestMain(m *testing.M) {
	code := m.Run()
	// Approvals go through http.DefaultClient; its idle keep-alive connections are not leaks.
	http.DefaultClient.CloseIdleConnections()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// toolchain is Node 22 plus the npm packages the tests use.
type toolchain struct {
	node       string
	npmDir     string // .tools/npm/node_modules
	sdkDir     string // @modelcontextprotocol/sdk package directory
	everything string // server-everything entry point (dist/index.js)
	filesystem string // server-filesystem entry point (dist/index.js)
	mcpdo      string // the inspector's mcpdo CLI entry point
	root       string
}

// needNode finds the toolchain or skips/fails per TOLLGATE_INTEROP (CI=true counts as require,
// so `make test` in CI runs these for real).
func needNode(t *testing.T) toolchain {
	t.Helper()
	mode := os.Getenv(envMode)
	if mode == "skip" {
		t.Skipf("%s=skip", envMode)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	tc, why := findToolchain(root)
	if why == "" {
		return tc
	}
	if mode == "require" || os.Getenv(envCI) == "true" {
		t.Fatalf("interop toolchain unavailable: %s (run scripts/ensure-deps.sh)", why)
	}
	t.Skipf("SKIPPING interop tests: %s (run scripts/ensure-deps.sh)", why)
	return toolchain{}
}

func findToolchain(root string) (toolchain, string) {
	tc := toolchain{root: root}
	tc.node = os.Getenv(envNode)
	if tc.node == "" {
		tc.node = filepath.Join(root, ".tools", "node22", "node_modules", "node", "bin", "node")
	}
	out, err := exec.Command(tc.node, "--version").Output()
	if err != nil {
		return tc, fmt.Sprintf("node 22 not runnable at %s: %v", tc.node, err)
	}
	v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	if major, _ := strconv.Atoi(strings.SplitN(v, ".", 2)[0]); major < 22 {
		return tc, fmt.Sprintf("%s is node %s; need ≥ 22", tc.node, v)
	}
	tc.npmDir = os.Getenv(envNpm)
	if tc.npmDir == "" {
		tc.npmDir = filepath.Join(root, ".tools", "npm", "node_modules")
	}
	mods := filepath.Join(tc.npmDir, "@modelcontextprotocol")
	tc.sdkDir = filepath.Join(mods, "sdk")
	tc.everything = filepath.Join(mods, "server-everything", "dist", "index.js")
	tc.filesystem = filepath.Join(mods, "server-filesystem", "dist", "index.js")
	tc.mcpdo = filepath.Join(mods, "inspector", "clients", "mcpdo", "build", "mcp-bin.js")
	for _, p := range []string{
		filepath.Join(tc.sdkDir, "dist", "esm", "client", "index.js"), tc.everything, tc.mcpdo,
		filepath.Join(mods, "ext-tasks", "dist", "client", "index.js"),
		filepath.Join(mods, "client", "dist", "index.mjs"),
	} {
		if _, err := os.Stat(p); err != nil {
			return tc, fmt.Sprintf("npm package missing: %v", err)
		}
	}
	return tc, ""
}

// needFilesystem is for the tests of @modelcontextprotocol/server-filesystem: it skips (fails
// under TOLLGATE_INTEROP=require or CI) when the package is not installed, so a .tools install
// older than test/npm/package.json skips only these tests.
func needFilesystem(t *testing.T, tc toolchain) {
	t.Helper()
	if _, err := os.Stat(tc.filesystem); err == nil {
		return
	}
	why := "npm package @modelcontextprotocol/server-filesystem missing (run scripts/ensure-deps.sh)"
	if os.Getenv(envMode) == "require" || os.Getenv(envCI) == "true" {
		t.Fatal(why)
	}
	t.Skip("SKIPPING: " + why)
}

// event is one JSON line printed by tsclient.mjs.
type event map[string]any

func (e event) name() string { s, _ := e["event"].(string); return s }

// scriptRun is a finished tsclient.mjs run.
type scriptRun struct {
	events []event
	stderr string
	err    error
}

// find returns the first event with that name (nil if none).
func (r *scriptRun) find(name string) event {
	for _, e := range r.events {
		if e.name() == name {
			return e
		}
	}
	return nil
}

func (r *scriptRun) all(name string) []event {
	var out []event
	for _, e := range r.events {
		if e.name() == name {
			out = append(out, e)
		}
	}
	return out
}

func (r *scriptRun) dump(t *testing.T) {
	t.Helper()
	var b strings.Builder
	for _, e := range r.events {
		j, _ := json.Marshal(e)
		b.Write(j)
		b.WriteByte('\n')
	}
	t.Logf("script events:\n%s\nstderr:\n%s\nexit: %v", b.String(), r.stderr, r.err)
}

// runTS runs tsclient.mjs against url. onEvent sees each event as it arrives; a non-empty
// return value is written to the script's stdin as one line (the script waits for it after
// "awaitApproval").
func runTS(t *testing.T, tc toolchain, url, scenario string, onEvent func(event) string, extra ...string) *scriptRun {
	t.Helper()
	return runScript(t, tc, "tsclient.mjs", append([]string{url, scenario}, extra...), onEvent)
}

// runScript runs one of this directory's node scripts, which print JSON-line events and end
// with "done"; onEvent works as for runTS.
func runScript(t *testing.T, tc toolchain, script string, scriptArgs []string, onEvent func(event) string) *scriptRun {
	t.Helper()
	scenario := strings.Join(append([]string{script}, scriptArgs[1:]...), " ")
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	args := append([]string{script}, scriptArgs...)
	cmd := exec.CommandContext(ctx, tc.node, args...)
	cmd.Env = append(os.Environ(), "TOLLGATE_SDK_DIR="+tc.sdkDir, "TOLLGATE_NPM_DIR="+tc.npmDir, "NO_COLOR=1")
	cmd.SysProcAttr = procAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = stopGrace
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	run := &scriptRun{}
	rd := bufio.NewReader(stdout)
	for {
		line, err := rd.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var e event
			if jerr := json.Unmarshal(line, &e); jerr != nil {
				e = event{"event": "unparsed", "line": string(line)}
			}
			run.events = append(run.events, e)
			if onEvent != nil {
				if reply := onEvent(e); reply != "" {
					_, _ = io.WriteString(stdin, reply+"\n")
				}
			}
		}
		if err != nil {
			break
		}
	}
	_ = stdin.Close()
	run.err = cmd.Wait()
	run.stderr = stderr.String()
	if ctx.Err() != nil {
		run.dump(t)
		t.Fatalf("%s timed out after %s", scenario, scriptTimeout)
	}
	t.Logf("%s: %d events in %s", scenario, len(run.events), time.Since(start).Round(time.Millisecond))
	if os.Getenv(envDump) != "" {
		run.dump(t)
	}
	if run.err != nil || run.find("done") == nil {
		run.dump(t)
		t.Fatalf("%s did not finish cleanly: %v", scenario, run.err)
	}
	return run
}

// --- in-process gateway (test/testkit) ------------------------------------------------------

// startGateway runs Tollgate and waits until it is ready; a failing test gets the log's tail.
func startGateway(t *testing.T, cfgYAML string, env map[string]string) *testkit.Gateway {
	t.Helper()
	g := testkit.StartGateway(t, cfgYAML, env, nil)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- gateway log (tail) ---\n%s", tail(g.Logs.String(), 6<<10))
		}
	})
	g.WaitReady(t)
	return g
}

// basicConfig is one upstream plus governance YAML; pollInterval is short so SDK polling
// (which honours the advertised pollInterval) keeps the tests fast.
// basicConfig is a gateway config in front of upstreamURL; tasks are more tasks.* settings,
// e.g. "sync_approval: error" for tests that pin the TaskRequired contract.
func basicConfig(upstreamURL, extra string, tasks ...string) string {
	return testkit.BasicConfig(upstreamURL, "tasks: {"+strings.Join(append([]string{"poll_interval: 100ms"}, tasks...), ", ")+"}\n"+extra)
}

// approve decides a held task through the admin API (docs/contract.md §4).
func approve(t *testing.T, g *testkit.Gateway, taskID string) int {
	t.Helper()
	st, body := g.AdminRequest(t, http.MethodPost, "/api/v1/approvals/"+taskID+"/approve", testkit.AdminToken, `{"reason":"interop test"}`)
	if st != http.StatusOK {
		t.Errorf("approve %s: HTTP %d %v", taskID, st, body)
	}
	return st
}

// approver returns an onEvent callback that approves every "awaitApproval" task and records
// the ids it approved.
func approver(t *testing.T, g *testkit.Gateway, approved *[]string) func(event) string {
	return func(e event) string {
		if e.name() != "awaitApproval" {
			return ""
		}
		id, _ := e["taskId"].(string)
		*approved = append(*approved, id)
		return fmt.Sprintf("approved %d", approve(t, g, id))
	}
}

// --- child processes -----------------------------------------------------------------------

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startProc starts a child in its own process group with exactly env (plus PATH); cleanup
// sends SIGTERM to the group, then SIGKILL after stopGrace.
func startProc(t *testing.T, name string, env []string, bin string, args ...string) (logs *testkit.SyncBuffer, exited <-chan struct{}) {
	t.Helper()
	logs = &testkit.SyncBuffer{}
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
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
		if t.Failed() {
			t.Logf("--- %s output (tail) ---\n%s", name, tail(logs.String(), 4<<10))
		}
	})
	return logs, done
}

// waitHTTP polls url until it answers (any status below 500 when exited is set, 200 otherwise).
func waitHTTP(t *testing.T, url string, exited <-chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(readyTimeout)
	client := &http.Client{Timeout: 2 * time.Second}
	defer client.CloseIdleConnections()
	last := "no attempt"
	for time.Now().Before(deadline) {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || (exited != nil && resp.StatusCode < 500) {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-exited:
			t.Fatalf("process exited before %s answered", url)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("%s not ready within %s: %s", url, readyTimeout, last)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// dig walks nested JSON objects.
func dig(m any, path ...string) any {
	if e, ok := m.(event); ok {
		m = map[string]any(e)
	}
	for _, p := range path {
		mm, ok := m.(map[string]any)
		if !ok {
			return nil
		}
		m = mm[p]
	}
	return m
}

// toolExecution maps tool name → execution.taskSupport from a "tools" event.
func toolExecution(e event) map[string]string {
	out := map[string]string{}
	tools, _ := e["tools"].([]any)
	for _, raw := range tools {
		name, _ := dig(raw, "name").(string)
		ts, _ := dig(raw, "execution", "taskSupport").(string)
		out[name] = ts
	}
	return out
}

// textOf joins the text content items of a CallToolResult.
func textOf(result any) string {
	var b strings.Builder
	items, _ := dig(result, "content").([]any)
	for _, it := range items {
		if s, ok := dig(it, "text").(string); ok {
			b.WriteString(s)
		}
	}
	return b.String()
}
