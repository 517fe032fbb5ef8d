//go:build unix

package interop

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/test/fixture/modern"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// The 2026-07-28 era with real parts: the tasks requester @modelcontextprotocol/ext-tasks
// (exttasks.mjs, both eras) and the inspector's mcpdo CLI (--era modern), against
// test/fixture/modern directly and through Tollgate.

// modernRules holds greet and confirm_delete for approval and denies protocol_error_job; the
// rest is forwarded.
const modernRules = `governance:
  defaults: {action: forward}
  rules:
    - {match: "greet", action: approve}
    - {match: "confirm_delete", action: approve}
    - {match: "protocol_error_job", action: deny}
approval:
  default: {timeout: 10m, on_timeout: deny}
`

// startFixture serves test/fixture/modern (mcp-go v1.2.1, both eras, tasks extension) on
// loopback; failing_job fails at once.
func startFixture(t *testing.T) (string, *modern.Server) {
	t.Helper()
	s := modern.New(modern.Options{FailDelay: -1, PollInterval: 100 * time.Millisecond})
	ts := httptest.NewServer(s)
	t.Cleanup(func() {
		ts.Close()
		s.Close()
	})
	return ts.URL + "/mcp", s
}

// modernGap names what of Tollgate's 2026-07-28 era these tests need and do not find (""
// when it is there): a modern server/discover must be answered with the upstream's tools
// capability and the tasks extension.
func modernGap(t *testing.T, mcpURL string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := modern.Post(ctx, mcpURL, 1, "server/discover", nil, nil, nil)
	if err != nil {
		t.Fatalf("probe server/discover: %v", err)
	}
	switch {
	case r.Code() == -32022:
		return "the 2026-07-28 era: server/discover answers -32022 UnsupportedProtocolVersion (issue 11: era detection, server/discover)"
	case r.Error != nil:
		return fmt.Sprintf("server/discover in the 2026-07-28 era: it answers %d %s", r.Code(), r.Error.Message)
	case dig(r.Result, "capabilities", "extensions", modern.ExtensionID) == nil:
		return fmt.Sprintf("the tasks extension on server/discover (capabilities: %v)", dig(r.Result, "capabilities"))
	}
	return ""
}

// runExtTasks runs exttasks.mjs: era legacy or modern, one tool call settled to its outcome;
// extra is the optional task preference.
func runExtTasks(t *testing.T, tc toolchain, url, era, tool string, args any, onEvent func(event) string, extra ...string) *scriptRun {
	t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return runScript(t, tc, "exttasks.mjs", append([]string{url, era, tool, string(b)}, extra...), onEvent)
}

// reply answers "taskCreated" events (the script waits for one stdin line after it).
func reply(e event) string {
	if e.name() == "taskCreated" {
		return "go"
	}
	return ""
}

// TestExtTasksFixture: the requester against the fixture itself, so the script and the
// fixture are known good before Tollgate stands between them.
func TestExtTasksFixture(t *testing.T) {
	tc := needNode(t)
	url, srv := startFixture(t)
	tests := []struct {
		era, tool  string
		args       map[string]any
		kind       string // execution kind: immediate or task
		status     string // outcome
		text       string // in the result
		wantsInput bool
	}{
		{"modern", "slow_compute", map[string]any{"seconds": 0, "label": "ext"}, "task", "completed", "slow_compute(ext) done after 0s", false},
		{"modern", "confirm_delete", map[string]any{"filename": "m.txt"}, "task", "completed", "Deleted m.txt", true},
		{"modern", "failing_job", map[string]any{}, "task", "completed", "failing_job failed as designed", false},
		{"modern", "protocol_error_job", map[string]any{}, "task", "failed", "", false},
		{"modern", "greet", map[string]any{"name": "Ada"}, "immediate", "completed", "Hello, Ada!", false},
		{"legacy", "greet", map[string]any{"name": "Lin"}, "immediate", "completed", "Hello, Lin!", false},
		{"legacy", "confirm_delete", map[string]any{"filename": "l.txt"}, "immediate", "completed", "Deleted l.txt", false},
	}
	for _, tt := range tests {
		t.Run(tt.era+"/"+tt.tool, func(t *testing.T) {
			before := srv.Calls(tt.tool)
			run := runExtTasks(t, tc, url, tt.era, tt.tool, tt.args, reply)
			defer func() {
				if t.Failed() {
					run.dump(t)
				}
			}()
			if era := run.find("connected")["era"]; era != tt.era {
				t.Fatalf("negotiated era %v, want %s (connect error: %v)", era, tt.era, run.find("connectError"))
			}
			if k := run.find("execution")["kind"]; k != tt.kind {
				t.Errorf("execution kind %v, want %s (call error: %v)", k, tt.kind, run.find("callError"))
			}
			out := run.find("outcome")
			if out["status"] != tt.status || !strings.Contains(textOf(out["result"]), tt.text) {
				t.Errorf("outcome %v, want %s with %q", out, tt.status, tt.text)
			}
			if tt.status == "failed" && dig(out, "error", "code") != float64(-32603) {
				t.Errorf("failed outcome error %v, want code -32603", out["error"])
			}
			if got := run.find("inputRequest") != nil; got != tt.wantsInput {
				t.Errorf("input requested: %v, want %v", got, tt.wantsInput)
			}
			if srv.Calls(tt.tool) == before {
				t.Errorf("the fixture never ran %s", tt.tool)
			}
		})
	}
}

