package e2e

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// buildBinary compiles cmd/tollgate once per test binary run.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tollgate")
	cmd := exec.Command("go", "build", "-o", bin, "../../cmd/tollgate")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startDemoBinary starts `bin demo` with env, stopped by SIGTERM when ctx ends; its stdout is
// read through the pipe, its stderr collected (read it once the process has ended).
func startDemoBinary(t *testing.T, ctx context.Context, bin string, env []string) (*exec.Cmd, io.ReadCloser, *bytes.Buffer) {
	t.Helper()
	demo := exec.CommandContext(ctx, bin, "demo")
	demo.Env = env
	demo.Cancel = func() error { return demo.Process.Signal(syscall.SIGTERM) }
	demo.WaitDelay = 10 * time.Second
	stdout, err := demo.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	demo.Stderr = &stderr
	if err := demo.Start(); err != nil {
		t.Fatal(err)
	}
	return demo, stdout, &stderr
}

// TestDemoAndCLI does what a new user does: run `tollgate demo`, make an approval-gated call,
// and decide it with `tollgate approvals`.
func TestDemoAndCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	mcpAddr, adminAddr := freeAddr(t), freeAddr(t)
	env := append(os.Environ(), "TOLLGATE_LISTEN="+mcpAddr, "TOLLGATE_ADMIN_LISTEN="+adminAddr,
		"TOLLGATE_ADMIN_TOKEN=cli-admin-token-0123", "TOLLGATE_ADMIN_URL=http://"+adminAddr, "TOLLGATE_LOG_LEVEL=warn")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	demo, stdout, stderr := startDemoBinary(t, ctx, bin, env)
	banner := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		var b strings.Builder
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "Stop with Ctrl-C") {
				banner <- b.String()
			}
		}
	}()
	select {
	case out := <-banner:
		if !strings.Contains(out, "http://"+mcpAddr+"/mcp") || !strings.Contains(out, "cli-admin-token-0123") {
			t.Fatalf("banner lacks the MCP URL or token:\n%s", out)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("demo did not start:\n%s", stderr.String())
	}
	g := &testkit.Gateway{MCP: "http://" + mcpAddr + "/mcp", Admin: "http://" + adminAddr}
	g.WaitReady(t)

	c := g.NewClient(t)
	tid := c.CallTask(1, "delete_user", `{"user_id":"u-004","password":"p"}`)

	cli := func(args ...string) (string, int) {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}
	if out, code := cli("approvals", "list"); code != 0 || !strings.Contains(out, tid) || !strings.Contains(out, "delete_user") {
		t.Fatalf("approvals list (%d):\n%s", code, out)
	}
	if out, code := cli("approvals", "show", tid, "--json"); code != 0 || !strings.Contains(out, `"taskId"`) {
		t.Fatalf("approvals show --json (%d):\n%s", code, out)
	}
	if out, code := cli("approvals", "approve", tid, "--reason", "verified"); code != 0 {
		t.Fatalf("approvals approve (%d):\n%s", code, out)
	}
	if out, code := cli("approvals", "reject", tid, "--reason", "late"); code == 0 || !strings.Contains(strings.ToLower(out), "approved") {
		t.Errorf("second decision should fail and name the standing one (%d):\n%s", code, out)
	}
	m := c.TaskRPC(2, "tasks/result", tid).Message(t)
	if m["result"] == nil {
		t.Fatalf("tasks/result after CLI approval: %v", m)
	}
	if out, code := cli("version"); code != 0 || !strings.HasPrefix(out, "tollgate ") {
		t.Errorf("version: %q", out)
	}
	cancel()
	_ = demo.Wait()
}

// TestValidateCommand: exit 0 for a valid config, 1 with every problem and its path otherwise.
func TestValidateCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	out, err := exec.Command(bin, "validate", "--config", "../../config/demo.yaml").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "valid") {
		t.Fatalf("demo.yaml: %v\n%s", err, out)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("schema: 1\nsources: [{id: u, kind: mcp, url: \"http://127.0.0.1:1/mcp\"}]\ngovernance:\n  rules:\n    - {match: \"[oops\", action: approve}\n    - {match: x, action: explode}\ncedar: {policies: [missing.cedar]}\n"), 0o644)
	out, err = exec.Command(bin, "validate", "--config", bad).CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		t.Fatalf("bad config exit: %v\n%s", err, out)
	}
	for _, want := range []string{"governance.rules[0].match", "governance.rules[1].action", "cedar.policies[0]"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("validate output lacks %q:\n%s", want, out)
		}
	}
	// An approver token shorter than 16 bytes is refused, naming the approver, never the value.
	short := filepath.Join(dir, "short.yaml")
	os.WriteFile(short, []byte("schema: 1\nsources: [{id: u, kind: mcp, url: \"http://127.0.0.1:1/mcp\"}]\napprovers: [{name: alice, token_env: ALICE_TOKEN}]\n"), 0o644)
	cmd := exec.Command(bin, "validate", "--config", short)
	cmd.Env = append(os.Environ(), "ALICE_TOKEN=abc123", "TOLLGATE_ADMIN_TOKEN=")
	out, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `approvers[0].token_env: token of approver "alice" is 6 bytes; at least 16`) || strings.Contains(string(out), "abc123") {
		t.Errorf("short token: %v\n%s", err, out)
	}
	// A Cedar syntax error is reported with file and position.
	os.WriteFile(filepath.Join(dir, "p.cedar"), []byte("permit (principal, action, resource) when { oops };\nforbid (principal"), 0o644)
	cedarCfg := filepath.Join(dir, "cedar.yaml")
	os.WriteFile(cedarCfg, []byte("schema: 1\nsources: [{id: u, kind: mcp, url: \"http://127.0.0.1:1/mcp\"}]\ngovernance:\n  rules: [{match: \"t_*\", action: policy, policy_id: p}]\ncedar: {policies: [p.cedar]}\n"), 0o644)
	out, err = exec.Command(bin, "validate", "--config", cedarCfg).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "p.cedar:") {
		t.Errorf("cedar error without file position: %v\n%s", err, out)
	}
}
