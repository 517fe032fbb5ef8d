package slowclient

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

const initializeBody = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"slowclient","version":"1"}}}`

// TestStalledBodies: many connections each send all but one byte of a 4 MiB body and stall.
// The body budget refuses what does not fit (503 ServerBusy, body unread), the body deadline
// ends the rest, memory stays bounded, and the admin listener answers throughout.
func TestStalledBodies(t *testing.T) {
	_, up := testkit.StartDemo(t)
	p := start(t, testkit.BasicConfig(up, ""), "    body_timeout: 3s\n", 0)
	const conns, size = 60, 4 << 20 // size: server.max_body_bytes' default
	before := p.rssMB(t)

	stopHealth := make(chan struct{})
	health := watchHealth(p.Admin, 200*time.Millisecond, stopHealth)

	type outcome struct {
		how string // "answered NNN", "closed", "open"
	}
	results := make(chan outcome, conns)
	var sent sync.WaitGroup
	head := "POST /mcp HTTP/1.1\r\nHost: " + p.mcpHP + "\r\nContent-Type: application/json\r\n" +
		"Accept: application/json, text/event-stream\r\nContent-Length: " + fmt.Sprint(size) + "\r\n\r\n"
	body := make([]byte, size-1)
	for i := range body {
		body[i] = ' '
	}
	startAttack := time.Now()
	for range conns {
		c, br := rawDial(t, p.mcpHP, "")
		sent.Add(1)
		go func() {
			_ = c.SetWriteDeadline(time.Now().Add(30 * time.Second))
			_, werr := io.WriteString(c, head)
			if werr == nil {
				_, werr = c.Write(body)
			}
			sent.Done()
			// Stall: send nothing more, and see whether the server ends the exchange.
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			resp, err := http.ReadResponse(br, nil)
			switch {
			case err == nil:
				resp.Body.Close()
				results <- outcome{fmt.Sprintf("answered %d", resp.StatusCode)}
			case isTimeout(err):
				results <- outcome{"open"}
			default:
				_ = werr // a refused write (server closed first) is an end too
				results <- outcome{"closed"}
			}
		}()
	}
	sent.Wait()
	sendTime := time.Since(startAttack)
	during := p.rssMB(t)

	// A legitimate caller meanwhile gets an answer, not a hang: served, or refused clearly.
	c := &testkit.RPC{T: t, URL: p.MCP}
	r := c.Post(initializeBody)
	switch {
	case r.Status == http.StatusOK:
	case r.Status == http.StatusServiceUnavailable && strings.Contains(string(r.Body), `"ServerBusy"`):
	default:
		t.Errorf("legitimate request during the attack: HTTP %d %s, want 200 or 503 ServerBusy", r.Status, r.Body)
	}
	legitDuring := r.Status

	counts := map[string]int{}
	for range conns {
		counts[(<-results).how]++
	}
	ended := time.Since(startAttack)
	if counts["open"] > 0 {
		t.Errorf("%d of %d stalled connections were still open 30 s later (want every one ended by the server)", counts["open"], conns)
	}
	close(stopHealth)
	okN, failN, slow := health()
	if failN > 0 {
		t.Errorf("admin /healthz failed %d of %d polls during the attack", failN, okN+failN)
	}
	after := p.rssMB(t)
	if r := c.Post(initializeBody); r.Status != http.StatusOK {
		t.Errorf("legitimate initialize after the attack: HTTP %d %s", r.Status, r.Body)
	}
	report.add(t, "%d connections × %d bytes of a %d-byte body, then stalled: sent in %s, all ended after %s (%v); "+
		"RSS before %.0f MB, during %.0f MB, after %.0f MB; legit request during: HTTP %d; /healthz %d/%d answered, slowest %s",
		conns, size-1, size, sendTime.Round(time.Millisecond), ended.Round(time.Millisecond), counts,
		before, during, after, legitDuring, okN, okN+failN, slow.Round(time.Millisecond))
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestConnectionFlood: more connections than the open-files limit allows. The MCP listener
// refuses those beyond its cap at once (503), the admin listener keeps answering, and once the
// flood ends legitimate callers are served again.
func TestConnectionFlood(t *testing.T) {
	_, up := testkit.StartDemo(t)
	const nofile, flood = 256, 300 // defaults lower max_connections to fit 256 files
	p := start(t, testkit.BasicConfig(up, ""), "    admin_max_connections: 32\n", nofile)
	before := p.rssMB(t)

	type held struct {
		c  net.Conn
		br *bufio.Reader
	}
	var conns []held
	startFlood := time.Now()
	for range flood {
		c, br := rawDial(t, p.mcpHP, "")
		// Half a request head, then silence (header_timeout would end these after 10 s).
		_, _ = io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: "+p.mcpHP+"\r\n")
		conns = append(conns, held{c, br})
	}
	// Which were refused (a 503 arrives at once) and which are held open?
	var refused, heldOpen, other atomic.Int32
	var wg sync.WaitGroup
	for _, h := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = h.c.SetReadDeadline(time.Now().Add(2 * time.Second))
			resp, err := http.ReadResponse(h.br, nil)
			switch {
			case err == nil && resp.StatusCode == http.StatusServiceUnavailable:
				resp.Body.Close()
				refused.Add(1)
			case err != nil && isTimeout(err):
				heldOpen.Add(1)
			default:
				other.Add(1)
			}
		}()
	}
	wg.Wait()
	floodTime := time.Since(startFlood)
	files := p.openFiles()

	// The admin listener has its own budget.
	var adminOK int
	var slowest time.Duration
	for range 5 {
		st, d := get(p.Admin+"/healthz", 5*time.Second)
		if st == http.StatusOK {
			adminOK++
		}
		slowest = max(slowest, d)
	}
	if adminOK != 5 {
		t.Errorf("admin /healthz answered %d of 5 times while the MCP listener was flooded", adminOK)
	}
	// One more MCP connection is refused at once, not left hanging.
	st, d := get(p.MCP, 5*time.Second)
	if st != http.StatusServiceUnavailable {
		t.Errorf("a connection beyond the cap: HTTP %d after %s, want 503 at once", st, d.Round(time.Millisecond))
	}
	if refused.Load() == 0 {
		t.Errorf("no flood connection was refused (held open %d, other %d)", heldOpen.Load(), other.Load())
	}
	during := p.rssMB(t)

	for _, h := range conns {
		h.c.Close()
	}
	// Slots free up as the server notices the closes.
	c := &testkit.RPC{T: t, URL: p.MCP}
	var r testkit.Reply
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if r = c.Post(initializeBody); r.Status == http.StatusOK {
			break
		}
	}
	if r.Status != http.StatusOK {
		t.Errorf("legitimate initialize after the flood: HTTP %d %s", r.Status, r.Body)
	}
	report.add(t, "ulimit -n %d, %d connections opened in %s: %d held, %d refused with 503, %d other; Tollgate held %d files; "+
		"admin /healthz %d/5 answered (slowest %s); RSS before %.0f MB, during %.0f MB",
		nofile, flood, floodTime.Round(time.Millisecond), heldOpen.Load(), refused.Load(), other.Load(), files,
		adminOK, slowest.Round(time.Millisecond), before, during)
}

const approvalRules = `governance:
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve}
`

// TestForgedSessionFlood: more than ten thousand made-up Mcp-Session-Id values, from another
// address than the legitimate callers. None becomes a session or owns a task, so the pending
// quota stays free for legitimate callers and a live session keeps its notifications.
func TestForgedSessionFlood(t *testing.T) {
	_, up := testkit.StartDemo(t)
	p := start(t, testkit.BasicConfig(up, approvalRules), "", 0)
	before := p.rssMB(t)

	live := &testkit.RPC{T: t, URL: p.MCP}
	live.Initialize()
	st, lines := testkit.OpenStream(t, p.MCP, live.Session)
	if st != http.StatusOK {
		t.Fatalf("GET stream: HTTP %d", st)
	}
	tid := live.CallTask(1, "delete_user", `{"user_id":"u-002"}`)

	// The attacker: 127.0.0.2 (another source for the per-source session rate).
	attacker := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		MaxIdleConnsPerHost: 16,
		DialContext:         (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 5 * time.Second}).DialContext,
	}}
	defer attacker.CloseIdleConnections()
	const forged, workers = 10050, 8 // more than the 10000 sessions Tollgate tracks by default
	var next atomic.Int64
	var mu sync.Mutex
	statuses := map[string]int{}
	var wg sync.WaitGroup
	startFlood := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > forged {
					return
				}
				key := forgedCall(attacker, p.MCP, fmt.Sprintf("forged-%d", i))
				mu.Lock()
				statuses[key]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	floodTime := time.Since(startFlood)
	during := p.rssMB(t)
	if n := statuses["task"]; n > 0 {
		t.Errorf("%d of %d forged sessions got a task", n, forged)
	}

	// A legitimate caller still gets a task: the quota was not filled by forged owners.
	fresh := &testkit.RPC{T: t, URL: p.MCP}
	fresh.Initialize()
	m := fresh.Post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_user","arguments":{"user_id":"u-001"},"task":{"ttl":60000}}}`).Message(t)
	if code, name := testkit.ErrorOf(m); code != 0 {
		t.Errorf("legitimate task call after the flood: %v %s", code, name)
	}

	// The live session was not evicted: approving its task reaches its stream.
	req, _ := http.NewRequest(http.MethodPost, p.Admin+"/api/v1/approvals/"+tid+"/approve", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+testkit.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := testkit.HTTPClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("approve: HTTP %d", resp.StatusCode)
	}
	got := false
	for deadline := time.After(10 * time.Second); !got; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the live session's stream ended")
			}
			got = strings.Contains(l, "notifications/tasks/status") && strings.Contains(l, tid) && strings.Contains(l, `"completed"`)
		case <-deadline:
			t.Fatal("the live session did not receive its task's notification after the flood")
		}
	}
	report.add(t, "%d forged session ids in %s (%.0f/s): %v; RSS before %.0f MB, after the flood %.0f MB; live session notified, legitimate task created",
		forged, floodTime.Round(time.Millisecond), float64(forged)/floodTime.Seconds(), statuses, before, during)
}