// TestExtTasksApprovalThroughTollgate: the requester in both eras through Tollgate; greet is
// held for approval. A requester that takes a task gets a tg_ one (2025-11-25 tasks when it
// prefers a task for the optional tool, the flat CreateTaskResult of the 2026-07-28 tasks
// extension where the server decides); a 2025-11-25 plain call is held open instead
// (tasks.sync_approval: hold). An approver approves through the admin API and the requester's
// settled outcome is the upstream's result — greet run once, after the approval. A denied tool
// never reaches the upstream.
func TestExtTasksApprovalThroughTollgate(t *testing.T) {
	tc := needNode(t)
	upURL, srv := startFixture(t)
	g := startGateway(t, basicConfig(upURL, modernRules), nil)

	tests := []struct {
		name, era, preference string
		kind                  string // execution kind the requester sees
	}{
		{"legacy/task", "legacy", "prefer", "task"},
		{"legacy/held plain call", "legacy", "", "immediate"},
		{"modern/task", "modern", "", "task"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.era == "modern" {
				if gap := modernGap(t, g.MCP); gap != "" {
					t.Skipf("Tollgate lacks %s", gap)
				}
			}
			name := strings.NewReplacer("/", "-", " ", "-").Replace("Ada-" + tt.name)
			before := srv.Calls("greet")
			approved := approveWhenPending(t, g, "greet", func() {
				if srv.Calls("greet") != before {
					t.Errorf("greet reached the upstream before the approval")
				}
			})
			var created []string
			run := runExtTasks(t, tc, g.MCP, tt.era, "greet", map[string]any{"name": name}, func(e event) string {
				if e.name() == "taskCreated" {
					created = append(created, fmt.Sprint(e["taskId"]))
				}
				return reply(e)
			}, tt.preference)
			defer func() {
				if t.Failed() {
					run.dump(t)
				}
			}()
			id := <-approved
			if e := run.find("connected")["era"]; e != tt.era {
				t.Fatalf("negotiated era %v, want %s (connect error: %v)", e, tt.era, run.find("connectError"))
			}
			if k := run.find("execution")["kind"]; k != tt.kind {
				t.Fatalf("execution kind %v, want %s (call error: %v)", k, tt.kind, run.find("callError"))
			}
			if tt.kind == "task" && (len(created) != 1 || created[0] != id || !strings.HasPrefix(id, "tg_")) {
				t.Errorf("tasks created %v, approved %s: want the one tg_ task", created, id)
			}
			out := run.find("outcome")
			if out["status"] != "completed" || textOf(out["result"]) != "Hello, "+name+"!" {
				t.Errorf("outcome %v, want completed with Hello, %s!", out, name)
			}
			if n := srv.Calls("greet") - before; n != 1 {
				t.Errorf("upstream ran greet %d times, want 1", n)
			}
		})
	}
	// An approved call whose upstream then asks for input (confirm_delete answers MRTR
	// input_required): the requester sees the input request on its tg_ task and answers it
	// with tasks/update; the retry carries the answer. It used to fail the task with -32603
	// UnsupportedResult.
	t.Run("modern/approved call asks for input", func(t *testing.T) {
		if gap := modernGap(t, g.MCP); gap != "" {
			t.Skipf("Tollgate lacks %s", gap)
		}
		approved := approveWhenPending(t, g, "confirm_delete", func() {})
		run := runExtTasks(t, tc, g.MCP, "modern", "confirm_delete", map[string]any{"filename": "held.txt"}, reply)
		<-approved
		out := run.find("outcome")
		if run.find("inputRequest") == nil || out["status"] != "completed" || textOf(out["result"]) != "Deleted held.txt" {
			run.dump(t)
			t.Errorf("outcome %v (input requested: %v), want the elicitation answered and Deleted held.txt", out, run.find("inputRequest") != nil)
		}
	})
	for _, era := range []string{"legacy", "modern"} {
		t.Run(era+"/deny", func(t *testing.T) {
			if era == "modern" {
				if gap := modernGap(t, g.MCP); gap != "" {
					t.Skipf("Tollgate lacks %s", gap)
				}
			}
			before := srv.Calls("protocol_error_job")
			run := runExtTasks(t, tc, g.MCP, era, "protocol_error_job", map[string]any{}, reply)
			if ce := run.find("callError"); dig(ce, "code") != float64(-32003) {
				run.dump(t)
				t.Errorf("denied call: %v, want -32003 PolicyDenied", ce)
			}
			if n := srv.Calls("protocol_error_job") - before; n != 0 {
				t.Errorf("a denied call reached the upstream %d times", n)
			}
		})
	}
}

