package browser

// The harness below is a copy of test/e2e/harness_test.go (startGateway, rpc helpers) plus
// startDemo from test/e2e/proxy_test.go, kept separate so the two packages evolve freely.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/demo"
	"github.com/tollgate-mcp/tollgate/internal/server"
)

const adminToken = "browser-admin-token"

// gateway is a running Tollgate.
type gateway struct {
	MCP   string // http://host:port/mcp
	Admin string // http://host:port
	Srv   *server.Server
	Logs  *bytes.Buffer
	Dir   string
	stop  func()
}

// startGateway writes cfgYAML to a temp dir (with any extra files) and runs Tollgate on free
// loopback ports. env adds variables visible to config expansion.
func startGateway(t *testing.T, cfgYAML string, env map[string]string, files map[string]string) *gateway {
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
		switch k {
		case "TOLLGATE_LISTEN", "TOLLGATE_ADMIN_LISTEN":
			if v, ok := env[k]; ok {
				return v, true
			}
			return "127.0.0.1:0", true
		case "TOLLGATE_ADMIN_TOKEN":
			if v, ok := env[k]; ok {
				return v, true
			}
			return adminToken, true
		}
		if v, ok := env[k]; ok {
			return v, true
		}
		if strings.HasPrefix(k, "TOLLGATE_") {
			return "", false // keep the developer's environment out of tests
		}
		return os.LookupEnv(k)
	}
	cfg, err := config.Load(path, lookup)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, err := server.New(cfg, server.Options{Logger: log, LookupEnv: lookup, Version: "browser-test"})
	if err != nil {
		t.Fatalf("server: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Run(ctx) }()
	g := &gateway{MCP: "http://" + srv.MCPAddr() + "/mcp", Admin: "http://" + srv.AdminAddr(), Srv: srv, Logs: &logs.Buffer, Dir: dir}
	g.stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("gateway did not stop within 15s")
		}
	}
	t.Cleanup(g.stop)
	return g
}

// waitReady polls /readyz until 200 (the annotation cache is built) or fails the test.
func (g *gateway) waitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := httpClient.Get(g.Admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("gateway not ready within 10s")
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	bytes.Buffer
	mu chanMutex
}

type chanMutex chan struct{}

func (m *chanMutex) lock() {
	if *m == nil {
		*m = make(chan struct{}, 1)
	}
	*m <- struct{}{}
}
func (m *chanMutex) unlock() { <-*m }

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.lock()
	defer s.mu.unlock()
	return s.Buffer.Write(p)
}

// startDemo runs the demo MCP server (mcp-go, streamable HTTP) on loopback.
func startDemo(t *testing.T) (*demo.Demo, string) {
	t.Helper()
	d := demo.New()
	url, stop, err := d.Start(context.Background(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop(context.Background()) })
	return d, url
}

// httpClient bounds every test request (the brief: no wait longer than 10 s).
var httpClient = &http.Client{Timeout: 10 * time.Second}

// basicConfig is a config with one upstream and the given governance/approval YAML appended.
func basicConfig(upstreamURL, extra string) string {
	return "schema: 1\nsources:\n  - id: upstream\n    kind: mcp\n    url: " + upstreamURL + "\naudit: {path: audit.log}\n" + extra
}

// rpc is a minimal raw MCP client for tests that need byte-level control.
type rpc struct {
	t       *testing.T
	url     string
	session string
	header  http.Header
}

type rawReply struct {
	Status int
	Header http.Header
	Body   []byte
}

// post sends one raw JSON-RPC message and returns the raw reply (SSE bodies are returned as
// they are).
func (c *rpc) post(body string) rawReply {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		c.t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return rawReply{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// message extracts the JSON-RPC response from a reply (JSON body or the last data event).
func (r rawReply) message(t *testing.T) map[string]any {
	t.Helper()
	b := r.responseBytes(t)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("reply is not JSON: %v\n%s", err, r.Body)
	}
	return m
}

func (r rawReply) responseBytes(t *testing.T) []byte {
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

// initialize performs the handshake and keeps the session id.
func (c *rpc) initialize() map[string]any {
	c.t.Helper()
	r := c.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"browser-test","version":"1"}}}`)
	if r.Status != 200 {
		c.t.Fatalf("initialize: HTTP %d: %s", r.Status, r.Body)
	}
	c.session = r.Header.Get("Mcp-Session-Id")
	m := r.message(c.t)
	c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return m
}

// errorOf returns error.code and error.data.error of a reply (0, "" if none).
func errorOf(m map[string]any) (float64, string) {
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

func dig(m any, path ...string) any {
	for _, p := range path {
		mm, ok := m.(map[string]any)
		if !ok {
			return nil
		}
		m = mm[p]
	}
	return m
}
