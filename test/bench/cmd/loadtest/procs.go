package main

import (
	"bufio"
	"bytes"
	"context"
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
	"time"
)

// proc is one child process: the upstream, a bare proxy or a Tollgate.
type proc struct {
	name     string
	cmd      *exec.Cmd
	url      string // MCP endpoint
	adminURL string // Tollgate only
	ready    time.Duration
	logPath  string
	done     chan struct{}
}

// clockTick is USER_HZ, the unit of utime/stime in /proc/PID/stat (100 on every Linux
// architecture Go supports).
const clockTick = 10 * time.Millisecond

// cpuTime returns utime+stime of the process.
func (p *proc) cpuTime() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// comm (field 2) may contain spaces; fields after the closing paren are fixed.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc stat format")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc stat")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parsing utime/stime")
	}
	return time.Duration(ut+st) * clockTick, nil
}

// rss returns the resident set size in bytes (VmRSS).
// rssAnon is the process's RssAnon: its private memory, without mapped files (the binary's
// code, the file task store's memory map), which the kernel can drop and read back.
func (p *proc) rssAnon() (int64, error) { return p.status("RssAnon:") }

func (p *proc) rss() (int64, error) { return p.status("VmRSS:") }

// status reads one kB field of /proc/PID/status, in bytes.
func (p *proc) status(field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			f := strings.Fields(v)
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s", field)
}

func (p *proc) stop() {
	if p == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// freePort reserves a loopback port by binding and releasing it.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startListening starts a helper that prints "LISTENING <url>" once it accepts connections.
func startListening(name, bin string, args []string, env []string, logDir string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	logPath := filepath.Join(logDir, name+".log")
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stderr = lf
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); lf.Close(); close(p.done) }()
	line := make(chan string, 1)
	go func() {
		br := bufio.NewReader(out)
		s, _ := br.ReadString('\n')
		line <- s
		_, _ = io.Copy(lf, br)
	}()
	select {
	case s := <-line:
		u, ok := strings.CutPrefix(strings.TrimSpace(s), "LISTENING ")
		if !ok {
			p.stop()
			return nil, fmt.Errorf("%s did not start (see %s)", name, logPath)
		}
		p.url, p.ready = u, time.Since(start)
		return p, nil
	case <-time.After(15 * time.Second):
		p.stop()
		return nil, fmt.Errorf("%s did not start within 15s (see %s)", name, logPath)
	}
}

// startTollgate runs `tollgate run --config cfg` and waits until /readyz answers 200; the
// time from exec to the first 200 is the start-to-ready time.
func startTollgate(name, bin, cfg, upstreamURL, token string, extraEnv []string, logDir string) (*proc, error) {
	mcpAddr, err := freePort()
	if err != nil {
		return nil, err
	}
	adminAddr, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "run", "--config", cfg)
	cmd.Env = append(os.Environ(),
		"TOLLGATE_LISTEN="+mcpAddr, "TOLLGATE_ADMIN_LISTEN="+adminAddr,
		"TOLLGATE_UPSTREAM_URL="+upstreamURL, "TOLLGATE_ADMIN_TOKEN="+token,
		"TOLLGATE_LOG_LEVEL=warn")
	cmd.Env = append(cmd.Env, extraEnv...)
	logPath := filepath.Join(logDir, strings.ReplaceAll(name, " ", "_")+".log")
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	hc := &http.Client{Timeout: time.Second}
	readyURL := "http://" + adminAddr + "/readyz"
	start := time.Now()
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, url: "http://" + mcpAddr + "/mcp", adminURL: "http://" + adminAddr,
		logPath: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); lf.Close(); close(p.done) }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, readyURL, nil)
		if resp, err := hc.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				p.ready = time.Since(start)
				return p, nil
			}
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("%s exited before ready (see %s)", name, logPath)
		case <-ctx.Done():
			p.stop()
			return nil, fmt.Errorf("%s not ready within 20s (see %s)", name, logPath)
		case <-time.After(time.Millisecond):
		}
	}
}