// approveWhenPending approves, in the background, the first task for tool that awaits
// approval, calling check just before; the channel yields its id once approved ("" if none
// showed up in time, which is reported as an error).
func approveWhenPending(t *testing.T, g *testkit.Gateway, tool string, check func()) <-chan string {
	t.Helper()
	done := make(chan string, 1)
	go func() {
		id := pendingTask(t, g, tool)
		if id == "" {
			t.Errorf("no task for %s awaited approval within %s", tool, readyTimeout)
		} else {
			check()
			if st, body, err := adminDo(g, http.MethodPost, "/api/v1/approvals/"+id+"/approve", `{"reason":"interop test"}`); err != nil || st != http.StatusOK {
				t.Errorf("approve %s: HTTP %d %v %v", id, st, body, err)
			}
		}
		done <- id
	}()
	return done
}

// adminDo is testkit's AdminRequest for goroutines other than the test's: errors are returned,
// not fatal.
func adminDo(g *testkit.Gateway, method, path, body string) (int, map[string]any, error) {
	req, err := http.NewRequest(method, g.Admin+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+testkit.AdminToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := testkit.HTTPClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var m map[string]any
	err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&m)
	return resp.StatusCode, m, err
}

// mcpdo runs the inspector's mcpdo CLI with a private daemon (its own HOME, daemon directory
// and token, secrets in memory); cleanup stops the daemon.
type mcpdo struct {
	t   *testing.T
	tc  toolchain
	env []string
	dir string
}

func newMcpdo(t *testing.T, tc toolchain) *mcpdo {
	t.Helper()
	home := t.TempDir()
	dir := filepath.Join(home, "d")
	m := &mcpdo{t: t, tc: tc, dir: dir, env: []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "NO_COLOR=1",
		"MCP_INSPECTOR_SECRET_STORE=memory",
		"MCP_INSPECTOR_DAEMON_DIR=" + dir,
		"MCP_INSPECTOR_DAEMON_TOKEN=" + rand.Text() + rand.Text(),
	}}
	t.Cleanup(m.stop)
	return m
}

// run executes one mcpdo command (JSON output); err is non-nil when it exits non-zero.
func (m *mcpdo) run(args ...string) (stdout, stderr string, err error) {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, m.tc.node, append([]string{m.tc.mcpdo, "--format", "json"}, args...)...)
	cmd.Env = m.env
	cmd.SysProcAttr = procAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = stopGrace
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	if ctx.Err() != nil {
		m.t.Fatalf("mcpdo %v timed out", args)
	}
	return out.String(), errb.String(), err
}

// json runs a command that must succeed and decodes its output.
func (m *mcpdo) json(args ...string) map[string]any {
	m.t.Helper()
	out, errs, err := m.run(args...)
	if err != nil {
		m.t.Fatalf("mcpdo %v: %v\nstdout: %s\nstderr: %s", args, err, out, errs)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		m.t.Fatalf("mcpdo %v: output %q: %v", args, out, err)
	}
	return v
}

