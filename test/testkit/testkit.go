// Package testkit runs a real Tollgate on loopback listeners for end-to-end tests, in front of
// real MCP servers, and gives tests a raw MCP client for byte-level checks. Test packages
// (e2e, browser, ops, interop) share it instead of copying a harness each.
package testkit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/demo"
	"github.com/tollgate-mcp/tollgate/internal/server"
)

// AdminToken is the TOLLGATE_ADMIN_TOKEN of every test gateway (approver "admin").
const AdminToken = "testkit-admin-token"

// HTTPClient bounds every request a test makes.
var HTTPClient = &http.Client{Timeout: 20 * time.Second}

// Gateway is a running Tollgate.
type Gateway struct {
	MCP   string // http://host:port/mcp
	Admin string // http://host:port
	Srv   *server.Server
	Logs  *SyncBuffer // the server's JSON logs, debug level
	Dir   string      // holds tollgate.yaml and the extra files
	Stop  func()      // idempotent; also run by t.Cleanup
}

// StartGateway writes cfgYAML (as tollgate.yaml) and files (relative paths) to a temp dir and
// runs Tollgate on free loopback ports. env adds variables visible to config expansion; the
// developer's own TOLLGATE_* and OTEL_* variables never leak in.
func StartGateway(t testing.TB, cfgYAML string, env map[string]string, files map[string]string) *Gateway {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "tollgate.yaml")
	if err := os.WriteFile(path, []byte(cfgYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	lookup := func(k string) (string, bool) {
		if v, ok := env[k]; ok {
			return v, true
		}
		switch k {
		case "TOLLGATE_LISTEN", "TOLLGATE_ADMIN_LISTEN":
			return "127.0.0.1:0", true
		case "TOLLGATE_ADMIN_TOKEN":
			return AdminToken, true
		case "TOLLGATE_DATA_DIR":
			// The default store is a file in the data directory: each gateway gets its own
			// (bbolt locks the file) unless the test shares one on purpose through env.
			return filepath.Join(dir, "data"), true
		}
		if strings.HasPrefix(k, "TOLLGATE_") || strings.HasPrefix(k, "OTEL_") {
			return "", false
		}
		return os.LookupEnv(k)
	}
	cfg, err := config.Load(path, lookup)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	logs := &SyncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, err := server.New(cfg, server.Options{Logger: log, LookupEnv: lookup, Version: "test"})
	if err != nil {
		t.Fatalf("server: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Run(ctx) }()
	g := &Gateway{MCP: "http://" + srv.MCPAddr() + "/mcp", Admin: "http://" + srv.AdminAddr(), Srv: srv, Logs: logs, Dir: dir}
	var once sync.Once
	g.Stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				t.Error("gateway did not stop within 15s")
			}
		})
	}
	t.Cleanup(g.Stop)
	return g
}

// WaitReady polls /readyz until 200 (the annotation cache is built) or fails the test.
func (g *Gateway) WaitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := HTTPClient.Get(g.Admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("gateway not ready within 10s")
}

// AdminRequest calls the admin API with a bearer token ("" = none) and decodes the JSON answer.
func (g *Gateway) AdminRequest(t testing.TB, method, path, token, body string) (int, map[string]any) {
	t.Helper()
	st, m, err := g.TryAdminRequest(method, path, token, body)
	if err != nil {
		t.Fatal(err)
	}
	return st, m
}

// TryAdminRequest is AdminRequest for goroutines other than the test's own: t.Fatal there
// would end only that goroutine (testing.T.FailNow) and leave the test waiting for it.
func (g *Gateway) TryAdminRequest(method, path, token, body string) (int, map[string]any, error) {
	req, err := http.NewRequest(method, g.Admin+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := HTTPClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m, nil
}

// SyncBuffer is a goroutine-safe log sink.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// StartDemo runs the demo MCP server (mcp-go, streamable HTTP) on loopback.
func StartDemo(t testing.TB) (*demo.Demo, string) {
	t.Helper()
	d := demo.New()
	url, stop, err := d.Start(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop(context.Background()) })
	return d, url
}

// BasicConfig is a config with one upstream, an audit log file in the config's directory, and
// the given YAML appended.
func BasicConfig(upstreamURL, extra string) string {
	return "schema: 1\nsources:\n  - id: upstream\n    kind: mcp\n    url: " + upstreamURL + "\naudit: {path: audit.log}\n" + extra
}

// RPC is a minimal raw MCP client for tests that need byte-level control.
type RPC struct {
	T       testing.TB
	URL     string
	Session string       // Mcp-Session-Id, set by Initialize
	Header  http.Header  // extra headers on every request
	Client  *http.Client // nil = HTTPClient
}

// Reply is one raw HTTP answer.
type Reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// Post sends one raw JSON-RPC message and returns the raw reply (SSE bodies as they are).
func (c *RPC) Post(body string) Reply {
	c.T.Helper()
	r, err := c.TryPost(body)
	if err != nil {
		c.T.Fatalf("POST: %v", err)
	}
	return r
}

