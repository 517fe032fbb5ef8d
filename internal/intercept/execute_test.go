package intercept

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

// TestBridgeReopensForgottenSession: when the upstream answers the bridge session's request
// with 404 (it forgot the session), the bridge opens a new session once and sends the request
// again, whether the 404 carries a JSON-RPC error or plain text.
func TestBridgeReopensForgottenSession(t *testing.T) {
	for _, tc := range []struct {
		jsonBody bool
		owner    string
	}{{false, "user:a"}, {true, "user:a"}, {false, ""}, {true, ""}} {
		jsonBody := tc.jsonBody
		t.Run(fmt.Sprint("json=", jsonBody, ",owner=", tc.owner), func(t *testing.T) {
			var mu sync.Mutex
			inits := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				m, err := jsonrpc.Parse(body)
				if err != nil || m.Kind != jsonrpc.KindRequest {
					w.WriteHeader(http.StatusAccepted)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				switch {
				case m.Method == "initialize":
					inits++
					w.Header().Set(upstream.HeaderSessionID, fmt.Sprint("s", inits))
					w.Header().Set("Content-Type", "application/json")
					_, _ = w.Write(jsonrpc.ResultResponse(m.ID, json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"up","version":"1"}}`)))
				case r.Header.Get(upstream.HeaderSessionID) != "s2":
					if jsonBody {
						w.Header().Set("Content-Type", "application/json")
						w.WriteHeader(http.StatusNotFound)
						_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}`))
						return
					}
					http.Error(w, "Invalid session ID", http.StatusNotFound)
				default:
					w.Header().Set("Content-Type", "application/json")
					_, _ = w.Write(jsonrpc.ResultResponse(m.ID, json.RawMessage(`{"content":[]}`)))
				}
			}))
			defer srv.Close()
			uc, err := upstream.New(srv.URL+"/mcp", upstream.Options{})
			if err != nil {
				t.Fatal(err)
			}
			br := NewBridge(uc, nil)
			defer br.Close()
			m, e := br.bridgeCall(context.Background(), tc.owner, http.Header{}, jsonrpc.Request(json.RawMessage(`7`), "tools/call", json.RawMessage(`{"name":"x"}`)), nil)
			if e != nil || m == nil || m.Result == nil {
				t.Fatalf("bridgeCall = %v, %v; want the result from the new session", m, e)
			}
			mu.Lock()
			defer mu.Unlock()
			if inits != 2 {
				t.Errorf("initialize sent %d times, want 2 (the first session, then its replacement)", inits)
			}
		})
	}
}
