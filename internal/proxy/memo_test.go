package proxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/intercept"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/session"
	"github.com/tollgate-mcp/tollgate/internal/sse"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

// TestMemoReplyIsByteIdentical: a reply answered from a Forward's memo (no parse, no check, no
// Transform) is byte for byte what the slow path sends for it, with the client's id, over JSON
// and SSE; a changed reply, or one whose id is not the request's, is never answered from it.
func TestMemoReplyIsByteIdentical(t *testing.T) {
	for _, asSSE := range []bool{false, true} {
		t.Run(fmt.Sprintf("sse=%v", asSSE), func(t *testing.T) {
			var mu sync.Mutex
			result := `{"tools":[{"name":"a","inputSchema":{"type":"object"}}],"nextCursor":null}`
			idOverride := ""
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				m, err := jsonrpc.Parse(body)
				if err != nil {
					w.WriteHeader(400)
					return
				}
				mu.Lock()
				id := string(m.ID)
				if idOverride != "" {
					id = idOverride
				}
				msg := `{"jsonrpc":"2.0","id":` + id + `, "result":` + result + `}`
				mu.Unlock()
				if asSSE {
					w.Header().Set("Content-Type", "text/event-stream")
					io.WriteString(w, "id: e1\ndata: "+msg+"\n\n")
					return
				}
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, msg)
			}))
			defer up.Close()

			var memo jsonrpc.ReplyMemo
			var transforms atomic.Int32
			rewrite := func(resp *jsonrpc.Message) []byte {
				out, err := jsonrpc.Replace(resp.Result, "rewritten", []byte(`true`))
				if err != nil {
					t.Errorf("transform: %v", err)
					return nil
				}
				return resp.WithResult(out)
			}
			transform := func(_ *intercept.Exchange, resp *jsonrpc.Message) []byte {
				transforms.Add(1)
				return rewrite(resp)
			}
			router := intercept.NewRouter()
			router.Handle("tools/list", func(context.Context, *intercept.Exchange) intercept.Result {
				return intercept.Result{Forward: &intercept.Forward{Transform: transform,
					Memo: &intercept.MemoSlot{Memo: &memo, Gen: memo.Gen(), Tag: "t"}}}
			})
			uc, err := upstream.New(up.URL, upstream.Options{})
			if err != nil {
				t.Fatal(err)
			}
			front := httptest.NewServer(New(Options{Upstream: uc, Sessions: session.NewRegistry(0, nil), Router: router, AllowedHosts: []string{"*"}}))
			defer front.Close()
			ctx, cancel := context.WithTimeout(context.Background(), bound)
			defer cancel()

			// want is the slow path's answer: the upstream's reply, checked, with the client's
			// id, through the Transform.
			want := func(id string) []byte {
				mu.Lock()
				defer mu.Unlock()
				m, err := jsonrpc.ParseChecked([]byte(`{"jsonrpc":"2.0","id":` + id + `, "result":` + result + `}`))
				if err != nil {
					t.Fatal(err)
				}
				return rewrite(m)
			}
			list := func(id string) []byte {
				resp := postJSON(ctx, t, front.URL, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/list"}`, nil)
				defer resp.Body.Close()
				if !asSSE {
					b, _ := io.ReadAll(resp.Body)
					return b
				}
				rd := sse.NewReader(resp.Body, 0)
				defer rd.Close()
				ev, err := rd.Next()
				if err != nil {
					t.Fatalf("reading the event: %v", err)
				}
				return ev.Data
			}
			for i, id := range []string{`1`, `"a"`, `2.5`, `"\u0062"`, `9007199254740993`} {
				exp := want(id)
				got := list(id)
				if !bytes.Equal(got, exp) {
					t.Fatalf("request %d (id %s): got\n%s\nwant\n%s", i, id, got, exp)
				}
			}
			if n := transforms.Load(); n != 1 {
				t.Fatalf("the Transform ran %d times for one reply five times over; want once (the rest from the memo)", n)
			}
			transforms.Store(0)

			// A changed reply is a miss, and is remembered in turn.
			mu.Lock()
			result = strings.Replace(result, `"a"`, `"b"`, 1)
			mu.Unlock()
			for _, id := range []string{`3`, `4`} {
				if got, exp := list(id), want(id); !bytes.Equal(got, exp) {
					t.Fatalf("changed list: got %s, want %s", got, exp)
				}
			}
			if n := transforms.Load(); n != 1 {
				t.Fatalf("changed list: Transform ran %d times, want 1", n)
			}

			// A remembered reply carrying another request's id is still a fault.
			mu.Lock()
			idOverride = `77`
			mu.Unlock()
			got := list(`5`)
			if !bytes.Contains(got, []byte(`"UpstreamInvalidReply"`)) {
				t.Fatalf("a reply for another id was relayed: %s", got)
			}
		})
	}
}