// TryPost is Post for goroutines other than the test's own (see TryAdminRequest); c.T is
// not used.
func (c *RPC) TryPost(body string) (Reply, error) {
	req, err := http.NewRequest(http.MethodPost, c.URL, strings.NewReader(body))
	if err != nil {
		return Reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.Session != "" {
		req.Header.Set("Mcp-Session-Id", c.Session)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	for k, v := range c.Header {
		req.Header[k] = v
	}
	hc := c.Client
	if hc == nil {
		hc = HTTPClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return Reply{Status: resp.StatusCode, Header: resp.Header, Body: b}, err
}

// Initialize performs the handshake and keeps the session id.
func (c *RPC) Initialize() map[string]any {
	c.T.Helper()
	r := c.Post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"testkit","version":"1"}}}`)
	if r.Status != http.StatusOK {
		c.T.Fatalf("initialize: HTTP %d: %s", r.Status, r.Body)
	}
	c.Session = r.Header.Get("Mcp-Session-Id")
	m := r.Message(c.T)
	c.Post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return m
}

// Call sends tools/call (task-augmented when ttl > 0) and returns the decoded response.
func (c *RPC) Call(id int, tool string, args any, ttl int) map[string]any {
	c.T.Helper()
	p := map[string]any{"name": tool, "arguments": args}
	if ttl > 0 {
		p["task"] = map[string]any{"ttl": ttl}
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": p})
	return c.Post(string(b)).Message(c.T)
}

// CallTask sends a task-augmented tools/call (args is raw JSON) and returns the Tollgate task
// id, failing the test unless a working tg_ task came back.
func (c *RPC) CallTask(id int, tool, args string) string {
	c.T.Helper()
	m := c.Post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s,"task":{"ttl":60000}}}`, id, tool, args)).Message(c.T)
	tid, _ := Dig(m, "result", "task", "taskId").(string)
	if !strings.HasPrefix(tid, "tg_") {
		c.T.Fatalf("no Tollgate task: %v", m)
	}
	if Dig(m, "result", "task", "status") != "working" {
		c.T.Errorf("initial status %v, want working", Dig(m, "result", "task", "status"))
	}
	return tid
}

// TaskRPC sends tasks/get, tasks/result or tasks/cancel for taskID.
func (c *RPC) TaskRPC(id int, method, taskID string) Reply {
	c.T.Helper()
	return c.Post(taskRPC(id, method, taskID))
}

// TryTaskRPC is TaskRPC for goroutines other than the test's own (see TryAdminRequest).
func (c *RPC) TryTaskRPC(id int, method, taskID string) (Reply, error) {
	return c.TryPost(taskRPC(id, method, taskID))
}

func taskRPC(id int, method, taskID string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":{"taskId":%q}}`, id, method, taskID)
}

// Message extracts the JSON-RPC response from a reply (JSON body or the last response event).
func (r Reply) Message(t testing.TB) map[string]any {
	t.Helper()
	b := r.ResponseBytes(t)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("reply is not JSON: %v\n%s", err, r.Body)
	}
	return m
}

// ResponseBytes is the raw JSON-RPC response of a reply.
func (r Reply) ResponseBytes(t testing.TB) []byte {
	t.Helper()
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") {
		return r.Body
	}
	var last []byte
	for _, line := range strings.Split(string(r.Body), "\n") {
		if strings.HasPrefix(line, "data: ") {
			d := []byte(strings.TrimPrefix(line, "data: "))
			if bytes.Contains(d, []byte(`"result"`)) || bytes.Contains(d, []byte(`"error"`)) {
				last = d
			}
		}
	}
	if last == nil {
		t.Fatalf("no response event in stream:\n%s", r.Body)
	}
	return last
}

// ErrorOf returns error.code and error.data.error of a decoded reply (0, "" if none).
func ErrorOf(m map[string]any) (float64, string) {
	e, ok := m["error"].(map[string]any)
	if !ok {
		return 0, ""
	}
	code, _ := e["code"].(float64)
	name := ""
	if d, ok := e["data"].(map[string]any); ok {
		name, _ = d["error"].(string)
	}
	return code, name
}

// Dig walks nested maps.
func Dig(m any, path ...string) any {
	for _, p := range path {
		mm, ok := m.(map[string]any)
		if !ok {
			return nil
		}
		m = mm[p]
	}
	return m
}

// RawUpstream is an upstream whose bytes a test controls; it records every request.
type RawUpstream struct {
	mu     sync.Mutex
	bodies []string
	heads  []http.Header
	srv    *httptest.Server
}

// NewRawUpstream serves h, recording each request body and header first.
func NewRawUpstream(t testing.TB, h func(w http.ResponseWriter, r *http.Request, body []byte)) *RawUpstream {
	u := &RawUpstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.bodies = append(u.bodies, string(b))
		u.heads = append(u.heads, r.Header.Clone())
		u.mu.Unlock()
		h(w, r, b)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

// URL is the upstream's MCP endpoint.
func (u *RawUpstream) URL() string { return u.srv.URL + "/mcp" }

// Received reports whether a request body equal to body arrived.
func (u *RawUpstream) Received(body string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, b := range u.bodies {
		if b == body {
			return true
		}
	}
	return false
}

// Requests returns the recorded bodies and headers.
func (u *RawUpstream) Requests() ([]string, []http.Header) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.bodies...), append([]http.Header(nil), u.heads...)
}

// NewClient returns a raw client that has completed the MCP handshake with g.
func (g *Gateway) NewClient(t testing.TB) *RPC {
	t.Helper()
	c := &RPC{T: t, URL: g.MCP}
	c.Initialize()
	return c
}

// OpenStream opens the server→client GET stream of session sid at the MCP endpoint url and
// returns the HTTP status and the stream's lines. Lines the test does not take in time are
// dropped (a test that stopped reading must not stall the reader); the channel closes when
// the stream ends, and the stream is closed at test cleanup.
func OpenStream(t testing.TB, url, sid string) (int, <-chan string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET stream: %v", err)
	}
	lines := make(chan string, 256)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	t.Cleanup(func() { cancel(); resp.Body.Close(); <-done })
	return resp.StatusCode, lines
}

// FreeAddr returns a loopback address that was free a moment ago (for a child process to
// listen on).
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
