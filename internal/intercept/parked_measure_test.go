package intercept

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

// TestMeasureParkedFlood measures the flood, by hand (TOLLGATE_MEASURE=1; figures in
// docs/SECURITY.md "Measurements"): a legacy-only upstream on loopback whose tools/call asks
// elicitation/create and waits; ten callers at other addresses park a bridged call each, then
// 3000 anonymous calls from one address are parked. It reports how many of the ten are still
// parked, how many calls are parked in all, and the test process's descriptors and goroutines
// (Tollgate and the upstream run in it together). It asserts nothing: it is a measurement.
func TestMeasureParkedFlood(t *testing.T) {
	if os.Getenv("TOLLGATE_MEASURE") == "" {
		t.Skip("a measurement: set TOLLGATE_MEASURE=1")
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			http.Error(w, "no stream", http.StatusMethodNotAllowed)
			return
		case http.MethodDelete:
			return
		}
		body, _ := io.ReadAll(r.Body)
		m, err := jsonrpc.Parse(body)
		if err != nil || m.Kind != jsonrpc.KindRequest {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		switch m.Method {
		case "server/discover":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(jsonrpc.ErrorResponse(m.ID, jsonrpc.NewError(jsonrpc.CodeMethodNotFound, "", "no")))
		case "initialize":
			w.Header().Set(upstream.HeaderSessionID, fmt.Sprint(time.Now().UnixNano()))
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(jsonrpc.ResultResponse(m.ID, json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"up","version":"1"}}`)))
		default: // asks, then waits for as long as Tollgate keeps the call
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, `data: {"jsonrpc":"2.0","id":"q","method":"elicitation/create","params":{"message":"ok?","requestedSchema":{"type":"object","properties":{}}}}`+"\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}
	}))
	defer up.Close()
	h := newHarnessOn(t, unitConfig, up.URL+"/mcp")
	park := func(remote, auth string) string {
		hdr := []string{}
		if auth != "" {
			hdr = []string{"Authorization", auth}
		}
		x := modernExchange(t, "tools/call", `{"name":"hello","arguments":{}}`, `{"elicitation":{}}`, hdr...)
		x.HTTP.RemoteAddr = remote
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out := h.routeModern(x).Wait(ctx, func([]byte) bool { return false })
		var r struct {
			Result struct {
				RequestState string `json:"requestState"`
			} `json:"result"`
		}
		_ = json.Unmarshal(out, &r)
		return r.Result.RequestState
	}
	fds := func() int { e, _ := os.ReadDir("/proc/self/fd"); return len(e) }
	fds0, g0 := fds(), runtime.NumGoroutine()
	var toks []string
	for i := range 10 {
		toks = append(toks, park(fmt.Sprintf("192.0.2.%d:1000", 10+i), fmt.Sprintf("Bearer v%d", i)))
	}
	start := time.Now()
	refused := 0
	for range 3000 {
		if park("192.0.2.1:1000", "") == "" {
			refused++
		}
	}
	took := time.Since(start)
	time.Sleep(500 * time.Millisecond) // cancelled calls' connections close
	kept := 0
	for i, tok := range toks {
		x := modernExchange(t, "tools/call", `{"name":"hello","arguments":{}}`, `{"elicitation":{}}`, "Authorization", fmt.Sprintf("Bearer v%d", i))
		if pc := h.gw.modern.parked.take(tok, h.gw.modernOwner(x)); tok != "" && pc != nil {
			kept++
			pc.cancel()
		}
	}
	parked := -1 // the old parking was a map; the new one has len
	if p, ok := any(&h.gw.modern.parked).(interface{ len() int }); ok {
		parked = p.len()
	} else if m := reflect.ValueOf(&h.gw.modern.parked).Elem().FieldByName("m"); m.Kind() == reflect.Map {
		parked = m.Len()
	}
	t.Logf("3000 anonymous parked calls from one address in %v (%d not parked): %d of 10 other callers' parked calls kept; %d parked in all; descriptors %d → %d; goroutines %d → %d",
		took.Round(time.Millisecond), refused, kept, parked+kept, fds0, fds(), g0, runtime.NumGoroutine())
	h.gw.Close()
}
