//go:build unix

package interop

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// readmeRunLine is the `tollgate run … -- CMD` line of README.md's "## Govern a stdio server".
func readmeRunLine(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n## Govern a stdio server\n")
	if i < 0 {
		t.Fatal(`README.md has no "## Govern a stdio server" section`)
	}
	s = s[i+1:]
	if j := strings.Index(s[3:], "\n## "); j >= 0 {
		s = s[:j+3]
	}
	_, block, ok := strings.Cut(s, "```sh\n")
	block, _, _ = strings.Cut(block, "```")
	if !ok || strings.Count(strings.TrimSpace(block), "\n") != 0 {
		t.Fatalf("the section's sh block must be one command line: %q", block)
	}
	// Words and 'single-quoted' words; the line has nothing else.
	var words []string
	for _, m := range regexp.MustCompile(`'[^']*'|\S+`).FindAllString(strings.TrimSpace(block), -1) {
		words = append(words, strings.Trim(m, "'"))
	}
	return words
}

// TestReadmeStdioRun runs the README's `tollgate run --approve … -- npx -y
// @modelcontextprotocol/server-filesystem DIR` as written, except that the server is the
// pinned server-filesystem from .tools run by Node 22 (npx would fetch it) on a temporary
// directory, and the listen ports are free ones: the banner names the MCP endpoint and a
// console token, a forwarded call works, a write_file call is held (the held line names its
// task), approved with the printed token, and writes the file.
func TestReadmeStdioRun(t *testing.T) {
	tc := needNode(t)
	needFilesystem(t, tc)
	words := readmeRunLine(t)
	dash := slices.Index(words, "--")
	if len(words) < 3 || words[0] != "tollgate" || words[1] != "run" || dash < 0 ||
		!slices.Equal(words[dash+1:len(words)-1], []string{"npx", "-y", "@modelcontextprotocol/server-filesystem"}) {
		t.Fatalf("README line is not `tollgate run … -- npx -y @modelcontextprotocol/server-filesystem DIR`: %q", words)
	}
	if !slices.Contains(words[2:dash], "write_*") {
		t.Fatalf("README line does not hold write_* for approval: %q", words)
	}
	data, _ := filepath.EvalSymlinks(t.TempDir())
	args := append(append([]string{"run"}, words[2:dash+1]...), tc.node, tc.filesystem, data)

	bin := filepath.Join(t.TempDir(), "tollgate")
	bctx, bcancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer bcancel()
	if out, err := exec.CommandContext(bctx, "go", "build", "-o", bin, "../../cmd/tollgate").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "TOLLGATE_LISTEN="+freeAddr(t), "TOLLGATE_ADMIN_LISTEN="+freeAddr(t),
		"TOLLGATE_ADMIN_TOKEN=", "TOLLGATE_DATA_DIR="+t.TempDir(), "TOLLGATE_LOG_LEVEL=warn")
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // after the client's own cleanup (it ends its session first)
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("tollgate stderr:\n%s", tail(stderr.String(), 4<<10))
		}
	})
	banner, held := make(chan string, 1), make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(stdout)
		var b strings.Builder
		for sc.Scan() {
			l := sc.Text()
			b.WriteString(l + "\n")
			if strings.HasPrefix(l, "Stop with Ctrl-C") {
				banner <- b.String()
			}
			if strings.HasPrefix(l, "held: ") {
				held <- l
			}
		}
	}()
	var out string
	select {
	case out = <-banner:
	case <-ctx.Done():
		t.Fatal("no banner")
	}
	mcpURL := regexp.MustCompile(`MCP endpoint\s+(\S+)`).FindStringSubmatch(out)
	console := regexp.MustCompile(`Approval console\s+(http://\S+)/approvals`).FindStringSubmatch(out)
	token := regexp.MustCompile(`Admin token\s+([0-9a-f]{32})`).FindStringSubmatch(out)
	if mcpURL == nil || console == nil || token == nil || !strings.Contains(out, "write_* approve") {
		t.Fatalf("banner:\n%s", out)
	}
	g := &testkit.Gateway{MCP: mcpURL[1], Admin: console[1]}
	g.WaitReady(t)
	c := mcpGoClient(t, g.MCP, &notes{})

	r, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "list_allowed_directories"}})
	if err != nil || r.IsError || len(r.Content) == 0 || !strings.Contains(r.Content[0].(mcp.TextContent).Text, data) {
		t.Fatalf("forwarded list_allowed_directories: %+v %v", r, err)
	}
	target := filepath.Join(data, "from-readme.txt")
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		r, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "write_file",
			Arguments: map[string]any{"path": target, "content": "approved"}}})
		if err != nil {
			r = mcp.NewToolResultError(err.Error())
		}
		done <- r
	}()
	var line string
	select {
	case line = <-held:
	case <-ctx.Done():
		t.Fatal("write_file was not held")
	}
	tid := regexp.MustCompile(`task (tg_[0-9a-f-]+)`).FindStringSubmatch(line)
	if tid == nil || !strings.HasPrefix(line, "held: write_file") {
		t.Fatalf("held line: %q", line)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("written before approval: %v", err)
	}
	if st, body := g.AdminRequest(t, "POST", "/api/v1/approvals/"+tid[1]+"/approve", token[1], `{"reason":"readme"}`); st != 200 {
		t.Fatalf("approve with the banner's token: %d %v", st, body)
	}
	select {
	case r := <-done:
		if r.IsError {
			t.Fatalf("held write_file: %+v", r)
		}
	case <-ctx.Done():
		t.Fatal("held write_file never answered")
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "approved" {
		t.Fatalf("file %q (%v)", b, err)
	}
}
