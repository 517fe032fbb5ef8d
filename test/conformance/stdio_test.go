//go:build unix

package conformance

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestConformanceStdio runs the 0.1.16 suite against @modelcontextprotocol/server-everything
// over streamable HTTP directly, then against Tollgate running the same server itself over
// stdio (sources[0].command, forward everything): a scenario that passes directly must pass
// through Tollgate's stdio transport too. mcp-go's conformance server (the other comparison)
// has no stdio mode; server-everything serves both.
func TestConformanceStdio(t *testing.T) {
	root, node, cli := needSuite(t, envCLI, "@modelcontextprotocol/conformance")
	mods := os.Getenv("TOLLGATE_NPM_MODULES")
	if mods == "" {
		mods = filepath.Join(root, ".tools", "npm", "node_modules")
	}
	everything := filepath.Join(mods, "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(everything); err != nil {
		if os.Getenv(envMode) == "require" {
			t.Fatalf("server-everything missing (run scripts/ensure-deps.sh): %v", err)
		}
		t.Skipf("SKIPPING: server-everything missing (run scripts/ensure-deps.sh): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 14*time.Minute)
	defer cancel()
	logDir := t.TempDir()
	tollgateBin := buildTollgate(ctx, t, root)

	// Directly: server-everything's streamable HTTP mode on a loopback port.
	upAddr := freeAddr(t)
	_, port, _ := strings.Cut(upAddr, ":")
	upExited := startProc(t, logDir, "everything-http", root, []string{"PORT=" + port}, node,
		"--import", filepath.Join(root, "test", "interop", "loopback.mjs"), everything, "streamableHttp")
	waitListening(ctx, t, upAddr, upExited, logDir, "everything-http")
	upstreamURL := "http://" + upAddr + "/mcp"
	suite := &suiteRunner{node: node, cli: cli, root: root, outDir: filepath.Join(logDir, "results"), suite: os.Getenv(envSuite)}
	direct := suite.run(ctx, t, "direct", upstreamURL, "")
	if len(direct) == 0 {
		t.Fatalf("direct run produced no scenario results; see %s", logDir)
	}
	for name, r := range direct {
		if r.outcome == fail || r.outcome == missing {
			direct[name] = suite.retry(ctx, t, "direct", upstreamURL, name, r)
		}
	}

	// Through Tollgate: the same server, run by Tollgate over stdio.
	cfg := filepath.Join(logDir, "tollgate-stdio.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`schema: 1
sources:
  - id: everything
    kind: mcp
    command: %q
    args: [%q, stdio]
governance:
  defaults: {action: forward}
`, node, everything)), 0o600); err != nil {
		t.Fatal(err)
	}
	listen, admin := freeAddr(t), freeAddr(t)
	exited := startProc(t, logDir, "tollgate", root, []string{
		"TOLLGATE_LISTEN=" + listen, "TOLLGATE_ADMIN_LISTEN=" + admin, "TOLLGATE_DATA_DIR=" + filepath.Join(logDir, "data"),
	}, tollgateBin, "run", "--config", cfg)
	waitReady(ctx, t, "http://"+admin+"/readyz", exited, logDir, "tollgate")
	suite.compare(ctx, t, direct, "http://"+listen+"/mcp", nil, "server-everything (stdio through Tollgate, streamable HTTP directly)",
		"last-run-stdio.md", logDir)
}

// waitListening waits until addr accepts a TCP connection; it fails fast when the child exits.
func waitListening(ctx context.Context, t *testing.T, addr string, exited <-chan struct{}, logDir, name string) {
	t.Helper()
	rctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if c, err := (&net.Dialer{}).DialContext(rctx, "tcp", addr); err == nil {
			c.Close()
			return
		}
		select {
		case <-exited:
			dumpLog(t, logDir, name)
			t.Fatalf("%s exited before listening on %s", name, addr)
		case <-rctx.Done():
			dumpLog(t, logDir, name)
			t.Fatalf("%s not listening on %s within %s", name, addr, readyTimeout)
		case <-tick.C:
		}
	}
}
