// Package ops checks Tollgate's operational surface end to end: the /metrics scrape against
// docs/metrics.md, logs and the audit log free of secrets, correlation ids, and trace context
// propagation. Each test runs a whole server in-process on loopback (the harness is a trimmed
// copy of test/e2e's).
package ops

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// rawUpstream answers the handshake and tools/list itself, hands tools/call to h (recording its
// headers) and accepts anything else with 202.
type opsUpstream struct {
	mu    sync.Mutex
	calls []http.Header
	srv   *httptest.Server
}

func newOpsUpstream(t *testing.T, h func(w http.ResponseWriter, r *http.Request, body []byte)) *opsUpstream {
	u := &opsUpstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(b, &m)
		switch m.Method {
		case "initialize":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Mcp-Session-Id", "raw-1")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"0"}}}`, m.ID)
		case "tools/list":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}}`, m.ID)
		case "tools/call":
			u.mu.Lock()
			u.calls = append(u.calls, r.Header.Clone())
			u.mu.Unlock()
			h(w, r, b)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *opsUpstream) url() string { return u.srv.URL + "/mcp" }

func (u *opsUpstream) toolCalls() []http.Header {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]http.Header(nil), u.calls...)
}

// echoResult answers a tools/call with a text result.
func echoResult(w http.ResponseWriter, body []byte) {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal(body, &m)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"ok"}]}}`, m.ID)
}
