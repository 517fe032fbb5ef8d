// Package slowclient attacks a real Tollgate process the way a hostile client would with
// slow connections and made-up sessions (docs/SECURITY.md): stalled request bodies, connection
// floods beyond the caps and the open-files limit, forged Mcp-Session-Id floods, and SSE
// readers that stop reading. Tests assert behaviour (answers, errors, reachability); figures
// (RSS of the Tollgate process, timings) are logged and written to last-run.md, never asserted.
//
// The binary is built from this repository; TOLLGATE_BIN runs another build instead, and
// SLOWCLIENT_BASELINE=1 leaves the server.limits keys out of the configuration so a build
// from before they existed can be measured the same way (its tests are expected to fail).
package slowclient

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

var (
	binPath  string
	buildErr error
	report   reportFile
)

func TestMain(m *testing.M) {
	code := func() int {
		if runtime.GOOS != "linux" {
			return m.Run() // each test skips: RSS and ulimit need Linux
		}
		dir, err := os.MkdirTemp("", "tollgate-slowclient-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		binPath = os.Getenv("TOLLGATE_BIN")
		if binPath == "" {
			binPath = filepath.Join(dir, "tollgate")
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "go", "build", "-o", binPath, "../../../cmd/tollgate")
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build: %v\n%s", err, out)
			}
		}
		code := m.Run()
		report.write("last-run.md")
		return code
	}()
	os.Exit(code)
}

// baseline reports whether the configuration must do without server.limits.
func baseline() bool { return os.Getenv("SLOWCLIENT_BASELINE") == "1" }

// proc is one running Tollgate process.
type proc struct {
	cmd   *exec.Cmd
	MCP   string // http://127.0.0.1:port/mcp
	Admin string // http://127.0.0.1:port
	mcpHP string // 127.0.0.1:port
	logs  *testkit.SyncBuffer
}

// start runs the binary with cfg (YAML; limits is the server.limits block, left out in
// baseline mode) under an open-files limit (0 = inherited), and waits until /readyz is 200.
func start(t *testing.T, cfg, limits string, nofile int) *proc {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("needs Linux (/proc RSS, ulimit)")
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	if limits != "" && !baseline() {
		cfg += "server:\n  limits:\n" + limits
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "tollgate.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	mcp, admin := testkit.FreeAddr(t), testkit.FreeAddr(t)
	script := `exec "$0" run --config "$1"`
	if nofile > 0 {
		script = "ulimit -n " + strconv.Itoa(nofile) + " && " + script
	}
	cmd := exec.Command("/bin/sh", "-c", script, binPath, path)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TOLLGATE_LISTEN="+mcp, "TOLLGATE_ADMIN_LISTEN="+admin,
		"TOLLGATE_ADMIN_TOKEN="+testkit.AdminToken, "TOLLGATE_LOG_LEVEL=warn")
	logs := &testkit.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, MCP: "http://" + mcp + "/mcp", Admin: "http://" + admin, mcpHP: mcp, logs: logs}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("tollgate log (tail):\n%s", tail(logs.String(), 3000))
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if st, _ := get(p.Admin+"/readyz", 2*time.Second); st == http.StatusOK {
			return p
		}
		select {
		case <-done:
			t.Fatalf("tollgate exited during start:\n%s", logs.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("tollgate not ready within 20s:\n%s", tail(logs.String(), 3000))
	return nil
}

// rssMB is the process's resident set size in MB (from /proc).
func (p *proc) rssMB(t *testing.T) float64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/status")
	if err != nil {
		t.Fatalf("reading RSS: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return float64(kb) / 1024
		}
	}
	t.Fatal("no VmRSS in /proc status")
	return 0
}

// openFiles counts the process's open descriptors.
func (p *proc) openFiles() int {
	ents, _ := os.ReadDir("/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/fd")
	return len(ents)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// get fetches url on a fresh connection; status 0 means no answer within timeout.
func get(url string, timeout time.Duration) (int, time.Duration) {
	c := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
	resp, err := c.Get(url)
	if err != nil {
		return 0, time.Since(start)
	}
	resp.Body.Close()
	return resp.StatusCode, time.Since(start)
}

// watchHealth polls /healthz every interval until stop is closed and returns how many polls
// were answered 200, how many were not, and the slowest answer.
func watchHealth(admin string, interval time.Duration, stop <-chan struct{}) func() (ok, failed int, slowest time.Duration) {
	var mu sync.Mutex
	var okN, failN int
	var slow time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			st, d := get(admin+"/healthz", 5*time.Second)
			mu.Lock()
			if st == http.StatusOK {
				okN++
			} else {
				failN++
			}
			slow = max(slow, d)
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	return func() (int, int, time.Duration) {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return okN, failN, slow
	}
}

// rawRequest writes a request head and returns the connection, with a reader for answers.
func rawDial(t *testing.T, hostport, local string) (net.Conn, *bufio.Reader) {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	c, err := d.Dial("tcp", hostport)
	if err != nil {
		t.Fatalf("dial %s: %v", hostport, err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// reportFile collects the figures of a run as markdown (test/hostile/slowclient/last-run.md).
type reportFile struct {
	mu    sync.Mutex
	lines []string
}

func (r *reportFile) add(t *testing.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	t.Log(line)
	r.mu.Lock()
	r.lines = append(r.lines, "* "+t.Name()+": "+line)
	r.mu.Unlock()
}

func (r *reportFile) write(path string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lines) == 0 {
		return
	}
	mode := "this build, server.limits as configured by each test"
	if baseline() {
		mode = "baseline: no server.limits keys"
	}
	if bin := os.Getenv("TOLLGATE_BIN"); bin != "" {
		mode += ", binary " + bin
	}
	head := "# Slow-client harness, last run\n\n" + time.Now().UTC().Format(time.RFC3339) + " (" + mode + ", " +
		strconv.Itoa(runtime.NumCPU()) + " CPUs)\n\n"
	_ = os.WriteFile(path, []byte(head+strings.Join(r.lines, "\n")+"\n"), 0o644)
}
