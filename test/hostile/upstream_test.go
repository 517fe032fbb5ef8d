package hostile

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// transferArgs is how a typed Go upstream reads transfer_funds: encoding/json matches member
// names to these fields case-insensitively (Unicode simple folding) and the last match wins.
type transferArgs struct {
	FromAccount string `json:"from_account"`
	ToAccount   string `json:"to_account"`
	Amount      int64  `json:"amount"`
	Currency    string `json:"currency"`
}

type echoArgs struct {
	Text string `json:"text"`
}

// typedUpstream is a real mcp-go server whose tools bind their arguments into Go structs
// (mcp.NewTypedToolHandler). It records every HTTP request body it receives and every amount
// transfer_funds executed, so a test can prove what ran — or that nothing did.
type typedUpstream struct {
	URL string

	mu        sync.Mutex
	bodies    [][]byte
	transfers []int64
}

func startTypedUpstream(t testing.TB) *typedUpstream {
	t.Helper()
	u := &typedUpstream{}
	s := server.NewMCPServer("typed-upstream", "1.0.0", server.WithToolCapabilities(true))
	s.AddTool(mcp.NewTool("transfer_funds", mcp.WithNumber("amount"), mcp.WithString("currency"),
		mcp.WithString("from_account"), mcp.WithString("to_account")),
		mcp.NewTypedToolHandler(func(_ context.Context, _ mcp.CallToolRequest, a transferArgs) (*mcp.CallToolResult, error) {
			u.mu.Lock()
			u.transfers = append(u.transfers, a.Amount)
			u.mu.Unlock()
			return mcp.NewToolResultText(fmt.Sprintf("transferred %d %s", a.Amount, a.Currency)), nil
		}))
	for _, name := range []string{"echo", "delete_record", "drop_table"} {
		s.AddTool(mcp.NewTool(name, mcp.WithString("text")),
			mcp.NewTypedToolHandler(func(_ context.Context, _ mcp.CallToolRequest, a echoArgs) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText(name + ": " + a.Text), nil
			}))
	}
	mcpHandler := server.NewStreamableHTTPServer(s)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.bodies = append(u.bodies, b)
		u.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		mcpHandler.ServeHTTP(w, r)
	})}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	u.URL = "http://" + ln.Addr().String() + "/mcp"
	return u
}

// Transfers returns the amounts transfer_funds executed, in order.
func (u *typedUpstream) Transfers() []int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]int64(nil), u.transfers...)
}

// Saw reports whether any request body the upstream received contains marker.
func (u *typedUpstream) Saw(marker []byte) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, b := range u.bodies {
		if bytes.Contains(b, marker) {
			return true
		}
	}
	return false
}
