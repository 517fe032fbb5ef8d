//go:build unix

package interop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// stdioConfig runs command with args as Tollgate's stdio server (sources[0].command).
func stdioConfig(command string, args []string, env map[string]string, extra string, tasks ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "schema: 1\nsources:\n  - id: stdio\n    kind: mcp\n    command: %q\n    args: [", command)
	for i, a := range args {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", a)
	}
	b.WriteString("]\n    env: {")
	first := true
	for k, v := range env {
		if !first {
			b.WriteString(", ")
		}
		first = false
		fmt.Fprintf(&b, "%s: %q", k, v)
	}
	b.WriteString("}\naudit: {path: audit.log}\n")
	b.WriteString("tasks: {" + strings.Join(append([]string{"poll_interval: 100ms"}, tasks...), ", ") + "}\n")
	return b.String() + extra
}

// TestServerEverythingStdio: the reference server in stdio mode, run by Tollgate itself,
// governed like its HTTP mode: calls forward, progress notifications arrive on the call's
// stream, an approval-gated call runs after approval; the process sees the env entries the
// config lists and not Tollgate's other variables.
func TestServerEverythingStdio(t *testing.T) {
	tc := needNode(t)
	t.Setenv("INTEROP_NOT_LISTED", "leak-check-5d1e") // in Tollgate's environment, not in env:
	g := startGateway(t, stdioConfig(tc.node, []string{tc.everything, "stdio"},
		map[string]string{"TOLLGATE_INTEROP_MARKER": "marker-7f3c"}, everythingRules, "sync_approval: error"), nil)
	n := &notes{}
	c := mcpGoClient(t, g.MCP, n)
	ctx := context.Background()

	if caps := c.GetServerCapabilities(); caps.Tasks == nil || caps.Tools == nil {
		t.Fatalf("capabilities: %+v", caps)
	}
	r, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "over stdio"}}})
	if err != nil || r.IsError || len(r.Content) == 0 || !strings.Contains(r.Content[0].(mcp.TextContent).Text, "over stdio") {
		t.Fatalf("echo: %+v %v", r, err)
	}
	req := mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "trigger-long-running-operation", Arguments: map[string]any{"duration": 1, "steps": 3}}}
	req.Params.Meta = &mcp.Meta{ProgressToken: "stdio-progress-1"}
	if r, err := c.CallTool(ctx, req); err != nil || r.IsError {
		t.Fatalf("long-running: %+v %v", r, err)
	}
	// Sent before the answer on the call's own stream; the client may hand them on a little later.
	if got := n.wait("notifications/progress", func(p map[string]any) bool { return p["progressToken"] == "stdio-progress-1" }, 3, 5*time.Second); len(got) != 3 {
		t.Errorf("progress notifications = %d, want 3: %v", len(got), got)
	}

	res, rerr := raw(t, c, "tools/call", map[string]any{"name": "get-env", "arguments": map[string]any{}, "task": map[string]any{"ttl": 60000}})
	if rerr != nil {
		t.Fatal(rerr)
	}
	tid, _ := dig(res, "task", "taskId").(string)
	if !strings.HasPrefix(tid, "tg_") {
		t.Fatalf("task-augmented get-env: %v", res)
	}
	approve(t, g, tid)
	tr, err := c.TaskResult(ctx, mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: tid}})
	if err != nil || len(tr.Content) == 0 {
		t.Fatalf("tasks/result: %+v %v", tr, err)
	}
	env := tr.Content[0].(mcp.TextContent).Text
	if !strings.Contains(env, "marker-7f3c") {
		t.Errorf("get-env result does not come from the stdio server: %.200s", env)
	}
	if strings.Contains(env, "leak-check-5d1e") || strings.Contains(env, testkit.AdminToken) {
		t.Errorf("a variable of Tollgate's that env does not list reached the server")
	}

	// The official TypeScript SDK client: the upstream's own task (tasks/get, tasks/result and
	// tasks/list routed to the process of the session that created it), and progress.
	t.Run("TS SDK upstream task tool", func(t *testing.T) {
		run := runTS(t, tc, g.MCP, "task", nil, "simulate-research-query", `{"topic":"stdio"}`)
		tid, _ := dig(run.find("taskCreated"), "task", "taskId").(string)
		if tid == "" || strings.HasPrefix(tid, "tg_") || !strings.Contains(textOf(run.find("taskResult")["result"]), "stdio") || !listHas(run.find("list"), tid) {
			run.dump(t)
			t.Errorf("simulate-research-query through the SDK over stdio: task %q", tid)
		}
	})
	t.Run("TS SDK progress", func(t *testing.T) {
		run := runTS(t, tc, g.MCP, "progress", nil, "trigger-long-running-operation", `{"duration":1,"steps":2}`)
		if len(run.all("progress")) != 2 || !strings.Contains(textOf(run.find("result")["result"]), "completed") {
			run.dump(t)
			t.Errorf("progress through the SDK over stdio")
		}
	})
}

// TestServerFilesystemStdio: @modelcontextprotocol/server-filesystem on a temporary directory
// with an approve rule on write_file: nothing is written before the approval (through the
// admin API), and the call reaches the server exactly once — counted on its stdin, which a
// tee in front of the server copies to a file.
func TestServerFilesystemStdio(t *testing.T) {
	tc := needNode(t)
	needFilesystem(t, tc)
	root := t.TempDir()
	data := filepath.Join(root, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	// Resolve symlinks: the server compares paths against its real allowed directory.
	data, _ = filepath.EvalSymlinks(data)
	stdin := filepath.Join(root, "stdin.log")
	rules := `governance:
  defaults: {action: forward}
  rules:
    - {match: "write_file", action: approve}
approval:
  default: {timeout: 10m, on_timeout: deny}
`
	g := startGateway(t, stdioConfig("/bin/sh", []string{"-c", `tee -a "$STDIN_LOG" | exec "$NODE" "$FS" "$DATA"`},
		map[string]string{"STDIN_LOG": stdin, "NODE": tc.node, "FS": tc.filesystem, "DATA": data}, rules), nil)
	c := mcpGoClient(t, g.MCP, &notes{})
	ctx := context.Background()

	target := filepath.Join(data, "note.txt")
	res, rerr := raw(t, c, "tools/call", map[string]any{"name": "write_file",
		"arguments": map[string]any{"path": target, "content": "written through tollgate"}, "task": map[string]any{"ttl": 60000}})
	if rerr != nil {
		t.Fatal(rerr)
	}
	tid, _ := dig(res, "task", "taskId").(string)
	if !strings.HasPrefix(tid, "tg_") || dig(res, "task", "status") != "working" {
		t.Fatalf("write_file: %v", res)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("written before approval: %v", err)
	}
	approve(t, g, tid)
	tr, err := c.TaskResult(ctx, mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: tid}})
	if err != nil || tr.IsError {
		t.Fatalf("tasks/result: %+v %v", tr, err)
	}
	b, err := os.ReadFile(target)
	if err != nil || string(b) != "written through tollgate" {
		t.Fatalf("file %q (%v)", b, err)
	}
	// A forwarded read sees it, through the same governed server.
	r, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "read_text_file", Arguments: map[string]any{"path": target}}})
	if err != nil || r.IsError || len(r.Content) == 0 || !strings.Contains(r.Content[0].(mcp.TextContent).Text, "written through tollgate") {
		t.Fatalf("read_text_file: %+v %v", r, err)
	}
	in, err := os.ReadFile(stdin)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(in), `"name":"write_file"`); n != 1 {
		t.Fatalf("write_file reached the server %d times, want 1", n)
	}
}
