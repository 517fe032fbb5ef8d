package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
)

// TestHandshakeAndPages: Tollgate's own session — initialize, notifications/initialized with
// the session id and the answered version, list pages with the session's headers and the
// cursor, and DELETE at the end.
func TestHandshakeAndPages(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m, _ := jsonrpc.Parse(body)
		mu.Lock()
		defer mu.Unlock()
		if r.Method != http.MethodPost {
			seen = append(seen, r.Method+" "+r.Header.Get(HeaderSessionID))
			return
		}
		seen = append(seen, m.Method+" "+r.Header.Get(HeaderSessionID)+" "+r.Header.Get(HeaderProtocolVersion)+" "+string(m.ID)+" "+string(m.Params))
		w.Header().Set("Content-Type", "application/json")
		switch m.Method {
		case "initialize":
			w.Header().Set(HeaderSessionID, "s-1")
			_, _ = w.Write(jsonrpc.ResultResponse(m.ID, json.RawMessage(`{"protocolVersion":"2025-06-18","capabilities":{}}`)))
		case "tools/list":
			page := strings.Count(strings.Join(seen, "\n"), "tools/list")
			next := fmt.Sprintf(`,"nextCursor":"c%d"`, page)
			_, _ = w.Write(jsonrpc.ResultResponse(m.ID, json.RawMessage(`{"tools":[{"name":"t`+fmt.Sprint(page)+`"}]`+next+`}`)))
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	defer srv.Close()
	c, err := New(srv.URL+"/mcp", Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := c.Handshake(ctx, json.RawMessage(`{"protocolVersion":"2025-11-25"}`), "x")
	if err != nil || s.ID != "s-1" || s.Version != "2025-06-18" {
		t.Fatalf("Handshake = %+v, %v", s, err)
	}
	var pages []string
	truncated, err := c.Pages(ctx, s.Header(), "tools/list", "p-", 2, json.RawMessage(`{"k":1}`), func(r json.RawMessage) error {
		pages = append(pages, string(jsonrpc.Member(r, "tools")))
		return nil
	})
	if err != nil || !truncated || len(pages) != 2 {
		t.Fatalf("Pages = %v, %v (%d pages), want 2 pages, truncated", truncated, err, len(pages))
	}
	c.EndSession(s)
	want := []string{
		`initialize   "tollgate-init" {"protocolVersion":"2025-11-25"}`,
		`notifications/initialized s-1 2025-06-18  `,
		`tools/list s-1 2025-06-18 "p-0" {"_meta":{"k":1}}`,
		`tools/list s-1 2025-06-18 "p-1" {"cursor":"c1","_meta":{"k":1}}`,
		`DELETE s-1`,
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
}

// TestListen: the session's GET stream carries its id and version and asks for an event
// stream; events that are not JSON-RPC are skipped; a server without a GET stream (405) is a
// FaultHTTP error.
func TestListen(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(HeaderSessionID) != "s-1" {
			http.Error(w, "no GET stream here", http.StatusMethodNotAllowed)
			return
		}
		if r.Method != http.MethodGet || r.Header.Get("Accept") != "text/event-stream" || r.Header.Get(HeaderProtocolVersion) != "2025-11-25" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, ": hello\n\ndata: not json\n\ndata:\n\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"elicitation/create\",\"params\":{}}\n\n")
	}))
	defer srv.Close()
	c, err := New(srv.URL+"/mcp", Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := &Session{ID: "s-1", Version: "2025-11-25"}
	st, err := c.Listen(context.Background(), s.Header())
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.Next()
	if err != nil || m.Method != "elicitation/create" || string(m.ID) != "7" {
		t.Fatalf("Next = %v, %v; want the elicitation request", m, err)
	}
	if _, err := st.Next(); err != io.EOF {
		t.Fatalf("after the last event: %v, want io.EOF", err)
	}
	st.Close()

	_, err = c.Listen(context.Background(), (&Session{ID: "other"}).Header())
	if ue := AsError(err); ue.Fault != FaultHTTP || ue.Status != http.StatusMethodNotAllowed {
		t.Fatalf("Listen without a GET stream: %v", err)
	}
}