// forgedCall sends an approval-gated task call under sid and classifies the answer.
func forgedCall(c *http.Client, url, sid string) string {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_user","arguments":{"user_id":"u-001"},"task":{"ttl":60000}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := c.Do(req)
	if err != nil {
		return "transport error"
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"taskId"`) {
		return "task"
	}
	return fmt.Sprintf("HTTP %d", resp.StatusCode)
}

// floodUpstream is an MCP upstream whose GET stream pushes 64 KiB notifications as fast as the
// reader takes them, and reports when Tollgate gave up on it.
type floodUpstream struct {
	srv     *httptest.Server
	ended   chan time.Duration // one per GET stream, when it ends
	written atomic.Int64
	seq     atomic.Int64
}

func newFloodUpstream(t *testing.T) *floodUpstream {
	u := &floodUpstream{ended: make(chan time.Duration, 16)}
	event := []byte("data: " + `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"` +
		strings.Repeat("x", 64<<10) + `"}}` + "\n\n")
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			if r.Header.Get("Mcp-Session-Id") == "" {
				w.WriteHeader(http.StatusMethodNotAllowed) // Tollgate's health probe
				return
			}
			start := time.Now()
			defer func() { u.ended <- time.Since(start) }()
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			rc := http.NewResponseController(w)
			for r.Context().Err() == nil {
				if _, err := w.Write(event); err != nil {
					return
				}
				if rc.Flush() != nil {
					return
				}
				u.written.Add(int64(len(event)))
			}
			return
		case http.MethodDelete:
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &m)
		if m.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		result := `{}`
		switch m.Method {
		case "initialize":
			w.Header().Set("Mcp-Session-Id", fmt.Sprintf("flood-%d", u.seq.Add(1)))
			result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"flood","version":"1"}}`
		case "tools/list":
			result = `{"tools":[]}`
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result)
	}))
	t.Cleanup(func() { u.srv.CloseClientConnections(); u.srv.Close() })
	return u
}

// TestSlowSSEReader: a client opens a stream and stops reading while the upstream floods it.
// Tollgate's write deadline ends the stream (and its upstream request) instead of holding
// the connection and its buffers for ever.
func TestSlowSSEReader(t *testing.T) {
	up := newFloodUpstream(t)
	p := start(t, testkit.BasicConfig(up.srv.URL+"/mcp", ""), "    write_timeout: 2s\n", 0)
	before := p.rssMB(t)
	c := &testkit.RPC{T: t, URL: p.MCP}
	c.Initialize()

	conn, br := rawDial(t, p.mcpHP, "")
	fmt.Fprintf(conn, "GET /mcp HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nMcp-Session-Id: %s\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n", p.mcpHP, c.Session)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %v %v", resp, err)
	}
	first := make([]byte, 1024)
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatalf("first bytes of the stream: %v", err)
	}
	// From here on the client reads nothing.
	stalled := time.Now()
	peak := before
	var endedAfter time.Duration
	timeout := time.After(30 * time.Second)
wait:
	for {
		select {
		case d := <-up.ended:
			endedAfter = d
			break wait
		case <-time.After(200 * time.Millisecond):
			peak = max(peak, p.rssMB(t))
		case <-timeout:
			t.Errorf("the upstream stream was still being read 30 s after the client stopped reading (%d bytes pushed)", up.written.Load())
			break wait
		}
	}
	stuck := time.Since(stalled).Round(time.Millisecond).String()
	if endedAfter == 0 {
		stuck = "never (30 s bound)"
	}
	if st, _ := get(p.Admin+"/healthz", 5*time.Second); st != http.StatusOK {
		t.Errorf("admin /healthz: HTTP %d", st)
	}
	if r := c.Post(`{"jsonrpc":"2.0","id":9,"method":"ping"}`); r.Status != http.StatusOK {
		t.Errorf("the session's other requests after its stream was cut: HTTP %d %s", r.Status, r.Body)
	}
	report.add(t, "client stopped reading a flooded GET stream: Tollgate ended it %s later (upstream stream lived %s, %d MB pushed); RSS before %.0f MB, peak %.0f MB, after %.0f MB",
		stuck, endedAfter.Round(time.Millisecond), up.written.Load()>>20, before, peak, p.rssMB(t))
}
