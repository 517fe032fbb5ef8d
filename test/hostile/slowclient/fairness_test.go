package slowclient

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// TestStalledBodiesFairShare: one source opens 60 connections that each send all but one byte
// of a 4 MiB body and stall. Before server.limits.max_inflight_body_bytes_per_source, 16 of them
// held the whole 64 MiB budget and every other caller got 503 ServerBusy until body_timeout
// ended them. Now a source holds at most its share (16 MiB by default): the flood's other
// bodies are refused at once, and a caller from another source is served throughout. Sources
// are told apart by address (the flood from 127.0.0.1, the caller from 127.0.0.2: Linux
// loopback accepts any 127/8 source) or, with server.identity_header, by identity.
func TestStalledBodiesFairShare(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits string // server.limits block (and, after it, other server keys)
		flood  source
		legit  source
	}{
		{"by address", "    body_timeout: 5s\n", source{local: "127.0.0.1"}, source{local: "127.0.0.2"}},
		{"by identity", "    body_timeout: 5s\n  identity_header: X-Caller\n",
			source{local: "127.0.0.1", identity: "mallory"}, source{local: "127.0.0.1", identity: "alice"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, up := testkit.StartDemo(t)
			p := start(t, testkit.BasicConfig(up, ""), tc.limits, 0)
			const conns, size = 60, 4 << 20 // size: server.max_body_bytes' default
			before := p.rssMB(t)

			results := make(chan string, conns)
			var sent sync.WaitGroup
			extra := ""
			if tc.flood.identity != "" {
				extra = "X-Caller: " + tc.flood.identity + "\r\n"
			}
			head := "POST /mcp HTTP/1.1\r\nHost: " + p.mcpHP + "\r\nContent-Type: application/json\r\n" +
				"Accept: application/json, text/event-stream\r\n" + extra + "Content-Length: " + fmt.Sprint(size) + "\r\n\r\n"
			body := []byte(strings.Repeat(" ", size-1))
			startAttack := time.Now()
			for range conns {
				c, br := rawDial(t, p.mcpHP, tc.flood.local)
				sent.Add(1)
				go func() {
					_ = c.SetWriteDeadline(time.Now().Add(30 * time.Second))
					if _, err := io.WriteString(c, head); err == nil {
						_, _ = c.Write(body)
					}
					sent.Done()
					_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
					resp, err := http.ReadResponse(br, nil)
					switch {
					case err == nil:
						b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
						resp.Body.Close()
						how := fmt.Sprintf("answered %d", resp.StatusCode)
						if strings.Contains(string(b), "max_inflight_body_bytes_per_source") {
							how += " (source share)"
						}
						results <- how
					case isTimeout(err):
						results <- "open"
					default:
						results <- "closed"
					}
				}()
			}
			sent.Wait()

			// Callers from another source, while the flood's bodies are held: all served.
			const legitCalls = 5
			served, slowest := 0, time.Duration(0)
			var refusals []string
			for range legitCalls {
				st, b, d := tc.legit.post(t, p.MCP, initializeBody)
				slowest = max(slowest, d)
				if st == http.StatusOK {
					served++
				} else {
					refusals = append(refusals, fmt.Sprintf("HTTP %d %.200s", st, b))
				}
			}
			if served != legitCalls {
				t.Errorf("another source during the flood: %d of %d initialize served; refused: %v", served, legitCalls, refusals)
			}
			// The flooding source itself is refused clearly, naming its share (which its held
			// bodies fill to the byte: 4 × 4 MiB).
			fst, fb, _ := tc.flood.post(t, p.MCP, initializeBody)
			during := p.rssMB(t)

			counts := map[string]int{}
			for range conns {
				counts[<-results]++
			}
			ended := time.Since(startAttack)
			if counts["open"] > 0 {
				t.Errorf("%d stalled connections still open 30 s later", counts["open"])
			}
			if fst != http.StatusServiceUnavailable || !strings.Contains(string(fb), "max_inflight_body_bytes_per_source") {
				t.Errorf("a further request from the flooding source: HTTP %d %.200s, want 503 naming max_inflight_body_bytes_per_source", fst, fb)
			}
			report.add(t, "%d connections × %d bytes from one source, stalled (body_timeout 5s): %v, all ended after %s; "+
				"another source: %d/%d initialize served, slowest %s; the flooding source: HTTP %d; RSS before %.0f MB, during %.0f MB",
				conns, size-1, counts, ended.Round(time.Millisecond), served, legitCalls, slowest.Round(time.Millisecond),
				fst, before, during)
		})
	}
}

// source is a client as Tollgate's per-source bounds see it: a loopback address to connect
// from and an optional identity header.
type source struct {
	local, identity string
}

// post sends one JSON body on a fresh connection from the source.
func (s source) post(t *testing.T, url, body string) (int, []byte, time.Duration) {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(s.local)}}
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.identity != "" {
		req.Header.Set("X-Caller", s.identity)
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST from %+v: %v", s, err)
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	return resp.StatusCode, b, time.Since(start)
}
