package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// TestMeasureStoredBytesFlood measures what one address can make Tollgate store in pending
// arguments with the default quotas, and whether callers at other addresses can still create
// approval requests: 2026-07-28 approval calls with 1 MiB − 1 KiB of arguments, each under a
// new random Authorization value (a new owner, so the per-owner count never stops it), from
// 127.0.0.1, 8 at a time, until 50 in a row are refused; then one such call from 127.0.0.2 and
// one from 127.0.0.3. A measurement, not a check; by hand (figures in docs/SECURITY.md
// "Measurements"):
//
//	TOLLGATE_MEASURE=1 go test -count=1 -run TestMeasureStoredBytesFlood -v ./test/e2e/
//
// Self-contained (its own HTTP helpers), so the same file runs against an older build for the
// "before" column.
func TestMeasureStoredBytesFlood(t *testing.T) {
	if os.Getenv("TOLLGATE_MEASURE") == "" {
		t.Skip("a measurement; set TOLLGATE_MEASURE=1 to run it")
	}
	_, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, `governance:
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve}
`), nil, nil)
	g.WaitReady(t)

	client := func(ip string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
		return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 16}}
	}
	pad := strings.Repeat("x", 1<<20-1024)
	call := func(hc *http.Client, auth string, id int64) string {
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{
			"name": "delete_user", "arguments": map[string]any{"user_id": fmt.Sprint(id), "note": pad},
			"_meta": map[string]any{
				"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
				"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
				"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "measure", "version": "1"},
			}}})
		req, _ := http.NewRequest(http.MethodPost, g.MCP, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "delete_user")
		req.Header.Set("Authorization", auth)
		resp, err := hc.Do(req)
		if err != nil {
			return "transport error"
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if i := bytes.Index(raw, []byte("data: ")); i >= 0 && raw[0] != '{' {
			raw = raw[i+len("data: "):]
		}
		var m map[string]any
		_ = json.Unmarshal(bytes.TrimSpace(raw), &m)
		switch {
		case testkit.Dig(m, "result", "taskId") != nil:
			return "task"
		case testkit.Dig(m, "error", "data", "limit") != nil:
			return testkit.Dig(m, "error", "data", "limit").(string)
		case testkit.Dig(m, "error", "data", "error") != nil:
			return fmt.Sprint(testkit.Dig(m, "error", "data", "error"))
		}
		return fmt.Sprintf("HTTP %d", resp.StatusCode)
	}

	var mu sync.Mutex
	counts := map[string]int{}
	var id, refusedInARow atomic.Int64
	flooder := client("127.0.0.1")
	start := time.Now()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for refusedInARow.Load() < 50 && time.Since(start) < 5*time.Minute {
				o := call(flooder, fmt.Sprintf("Bearer flood-%d", time.Now().UnixNano()), id.Add(1))
				if o == "task" {
					refusedInARow.Store(0)
				} else {
					refusedInARow.Add(1)
				}
				mu.Lock()
				counts[o]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("flood from 127.0.0.1: %v in %s (each task holds 1 MiB − 1 KiB of arguments: %d MiB stored)",
		counts, time.Since(start).Round(100*time.Millisecond), counts["task"])
	t.Logf("then a caller from 127.0.0.2: %s", call(client("127.0.0.2"), "Bearer legit-2", id.Add(1)))
	t.Logf("then a caller from 127.0.0.3: %s", call(client("127.0.0.3"), "Bearer legit-3", id.Add(1)))
}
