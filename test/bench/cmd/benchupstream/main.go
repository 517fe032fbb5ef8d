// Command benchupstream is the MCP server the load harness measures against: an mcp-go
// streamable-HTTP server in its own process, as an upstream is in production; with -stdio the
// same server speaks over stdin/stdout instead (server.ServeStdio), for the harness's
// "tollgate (stdio)" target, where Tollgate starts it (sources[0].command).
//
// Tools: echo (small result), approve_action and transfer_funds (small results behind
// Tollgate's approve and policy rules), big (a 1 MiB text result sent as an SSE reply) and
// tool_0000…tool_NNNN (padding for the tools/list scenario).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/tollgate-mcp/tollgate/test/bench/benchserve"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to serve /mcp on")
	extra := flag.Int("tools", 1000, "number of padding tools tool_0000… for the tools/list scenario")
	bigBytes := flag.Int("big-bytes", 1<<20, "size of the text returned by the big tool")
	stdio := flag.Bool("stdio", false, "serve over stdin/stdout instead of HTTP")
	flag.Parse()

	srv := newServer(*extra, *bigBytes)
	if *stdio {
		if err := server.ServeStdio(srv); err != nil {
			log.Fatalf("benchupstream: %v", err)
		}
		return
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", server.NewStreamableHTTPServer(srv))
	benchserve.Run("benchupstream", *listen, mux)
}

func newServer(extra, bigBytes int) *server.MCPServer {
	s := server.NewMCPServer("tollgate-bench-upstream", "1.0.0", server.WithToolCapabilities(false))

	small := func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok " + req.GetString("text", "")), nil
	}
	s.AddTool(mcp.NewTool("echo", mcp.WithDescription("Return a short text."),
		mcp.WithString("text", mcp.Description("text to echo"))), small)
	s.AddTool(mcp.NewTool("approve_action", mcp.WithDescription("A call Tollgate holds for approval."),
		mcp.WithString("text", mcp.Description("anything"))), small)
	s.AddTool(mcp.NewTool("transfer_funds", mcp.WithDescription("A call Cedar decides."),
		mcp.WithString("from_account", mcp.Required()), mcp.WithString("to_account", mcp.Required()),
		mcp.WithNumber("amount", mcp.Required()), mcp.WithString("currency", mcp.Required())),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("transferred"), nil
		})

	payload := strings.Repeat("0123456789abcdef", bigBytes/16+1)[:bigBytes]
	s.AddTool(mcp.NewTool("big", mcp.WithDescription("Return a large text result as an SSE reply.")),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			// mcp-go answers with JSON unless the server sends a notification while the call
			// runs; a log message switches this reply (and the session) to SSE.
			if ms := server.ServerFromContext(ctx); ms != nil {
				_ = ms.SendNotificationToClient(ctx, "notifications/message",
					map[string]any{"level": "info", "data": "sending big result"})
			}
			return mcp.NewToolResultText(payload), nil
		})

	for i := range extra {
		name := fmt.Sprintf("tool_%04d", i)
		s.AddTool(mcp.NewTool(name,
			mcp.WithDescription("Padding tool "+name+" for the tools/list rewrite benchmark."),
			mcp.WithString("query", mcp.Required(), mcp.Description("what to look up")),
			mcp.WithNumber("limit", mcp.Description("maximum results"))), small)
	}
	return s
}
