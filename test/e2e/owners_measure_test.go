package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// TestMeasureQuotaFlood measures what one source can make Tollgate hold with the default
// quotas, and whether a caller from another source is still served afterwards: a flood of
// 2026-07-28 approval calls, each with a new random Authorization value (a new owner), from
// 127.0.0.1, then 101 legacy sessions from 127.0.0.5 each filling its own per-owner quota.
// It is a measurement, not a check, and runs by hand (figures in docs/SECURITY.md "Fair
// quotas"):
//
//	TOLLGATE_MEASURE=1 go test -count=1 -run TestMeasureQuotaFlood -v ./test/e2e/
//
// MEASURE_FLOOD sets the number of modern calls (default 10000). Self-contained (its own HTTP
// helpers) so the same file runs against an older build for the "before" column.
func TestMeasureQuotaFlood(t *testing.T) {
	if os.Getenv("TOLLGATE_MEASURE") == "" {
		t.Skip("a measurement; set TOLLGATE_MEASURE=1 to run it")
	}
	flood := 10000
	if n, err := strconv.Atoi(os.Getenv("MEASURE_FLOOD")); err == nil && n > 0 {
		flood = n
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
		return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 16}}
	}
	post := func(hc *http.Client, hdr map[string]string, body any) (int, http.Header, map[string]any) {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, g.MCP, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, nil, nil
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if i := bytes.Index(raw, []byte("data: ")); i >= 0 && raw[0] != '{' {
			raw = raw[i+len("data: "):]
		}
		var m map[string]any
		_ = json.Unmarshal(bytes.TrimSpace(raw), &m)
		return resp.StatusCode, resp.Header, m
	}
	modernCall := func(hc *http.Client, auth string, id int, user string) map[string]any {
		hdr := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "delete_user"}
		if auth != "" {
			hdr["Authorization"] = auth
		}
		_, _, m := post(hc, hdr, map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{
			"name": "delete_user", "arguments": map[string]any{"user_id": user},
			"_meta": map[string]any{
				"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
				"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
				"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "measure", "version": "1"},
			}}})
		return m
	}
	outcome := func(m map[string]any) string {
		if testkit.Dig(m, "result", "taskId") != nil {
			return "task"
		}
		if lim, ok := testkit.Dig(m, "error", "data", "limit").(string); ok {
			return lim
		}
		if name, ok := testkit.Dig(m, "error", "data", "error").(string); ok {
			return name
		}
		return "other"
	}
	var mu sync.Mutex
	counts := map[string]int{}
	var next atomic.Int64
	flooder := client("127.0.0.1")
	start := time.Now()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1))
				if i > flood {
					return
				}
				o := outcome(modernCall(flooder, fmt.Sprintf("Bearer flood-%d-%d", i, time.Now().UnixNano()), i, strconv.Itoa(i)))
				mu.Lock()
				counts[o]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("flood: %d modern calls with random Authorization from 127.0.0.1 in %s: %v", flood, time.Since(start).Round(100*time.Millisecond), counts)
	legit := client("127.0.0.2")
	t.Logf("after the flood, modern caller from 127.0.0.2: %s", outcome(modernCall(legit, "Bearer legit", 1, "legit")))
	t.Logf("after the flood, anonymous modern caller from 127.0.0.3: %s", outcome(modernCall(client("127.0.0.3"), "", 1, "anon")))

	// 101 legacy sessions from one address, each filling its per-owner quota.
	legacyFrom := client("127.0.0.5")
	sessions, lcounts := 0, map[string]int{}
	start = time.Now()
	for s := 0; s < 101; s++ {
		st, h, _ := post(legacyFrom, nil, map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
			"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "measure", "version": "1"}}})
		sid := h.Get("Mcp-Session-Id")
		if st == http.StatusTooManyRequests {
			time.Sleep(200 * time.Millisecond) // the session rate limit: a patient flooder waits
			s--
			continue
		}
		if sid == "" {
			lcounts["no session"]++
			continue
		}
		sessions++
		hdr := map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
		post(legacyFrom, hdr, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
		for i := range 100 {
			_, _, m := post(legacyFrom, hdr, map[string]any{"jsonrpc": "2.0", "id": i + 2, "method": "tools/call", "params": map[string]any{
				"name": "delete_user", "arguments": map[string]any{"user_id": fmt.Sprintf("%d-%d", s, i)}, "task": map[string]any{}}})
			o := "other"
			if testkit.Dig(m, "result", "task", "taskId") != nil {
				o = "task"
			} else if lim, ok := testkit.Dig(m, "error", "data", "limit").(string); ok {
				o = lim
			}
			lcounts[o]++
			if o != "task" {
				break // this session is full; the next one gets a fresh per-owner quota
			}
		}
	}
	t.Logf("legacy: %d sessions from 127.0.0.5 in %s: %v", sessions, time.Since(start).Round(100*time.Millisecond), lcounts)
	t.Logf("after both floods, modern caller from 127.0.0.4: %s", outcome(modernCall(client("127.0.0.4"), "Bearer legit-2", 2, "legit-2")))
}
