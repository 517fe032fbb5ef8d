package intercept

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

// TestBridgeRefusesOnGETStream: a server→client request the upstream sends on a bridged
// session's GET stream while a call that cannot ask anyone is in flight is refused with the
// bridge's NotBridged error (the Bridge's glue to upstream.Pool), and the call still gets
// its result.
func TestBridgeRefusesOnGETStream(t *testing.T) {
	answered := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet { // the session's GET stream asks at once
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, `data: {"jsonrpc":"2.0","id":"up-1","method":"roots/list","params":{}}`+"\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		if r.Method == http.MethodDelete {
			return
		}
		body, _ := io.ReadAll(r.Body)
		m, err := jsonrpc.Parse(body)
		switch {
		case err != nil:
			http.Error(w, "bad", http.StatusBadRequest)
		case m.Kind == jsonrpc.KindResponse:
			answered <- string(body)
			w.WriteHeader(http.StatusAccepted)
		case m.Kind != jsonrpc.KindRequest:
			w.WriteHeader(http.StatusAccepted)
		case m.Method == "initialize":
			w.Header().Set(upstream.HeaderSessionID, "s1")
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(jsonrpc.ResultResponse(m.ID, json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"up","version":"1"}}`)))
		default: // the call ends once the upstream has its answer
			w.Header().Set("Content-Type", "application/json")
			select {
			case a := <-answered:
				answered <- a
				_, _ = w.Write(jsonrpc.ResultResponse(m.ID, json.RawMessage(`{"content":[]}`)))
			case <-r.Context().Done():
			}
		}
	}))
	defer srv.Close()
	uc, err := upstream.New(srv.URL+"/mcp", upstream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	br := NewBridge(uc, nil)
	defer br.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, e := br.bridgeCall(ctx, "user:a", http.Header{}, jsonrpc.Request(json.RawMessage(`7`), "tools/call", json.RawMessage(`{"name":"x"}`)), nil)
	if e != nil || m == nil || m.Result == nil {
		t.Fatalf("bridgeCall = %v, %v; want the call's result", m, e)
	}
	got := <-answered
	want := string(jsonrpc.ErrorResponse(json.RawMessage(`"up-1"`), notBridged("roots/list")))
	if got != want {
		t.Fatalf("the upstream's roots/list was answered\n%s\nwant\n%s", got, want)
	}
}
