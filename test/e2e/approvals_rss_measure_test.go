package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// TestMeasureApprovalsRSS measures the peak RSS of a real Tollgate process (the binary at
// TOLLGATE_BIN, file store) that opens a store holding 100 pending requests of 1 MiB
// arguments, which fill tasks.quotas.max_stored_bytes, and serves one page of
// GET /api/v1/approvals over them (MEASURE_N=64: the default 64 MiB quota). A measurement,
// not a check, run by hand (figures in
// docs/SECURITY.md "Measurements" and docs/PERFORMANCE.md):
//
//	go build -o /tmp/tollgate ./cmd/tollgate
//	TOLLGATE_MEASURE=1 TOLLGATE_BIN=/tmp/tollgate go test -count=1 -run TestMeasureApprovalsRSS -v ./test/e2e/
//
// The store is filled by an in-process gateway of this build, so one fill serves a binary of an
// older build too (the store format is the same).
func TestMeasureApprovalsRSS(t *testing.T) {
	bin := os.Getenv("TOLLGATE_BIN")
	if os.Getenv("TOLLGATE_MEASURE") == "" || bin == "" {
		t.Skip("a measurement; set TOLLGATE_MEASURE=1 and TOLLGATE_BIN to run it")
	}
	// MEASURE_N requests (default 100); 64 fill the default max_stored_bytes (64 MiB).
	n, argBytes := 100, 1<<20
	if v, err := strconv.Atoi(os.Getenv("MEASURE_N")); err == nil && v > 0 {
		n = v
	}
	_, upURL := testkit.StartDemo(t)
	cfg := testkit.BasicConfig(upURL, fmt.Sprintf(`governance:
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve}
tasks:
  quotas:
    max_pending_per_owner: %[4]d
    max_pending_per_source: %[4]d
    max_argument_bytes: %[2]d
    max_stored_bytes: %[3]d
    max_stored_bytes_per_source: %[3]d
`, n, argBytes+1024, n*(argBytes+64), 2*n))
	data := filepath.Join(t.TempDir(), "data")
	g := testkit.StartGateway(t, cfg, map[string]string{"TOLLGATE_DATA_DIR": data}, nil)
	g.WaitReady(t)
	c := g.NewClient(t)
	c.Initialize()
	blob := strings.Repeat("a", argBytes-40)
	for i := range n {
		m := c.Post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"delete_user","arguments":{"user_id":"u%d","password":"x","blob":"%s"},"task":{"ttl":3600000}}}`,
			i+10, i, blob)).Message(t)
		if testkit.Dig(m, "result", "task", "taskId") == nil {
			t.Fatalf("request %d: %v", i, testkit.Dig(m, "error"))
		}
	}
	// the quota is full: one more is refused
	m := c.Call(999, "delete_user", map[string]any{"user_id": "one-more", "blob": blob}, 3600000)
	t.Logf("request %d: %v", n+1, testkit.Dig(m, "error", "message"))
	g.Stop()
	if fi, err := os.Stat(filepath.Join(data, "tasks.db")); err == nil {
		t.Logf("store file: %d bytes", fi.Size())
	}

	listen, admin := testkit.FreeAddr(t), testkit.FreeAddr(t)
	if err := os.WriteFile(filepath.Join(g.Dir, "tollgate.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--config", filepath.Join(g.Dir, "tollgate.yaml"))
	cmd.Dir = g.Dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "TOLLGATE_LISTEN=" + listen, "TOLLGATE_ADMIN_LISTEN=" + admin,
		"TOLLGATE_ADMIN_TOKEN=" + testkit.AdminToken, "TOLLGATE_DATA_DIR=" + data}
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	status := func(field string) int {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, field+":"); ok {
				kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
				return kb
			}
		}
		return -1
	}
	startAnon, startStop, startSampled := 0, make(chan struct{}), make(chan struct{})
	go func() {
		defer close(startSampled)
		for {
			startAnon = max(startAnon, status("RssAnon"))
			select {
			case <-startStop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	deadline := time.Now().Add(300 * time.Second)
	for {
		resp, err := testkit.HTTPClient.Get("http://" + admin + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not up within 300s: %s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(5 * time.Second) // loading the stored tasks runs after the listeners are up
	close(startStop)
	<-startSampled
	t.Logf("after start: VmRSS %d kB, peak (VmHWM, the store's reload) %d kB; RssAnon %d kB, peak (sampled) %d kB",
		status("VmRSS"), status("VmHWM"), status("RssAnon"), startAnon)
	before, anonBefore := status("VmRSS"), status("RssAnon")
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", cmd.Process.Pid), []byte("5"), 0) // VmHWM := VmRSS
	req, _ := http.NewRequest(http.MethodGet, "http://"+admin+"/api/v1/approvals", nil)
	req.Header.Set("Authorization", "Bearer "+testkit.AdminToken)
	// RssAnon (the process's own memory, not the store file's pages it has mapped) has no
	// peak field: sample it while the page is served.
	peakAnon, stop, sampled := 0, make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			peakAnon = max(peakAnon, status("RssAnon"))
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	start := time.Now()
	resp, err := (&http.Client{Timeout: 300 * time.Second}).Do(req)
	close(stop)
	<-sampled
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	t.Logf("GET /api/v1/approvals: %d, %d bytes, %d rows, %v", resp.StatusCode, len(body), strings.Count(string(body), `"taskId"`), took)
	t.Logf("serving the page: VmRSS before %d kB, peak (VmHWM) %d kB (+%d kB); RssAnon before %d kB, peak (sampled every 5 ms) %d kB, after %d kB",
		before, status("VmHWM"), status("VmHWM")-before, anonBefore, peakAnon, status("RssAnon"))
}
