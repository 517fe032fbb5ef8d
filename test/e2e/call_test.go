package e2e

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

var heldTaskRe = regexp.MustCompile(`tg_[0-9a-f-]{36}`)

// callProc is a `tollgate call` running in the background: its stderr lines as they come
// and, once it ends, its stdout and exit status.
type callProc struct {
	lines  chan string
	stdout bytes.Buffer
	done   chan int
}

func startCall(t *testing.T, ctx context.Context, bin string, env []string, args ...string) *callProc {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	p := &callProc{lines: make(chan string, 64), done: make(chan int, 1)}
	cmd.Stdout = &p.stdout
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		_ = cmd.Wait()
		p.done <- cmd.ProcessState.ExitCode()
	}()
	return p
}

// heldTask waits for the "held for approval" line and returns the task id in it, failing
// the test if the command ends (or ctx does) first.
func (p *callProc) heldTask(t *testing.T, ctx context.Context) (string, string) {
	t.Helper()
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("tollgate call ended without a held line; stdout:\n%s", p.stdout.String())
			}
			if strings.HasPrefix(l, "held for approval: approve with `") {
				if id := heldTaskRe.FindString(l); id != "" {
					return id, l
				}
			}
		case <-ctx.Done():
			t.Fatal("no held line in time")
		}
	}
}

// wait drains stderr and returns it with the exit status.
func (p *callProc) wait(t *testing.T, ctx context.Context) (string, int) {
	t.Helper()
	var b strings.Builder
	for l := range p.lines {
		b.WriteString(l + "\n")
	}
	select {
	case code := <-p.done:
		return b.String(), code
	case <-ctx.Done():
		t.Fatal("tollgate call did not end")
	}
	return "", 0
}

func runCLI(t *testing.T, ctx context.Context, bin string, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return string(out), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), 0
}

// TestCallCommand: `tollgate call` (the built binary) against a real Tollgate in front of the
// demo, in both eras: forwarded, denied with its rule, held → approved with the CLI while the
// call waits (the held line comes at once, the hold budget is 10 minutes), and --task.
func TestCallCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	d, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, `governance:
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve}
    - {match: "drop_*", action: deny}
approval:
  default: {timeout: 10m, on_timeout: deny}
tasks: {sync_approval: hold, hold_budget: 10m, poll_interval: 100ms}
`), nil, nil)
	g.WaitReady(t)
	env := append(os.Environ(), "TOLLGATE_ADMIN_URL="+g.Admin, "TOLLGATE_ADMIN_TOKEN="+testkit.AdminToken, "TOLLGATE_LISTEN=")
	for n, era := range []string{"legacy", "modern"} {
		t.Run(era, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			call := func(args ...string) []string { return append([]string{"call", "--url", g.MCP, "--era", era}, args...) }

			out, code := runCLI(t, ctx, bin, env, call("read_file", `{"path":"/etc/motd"}`)...)
			if code != 0 || !strings.Contains(out, "Welcome to the Tollgate demo host.") {
				t.Fatalf("forward (%d):\n%s", code, out)
			}
			out, code = runCLI(t, ctx, bin, env, call("drop_table", `{"table":"orders"}`)...)
			if code != 1 || !strings.Contains(out, `denied by rule "drop_*"`) || !strings.Contains(out, "-32003 PolicyDenied") {
				t.Fatalf("deny (%d):\n%s", code, out)
			}
			if d.Calls("drop_table") != 0 {
				t.Fatal("a denied call reached the upstream")
			}

			for _, mode := range []struct {
				name string
				args []string
				user string
			}{
				{"hold", nil, []string{"u-001", "u-002"}[n]},
				{"task", []string{"--task"}, []string{"u-003", "u-004"}[n]},
			} {
				t.Run(mode.name, func(t *testing.T) {
					before := d.Calls("delete_user")
					p := startCall(t, ctx, bin, env, call(append(mode.args, "delete_user", `{"user_id":"`+mode.user+`"}`)...)...)
					id, line := p.heldTask(t, ctx)
					if mode.name == "hold" && !strings.Contains(line, "or in the console at "+g.Admin+"/approvals") {
						t.Errorf("held line lacks the console: %s", line)
					}
					if d.Calls("delete_user") != before {
						t.Fatal("executed before the approval")
					}
					if out, code := runCLI(t, ctx, bin, env, "approvals", "approve", id, "--reason", "e2e"); code != 0 {
						t.Fatalf("approvals approve (%d):\n%s", code, out)
					}
					stderr, code := p.wait(t, ctx)
					if code != 0 || !strings.Contains(p.stdout.String(), mode.user) || d.Calls("delete_user") != before+1 {
						t.Fatalf("after approval (%d, %d calls):\nstdout:\n%s\nstderr:\n%s", code, d.Calls("delete_user")-before, p.stdout.String(), stderr)
					}
				})
			}

			// A rejection ends the waiting call with exit status 1 and says so.
			p := startCall(t, ctx, bin, env, call("delete_user", `{"user_id":"u-10`+string(rune('0'+n))+`"}`)...)
			id, _ := p.heldTask(t, ctx)
			if out, code := runCLI(t, ctx, bin, env, "approvals", "reject", id, "--reason", "no"); code != 0 {
				t.Fatalf("approvals reject (%d):\n%s", code, out)
			}
			if stderr, code := p.wait(t, ctx); code != 1 || !strings.Contains(stderr, "rejected:") {
				t.Fatalf("after rejection (%d):\n%s", code, stderr)
			}
		})
	}
	// Usage errors are 2.
	for _, args := range [][]string{{"call"}, {"call", "x", "[1]"}, {"call", "x", "--era", "2024"}, {"call", "x", "{}", "y"}} {
		if out, code := runCLI(t, t.Context(), bin, env, args...); code != 2 {
			t.Errorf("%q: exit %d:\n%s", args, code, out)
		}
	}
}

