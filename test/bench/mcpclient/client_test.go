package mcpclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// fakeServer answers initialize with a session id, notifications with 202 and any other
// request in the style selected by the tools/call argument.
func fakeServer(t *testing.T) *httptest.Server {
	t.Helper()
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if m.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if m.Method == "initialize" {
			w.Header().Set("Mcp-Session-Id", "s-1")
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25"}}`, m.ID)
			return
		}
		if r.Header.Get("Mcp-Session-Id") != "s-1" {
			http.Error(w, "no session", http.StatusBadRequest)
			return
		}
		switch m.Params.Name {
		case "sse":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, ": comment\r\n\r\n")
			fmt.Fprint(w, "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"id\":1}}\r\n\r\n")
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"text\":\"%s\"}}\n\n", m.ID, strings.Repeat("x", 200_000))
		case "error":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32003,"message":"denied"}}`, m.ID)
		case "wrongid":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"jsonrpc":"2.0","id":999,"result":{}}`)
		case "truncated":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"jsonrpc\":")
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"ok":true}}`, m.ID)
		}
	}))
}

func TestClientCall(t *testing.T) {
	srv := fakeServer(t)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hc := &http.Client{Transport: NewTransport(1)}
	c, err := Connect(ctx, srv.URL, hc)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	if c.SessionID != "s-1" {
		t.Fatalf("SessionID = %q, want s-1", c.SessionID)
	}
	tests := []struct {
		tool      string
		wantSSE   bool
		wantErr   bool // transport/protocol error
		wantRPC   int  // JSON-RPC error code, 0 = none
		minResult int  // bytes of result at least
	}{
		{tool: "json", minResult: 5},
		{tool: "sse", wantSSE: true, minResult: 200_000},
		{tool: "error", wantRPC: -32003},
		{tool: "wrongid", wantErr: true},
		{tool: "truncated", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			rep, err := c.Call(ctx, "tools/call", map[string]any{"name": tt.tool})
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Call succeeded, want an error")
				}
				return
			}
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if rep.SSE != tt.wantSSE {
				t.Errorf("SSE = %v, want %v", rep.SSE, tt.wantSSE)
			}
			if tt.wantRPC != 0 {
				if rep.Error == nil || rep.Error.Code != tt.wantRPC {
					t.Errorf("Error = %v, want code %d", rep.Error, tt.wantRPC)
				}
				return
			}
			if rep.Error != nil || len(rep.Result) < tt.minResult {
				t.Errorf("result %d bytes, error %v; want ≥ %d bytes", len(rep.Result), rep.Error, tt.minResult)
			}
			if rep.Bytes == 0 || rep.TTFB <= 0 {
				t.Errorf("Bytes = %d, TTFB = %v; want both recorded", rep.Bytes, rep.TTFB)
			}
		})
	}
	c.Close()
}
