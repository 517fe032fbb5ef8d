package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// gosdk is the official go-sdk v1.8.0 stateful fixture (test/fixture/gosdk, a module of its
// own) running as a process on loopback. go-sdk refuses a POST without the transport's
// Accept header with HTTP 400, an answer to its own elicitation included.
type gosdk struct {
	url string // http://127.0.0.1:PORT/mcp
}

func startGoSDK(t *testing.T) *gosdk {
	t.Helper()
	return &gosdk{url: startFixtureModule(t, "gosdk", "go-sdk v1.8.0")}
}

// gosdkStats are the fixture's counts: how often each tool ran, and the HTTP statuses its
// POSTs were answered with.
type gosdkStats struct {
	Calls map[string]int `json:"calls"`
	Posts map[string]int `json:"posts"`
}

func (f *gosdk) stats(t *testing.T) gosdkStats {
	t.Helper()
	resp, err := testkit.HTTPClient.Get(strings.TrimSuffix(f.url, "/mcp") + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s gosdkStats
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// startTaskClient connects an mcp-go 2025-11-25 client that declares elicitation and
// sampling (an upstream only asks what the client declared).
func startTaskClient(t *testing.T, url string, opts ...client.ClientOption) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: "2025-11-25", ClientInfo: mcp.Implementation{Name: "e2e-gosdk", Version: "1"},
		Capabilities: mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{}, Sampling: &mcp.SamplingCapability{}},
	}}); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAnswersToUpstreamCarryTransportHeaders: Tollgate's own answer to a stateful go-sdk
// upstream's server→client request during an approved call it executes carries what the
// streamable HTTP transport requires (Accept, Content-Type, protocol version, session). It
// used to go without Accept: go-sdk refused it with HTTP 400, the tool never got an answer,
// and the task waited for tasks.execution_timeout instead of ending at once.
func TestAnswersToUpstreamCarryTransportHeaders(t *testing.T) {
	up := startGoSDK(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(up.url, `governance:
  defaults: {action: forward}
  rules:
    - {match: "confirm*", action: approve}
approval:
  default: {timeout: 10m, on_timeout: deny}
approvers:
  - {name: alice, token_env: ALICE_TOKEN}
tasks:
  execution_timeout: 2m
`), approverEnv, nil)
	g.WaitReady(t)
	c := startTaskClient(t, g.MCP)

	res, rpcErr := callWithTask(t, c, "confirm", map[string]any{"what": "drop the table"}, 600000)
	if rpcErr != nil {
		t.Fatal(rpcErr)
	}
	tid := taskIDOf(t, res)
	decide(t, g, tid, "approve")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	result, err := c.TaskResult(ctx, mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: tid}})
	if err != nil {
		t.Fatalf("tasks/result: %v (the upstream must get Tollgate's answer and the task end at once)", err)
	}
	if text := resultText(&mcp.CallToolResult{Content: result.Content}); !strings.HasPrefix(text, "no answer:") {
		t.Fatalf("result %q, want the tool's own outcome of the refused question", text)
	}
	st := up.stats(t)
	if st.Calls["confirm"] != 1 {
		t.Errorf("confirm ran %d times, want 1", st.Calls["confirm"])
	}
	if st.Posts["400"] != 0 {
		t.Errorf("the upstream refused %d POSTs with HTTP 400 (%v): a message Tollgate sent lacks a transport header", st.Posts["400"], st.Posts)
	}
}
