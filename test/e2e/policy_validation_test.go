package e2e

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// capPolicy denies transfers above 1000 and permits the rest.
const capPolicy = `// transfers above 1000 are refused
@id("cap") forbid (principal, action, resource) when { resource.arguments has amount && resource.arguments.amount > 1000 };
@id("rest") permit (principal, action, resource);
`

const validationRules = `governance:
  defaults: {action: forward}
  rules:
    - {match: "transfer_*", action: policy, policy_id: transfers}
cedar:
  validation: strict
  policies: [p.cedar]
`

// readyBody is /readyz's text.
func readyBody(t *testing.T, g *testkit.Gateway) string {
	t.Helper()
	_, body := readyz(t, g)
	return body
}

func transfer(c *testkit.RPC, id, amount string) (float64, string, string) {
	m := c.Post(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"transfer_funds","arguments":{"from_account":"acc-payroll","to_account":"acc-savings","amount":` + amount + `,"currency":"USD"}}}`).Message(c.T)
	code, name := testkit.ErrorOf(m)
	msg, _ := testkit.Dig(m, "error", "message").(string)
	return code, name, msg
}

// TestPolicyValidationStrictRefusesReload: the real binary with cedar.validation: strict
// checks its Cedar policies against the demo upstream's tools; a reload (SIGHUP) whose policy
// reads an argument no tool has is refused with file:line in the log and counted as a failed
// reload, and the old policy keeps deciding.
func TestPolicyValidationStrictRefusesReload(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	d, upURL := testkit.StartDemo(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tollgate.yaml")
	policyPath := filepath.Join(dir, "p.cedar")
	for p, s := range map[string]string{cfg: testkit.BasicConfig(upURL, validationRules), policyPath: capPolicy} {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mcpAddr, adminAddr := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--config", cfg)
	cmd.Env = append(os.Environ(), "TOLLGATE_LISTEN="+mcpAddr, "TOLLGATE_ADMIN_LISTEN="+adminAddr,
		"TOLLGATE_ADMIN_TOKEN="+testkit.AdminToken, "TOLLGATE_DATA_DIR="+filepath.Join(dir, "data"))
	logs := &testkit.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	g := &testkit.Gateway{MCP: "http://" + mcpAddr + "/mcp", Admin: "http://" + adminAddr}
	g.WaitReady(t)
	waitFor(t, "the first check against the upstream's tools", func() bool {
		return strings.Contains(logs.String(), "cedar policies match the upstream's tools")
	})
	c := g.NewClient(t)
	if code, _, _ := transfer(c, "1", "10"); code != 0 {
		t.Fatalf("small transfer refused: %v", code)
	}
	if code, name, _ := transfer(c, "2", "5000"); code != -32003 || name != "PolicyDenied" {
		t.Fatalf("large transfer: %v %s", code, name)
	}

	// "amout" is an argument no tool has: without the check this loads and never matches, and
	// every large transfer would go through.
	broken := strings.Replace(capPolicy, "resource.arguments has amount && resource.arguments.amount > 1000", "resource.arguments.amout > 1000", 1)
	if err := os.WriteFile(policyPath, []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reload refused", func() bool { return strings.Contains(logs.String(), "config reload failed") })
	log := logs.String()
	if !strings.Contains(log, "p.cedar:2:1: does not match schema") || !strings.Contains(log, "amout") {
		t.Errorf("the refusal does not name p.cedar:2:1 and the argument:\n%s", log)
	}
	if v := metricValue(t, g, `tollgate_config_reloads_total{result="failure"}`); v != 1 {
		t.Errorf("failed reloads = %v, want 1", v)
	}
	if v := metricValue(t, g, "tollgate_policy_validation_errors"); v != 0 {
		t.Errorf("tollgate_policy_validation_errors = %v for the policies still loaded, want 0", v)
	}
	// The old policy still decides.
	if code, name, _ := transfer(c, "3", "5000"); code != -32003 || name != "PolicyDenied" {
		t.Errorf("large transfer after the refused reload: %v %s", code, name)
	}
	if n := len(d.Transfers()); n != 1 {
		t.Errorf("upstream transfers = %d, want 1 (the small one)", n)
	}
	if r := readyBody(t, g); strings.Contains(r, "cedar") {
		t.Errorf("/readyz: %s", r)
	}
	// A fixed policy is accepted.
	if err := os.WriteFile(policyPath, []byte(strings.Replace(capPolicy, "> 1000", "> 2000", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the fixed policy applied", func() bool {
		code, _, _ := transfer(c, "4", "1500")
		return code == 0
	})
}

// changingUpstream is an mcp-go server whose transfer_funds can rename its amount argument
// while Tollgate is connected (AddTool sends notifications/tools/list_changed).
func startChangingUpstream(t *testing.T) (*server.MCPServer, string) {
	t.Helper()
	s := server.NewMCPServer("changing", "1.0.0", server.WithToolCapabilities(true))
	setTransfer(s, "amount")
	hs := &http.Server{Handler: server.NewStreamableHTTPServer(s)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return s, "http://" + ln.Addr().String() + "/mcp"
}

func setTransfer(s *server.MCPServer, amountArg string) {
	s.DeleteTools("transfer_funds")
	s.AddTool(mcp.NewTool("transfer_funds", mcp.WithNumber(amountArg), mcp.WithString("to_account"), mcp.WithString("from_account"), mcp.WithString("currency")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("moved"), nil
		})
}

// TestPolicyValidationToolsChange: when the upstream renames an argument a loaded forbid reads
// (list_changed), strict validation finds the policy no longer matches: /readyz says degraded
// with file:line, the metric counts it, and every call Cedar decides is denied — the forbid
// would otherwise never match again (fail open). When the tool comes back, Cedar decides again.
func TestPolicyValidationToolsChange(t *testing.T) {
	up, upURL := startChangingUpstream(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, validationRules), nil, map[string]string{"p.cedar": capPolicy})
	g.WaitReady(t)
	c := g.NewClient(t)
	waitFor(t, "the first check", func() bool { return strings.Contains(g.Logs.String(), "cedar policies match the upstream's tools") })
	if code, _, _ := transfer(c, "1", "10"); code != 0 {
		t.Fatalf("small transfer refused: %v", code)
	}

	// The upstream's list_changed reaches Tollgate on a client's GET stream.
	if status, _ := testkit.OpenStream(t, g.MCP, c.Session); status != http.StatusOK {
		t.Fatalf("GET stream: %d", status)
	}
	// Each change sends list_changed; changing again until it shows keeps a notification sent
	// before the stream reached the upstream from stalling the test (setting it is idempotent).
	waitFor(t, "the mismatch", func() bool {
		setTransfer(up, "value") // the forbid's "amount" is gone
		return strings.Contains(readyBody(t, g), "degraded: cedar policies do not match")
	})
	if r := readyBody(t, g); !strings.Contains(r, "p.cedar:2:") || !strings.Contains(r, `"amount"`) || !strings.Contains(r, "calls Cedar decides are denied") {
		t.Errorf("/readyz: %s", r)
	}
	if v := metricValue(t, g, "tollgate_policy_validation_errors"); v < 1 {
		t.Errorf("tollgate_policy_validation_errors = %v", v)
	}
	if code, name, msg := transfer(c, "2", "10"); code != -32003 || name != "PolicyDenied" || !strings.Contains(msg, "policies do not match the upstream's tools") {
		t.Errorf("transfer under mismatched policies: %v %s %q", code, name, msg)
	}
	if !strings.Contains(g.Logs.String(), "calls Cedar decides are denied until they do") {
		t.Errorf("no ERROR log of the mismatch")
	}

	waitFor(t, "the match again", func() bool {
		setTransfer(up, "amount")
		return !strings.Contains(readyBody(t, g), "cedar")
	})
	if code, _, _ := transfer(c, "3", "10"); code != 0 {
		t.Errorf("small transfer after the tools came back: %v", code)
	}
}