// stop ends the daemon: "daemon stop", then SIGKILL to the pid it recorded if it lingers.
func (m *mcpdo) stop() {
	if _, err := os.Stat(m.dir); err != nil {
		return // never started
	}
	_, _, _ = m.run("daemon", "stop")
	b, err := os.ReadFile(filepath.Join(m.dir, "mcpdod.lock"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return
	}
	for range 50 { // up to 5 s for a clean exit
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

// connectModern opens a --era modern connection to url and checks the negotiated era.
func (m *mcpdo) connectModern(url string) {
	m.t.Helper()
	if c := m.json("connect", url, "--era", "modern"); c["protocolEra"] != "modern" {
		m.t.Fatalf("connect --era modern: %v", c)
	}
	show := m.json("--connection", url, "connections/show")
	if show["protocolVersion"] != "2026-07-28" || dig(show, "capabilities", "extensions", modern.ExtensionID) == nil {
		m.t.Errorf("connections/show: version %v, capabilities %v; want 2026-07-28 with the tasks extension", show["protocolVersion"], show["capabilities"])
	}
}

// TestInspectorModern: Inspector 2.12's mcpdo --era modern against the fixture directly, then
// through Tollgate: tools/list, a forwarded call, an upstream task it settles, a denied call,
// and a held call that completes once approved through the admin API.
func TestInspectorModern(t *testing.T) {
	tc := needNode(t)
	upURL, srv := startFixture(t)

	t.Run("direct", func(t *testing.T) {
		m := newMcpdo(t, tc)
		m.connectModern(upURL)
		tools := m.json("--connection", upURL, "tools/list")
		if !strings.Contains(fmt.Sprint(tools["tools"]), "name:slow_compute") {
			t.Errorf("tools/list lacks slow_compute: %v", tools)
		}
		if r := m.json("--connection", upURL, "tools/call", "greet", "name:=Ada"); textOf(r) != "Hello, Ada!" {
			t.Errorf("greet: %v", r)
		}
		if r := m.json("--connection", upURL, "tools/call", "slow_compute", "seconds:=0", "label:=insp"); textOf(r) != "slow_compute(insp) done after 0s" {
			t.Errorf("slow_compute (a task at the fixture): %v", r)
		}
	})

	t.Run("through Tollgate", func(t *testing.T) {
		g := startGateway(t, basicConfig(upURL, modernRules), nil)
		if gap := modernGap(t, g.MCP); gap != "" {
			t.Skipf("Tollgate lacks %s", gap)
		}
		m := newMcpdo(t, tc)
		m.connectModern(g.MCP)
		tools := m.json("--connection", g.MCP, "tools/list")
		if !strings.Contains(fmt.Sprint(tools["tools"]), "name:greet") {
			t.Errorf("tools/list through Tollgate lacks greet: %v", tools)
		}
		if r := m.json("--connection", g.MCP, "tools/call", "slow_compute", "seconds:=0", "label:=tg"); textOf(r) != "slow_compute(tg) done after 0s" {
			t.Errorf("forwarded slow_compute: %v", r)
		}

		before := srv.Calls("protocol_error_job")
		if out, errs, err := m.run("--connection", g.MCP, "tools/call", "protocol_error_job"); err == nil || !strings.Contains(errs, "protocol_error_job") {
			t.Errorf("denied call: err %v, stdout %s, stderr %s; want a failure naming the tool", err, out, errs)
		}
		if srv.Calls("protocol_error_job") != before {
			t.Errorf("a denied call reached the upstream")
		}

		// mcpdo settles the tg_ task itself; approve it while the command waits.
		before = srv.Calls("greet")
		type result struct {
			out, errs string
			err       error
		}
		done := make(chan result, 1)
		go func() {
			out, errs, err := m.run("--connection", g.MCP, "tools/call", "greet", "name:=Held")
			done <- result{out, errs, err}
		}()
		approved := approveWhenPending(t, g, "greet", func() {
			if srv.Calls("greet") != before {
				t.Errorf("greet reached the upstream before the approval")
			}
		})
		r := <-done
		<-approved
		var v map[string]any
		if r.err != nil || json.Unmarshal([]byte(r.out), &v) != nil || textOf(v) != "Hello, Held!" {
			t.Errorf("held greet: err %v, stdout %s, stderr %s; want Hello, Held!", r.err, r.out, r.errs)
		}
		if n := srv.Calls("greet") - before; n != 1 {
			t.Errorf("upstream ran greet %d times, want 1", n)
		}
	})
}

// pendingTask polls the admin API until a task for tool awaits approval and returns its id
// ("" after readyTimeout). Safe off the test goroutine: it reports through t.Errorf only.
func pendingTask(t *testing.T, g *testkit.Gateway, tool string) string {
	deadline := time.Now().Add(readyTimeout)
	for time.Now().Before(deadline) {
		st, body, err := adminDo(g, http.MethodGet, "/api/v1/approvals", "")
		if err != nil || st != http.StatusOK {
			t.Errorf("list approvals: HTTP %d %v %v", st, body, err)
			return ""
		}
		items, _ := body["approvals"].([]any)
		for _, it := range items {
			if dig(it, "tool") == tool && dig(it, "state") == "awaiting_approval" {
				if id, ok := dig(it, "taskId").(string); ok {
					return id
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return ""
}