// quickStart returns the ```sh blocks of README.md's "## Quick start" section, in order.
func quickStart(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n## Quick start\n")
	if i < 0 {
		t.Fatal(`README.md has no "## Quick start" section`)
	}
	s = s[i+1:]
	if j := strings.Index(s[3:], "\n## "); j >= 0 {
		s = s[:j+3]
	}
	var blocks [][]string
	for _, part := range strings.Split(s, "```sh\n")[1:] {
		body, _, _ := strings.Cut(part, "```")
		var lines []string
		for _, l := range strings.Split(body, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
		blocks = append(blocks, lines)
	}
	return blocks
}

// shellWords splits a README command line: words, 'single-quoted' strings, a trailing
// # comment (returned apart).
func shellWords(t *testing.T, line string) (words []string, comment string) {
	t.Helper()
	var w strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quoted && c == '\'':
			quoted = false
		case quoted:
			w.WriteByte(c)
		case c == '\'':
			quoted, inWord = true, true
		case c == '#' && !inWord:
			return words, strings.TrimSpace(line[i+1:])
		case c == ' ' || c == '\t':
			if inWord {
				words, inWord = append(words, w.String()), false
				w.Reset()
			}
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("unterminated quote in README line %q", line)
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, ""
}

// TestReadmeQuickStart runs README.md's quick start as written: build, start the demo, the
// second terminal's export and calls (each checked against what its comment promises), and
// the held call approved from a third terminal with the CLI, then the waiting call's result.
// Only the listen ports differ (the demo's defaults may be taken here): the test moves them
// with TOLLGATE_LISTEN / TOLLGATE_ADMIN_LISTEN, which `tollgate call` follows, and reads the
// README's admin URL as the moved one.
func TestReadmeQuickStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	blocks := quickStart(t)
	if len(blocks) != 3 {
		t.Fatalf("quick start: want 3 sh blocks (start, calls, approve), got %d: %q", len(blocks), blocks)
	}
	// Block 1: make build, bin/tollgate demo. The test builds the same package to a temp dir.
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if w, _ := shellWords(t, blocks[0][0]); strings.Join(w, " ") != "make build" || !strings.Contains(string(mk), "-o bin/tollgate ./cmd/tollgate") {
		t.Fatalf("quick start does not begin with `make build` of bin/tollgate: %q", blocks[0])
	}
	bin := buildBinary(t)
	cli := func(words []string) []string {
		if len(words) == 0 || words[0] != "bin/tollgate" {
			t.Fatalf("quick start command is not bin/tollgate: %q", words)
		}
		return words[1:]
	}
	if w, _ := shellWords(t, blocks[0][1]); strings.Join(cli(w), " ") != "demo" {
		t.Fatalf("second command is not the demo: %q", blocks[0][1])
	}
	mcpAddr, adminAddr := freeAddr(t), freeAddr(t)
	env := append(os.Environ(), "TOLLGATE_LISTEN="+mcpAddr, "TOLLGATE_ADMIN_LISTEN="+adminAddr, "TOLLGATE_ADMIN_TOKEN=", "TOLLGATE_ADMIN_URL=", "TOLLGATE_LOG_LEVEL=warn")
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	demo, stdout, demoErr := startDemoBinary(t, ctx, bin, env)
	defer func() { cancel(); _ = demo.Wait() }()
	banner, heldLines := make(chan string, 1), make(chan string, 16)
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
				heldLines <- l
			}
		}
	}()
	var token string
	select {
	case out := <-banner:
		m := regexp.MustCompile(`Admin token\s+(\S+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("banner has no admin token:\n%s", out)
		}
		token = m[1]
		// The banner shows the same commands as the README.
		for _, l := range blocks[1][1:] {
			cmd, _, _ := strings.Cut(strings.TrimPrefix(l, "bin/tollgate call "), "#")
			if !strings.Contains(out, " "+strings.TrimSpace(cmd)+" ") {
				t.Errorf("banner lacks the README's %q:\n%s", cmd, out)
			}
		}
	case <-ctx.Done():
		t.Fatalf("demo did not start:\n%s", demoErr.String())
	}
	(&testkit.Gateway{Admin: "http://" + adminAddr}).WaitReady(t)

	// Block 2: the export, then the calls.
	// The one placeholder: the token the banner printed.
	words, _ := shellWords(t, strings.Replace(blocks[1][0], "<token from the banner>", token, 1))
	if len(words) < 2 || words[0] != "export" {
		t.Fatalf("second terminal does not start with export: %q", blocks[1][0])
	}
	for _, kv := range words[1:] {
		k, v, _ := strings.Cut(kv, "=")
		if v == "http://127.0.0.1:7469" {
			v = "http://" + adminAddr
		}
		env = append(env, k+"="+v)
	}
	var held *callProc
	var heldUser string
	for _, l := range blocks[1][1:] {
		w, comment := shellWords(t, l)
		args := cli(w)
		switch {
		case strings.HasPrefix(comment, "forwarded"):
			if out, code := runCLI(t, ctx, bin, env, args...); code != 0 || !strings.Contains(out, "Welcome to the Tollgate demo host.") {
				t.Fatalf("%s (%d):\n%s", l, code, out)
			}
		case strings.HasPrefix(comment, "denied by rule"):
			rule := strings.TrimPrefix(comment, "denied by ")
			if out, code := runCLI(t, ctx, bin, env, args...); code != 1 || !strings.Contains(out, "denied by "+rule) {
				t.Fatalf("%s (%d):\n%s", l, code, out)
			}
		case strings.HasPrefix(comment, "held"):
			held = startCall(t, ctx, bin, env, args...)
			heldUser = regexp.MustCompile(`u-\d{3}`).FindString(l)
		default:
			t.Fatalf("README quick start line with no known outcome in its comment: %q", l)
		}
	}
	if held == nil {
		t.Fatal("README quick start makes no held call")
	}
	id, line := held.heldTask(t, ctx)
	if !strings.Contains(line, "bin/tollgate approvals approve "+id) && !strings.Contains(line, "approvals approve "+id) {
		t.Errorf("held line: %s", line)
	}
	select {
	case l := <-heldLines:
		if !strings.Contains(l, id) || !strings.Contains(l, "delete_user") {
			t.Errorf("demo's held line: %s", l)
		}
	case <-ctx.Done():
		t.Fatal("the demo printed no held line")
	}

	// Block 3: the approval, with the id the held call printed.
	w, _ := shellWords(t, blocks[2][0])
	args := cli(w)
	if len(args) != 3 || args[0] != "approvals" || args[1] != "approve" || args[2] != "tg_…" {
		t.Fatalf("third terminal: %q", blocks[2][0])
	}
	args[2] = id
	if out, code := runCLI(t, ctx, bin, env, args...); code != 0 {
		t.Fatalf("approve (%d):\n%s", code, out)
	}
	stderr, code := held.wait(t, ctx)
	if code != 0 || heldUser == "" || !strings.Contains(held.stdout.String(), heldUser) {
		t.Fatalf("the held call after approval (%d):\nstdout:\n%s\nstderr:\n%s", code, held.stdout.String(), stderr)
	}
}
