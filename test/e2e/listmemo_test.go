package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// TestToolsListMemoEndsWithListChanged: a repeated, unchanged tools/list is answered from
// Tollgate's memo (the rewrite, which logs each reserved-name tool it hides, does not run again),
// byte for byte the same answer but for the id; the upstream's notifications/tools/list_changed
// on the session's stream makes the next listing a full rewrite.
func TestToolsListMemoEndsWithListChanged(t *testing.T) {
	trigger := make(chan struct{})
	up := testkit.NewRawUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		switch r.Method {
		case http.MethodPost:
			if handshake(w, body) {
				return
			}
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			_ = json.Unmarshal(body, &m)
			if m.Method != "tools/list" || m.ID == nil {
				w.WriteHeader(http.StatusAccepted)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"tollgate_evil","inputSchema":{"type":"object"}},{"name":"read_a","inputSchema":{"type":"object"}}]}}`, m.ID)
		case http.MethodGet:
			w.Header().Set("Content-Type", "text/event-stream")
			w.(http.Flusher).Flush()
			select {
			case <-trigger:
			case <-r.Context().Done():
				return
			}
			// The marker after list_changed: once the client has it, Tollgate has handled
			// list_changed (one stream, relayed in order).
			fmt.Fprint(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n"+
				"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"marker\"}}\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case http.MethodDelete:
			w.WriteHeader(http.StatusOK)
		}
	})
	g := testkit.StartGateway(t, testkit.BasicConfig(up.URL(), ""), nil, nil)
	c := g.NewClient(t)
	rewrites := func() int { return strings.Count(g.Logs.String(), "the tollgate_ prefix is reserved") }
	list := func(id int) []byte {
		t.Helper()
		b := c.Post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, id)).ResponseBytes(t)
		if bytes.Contains(b, []byte("tollgate_evil")) || !bytes.Contains(b, []byte(`"read_a"`)) {
			t.Fatalf("tools/list answer: %s", b)
		}
		return b
	}

	first := list(10)
	n := rewrites()
	if n == 0 {
		t.Fatal("the first listing was not rewritten (no hidden-tool warning)")
	}
	again := list(11)
	if rewrites() != n {
		t.Fatal("an unchanged listing was rewritten again instead of answered from the memo")
	}
	if !bytes.Equal(again, bytes.Replace(first, []byte(`"id":10`), []byte(`"id":11`), 1)) {
		t.Fatalf("memo answer\n%s\ndiffers from the rewrite\n%s", again, first)
	}

	status, lines := testkit.OpenStream(t, g.MCP, c.Session)
	if status != http.StatusOK {
		t.Fatalf("GET stream: HTTP %d", status)
	}
	close(trigger)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for marker := false; !marker; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("stream ended before the marker")
			}
			marker = strings.Contains(l, "marker")
		case <-ctx.Done():
			t.Fatal("no marker on the stream")
		}
	}
	if after := list(12); !bytes.Equal(after, bytes.Replace(first, []byte(`"id":10`), []byte(`"id":12`), 1)) {
		t.Fatalf("listing after list_changed: %s", after)
	}
	if rewrites() != n+1 {
		t.Fatalf("after list_changed the listing was not rewritten afresh (%d rewrites, want %d)", rewrites(), n+1)
	}
}
