package e2e

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

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// readmeExample is the README's example config and the shell blocks around it: the exports
// shown just before it and the commands shown just after.
type readmeExample struct {
	exports  []string // "export NAME=…" lines, as written
	names    []string // the variables they set
	yaml     string
	commands [][]string // each command's arguments after "go run ./cmd/tollgate"
}

var exportLine = regexp.MustCompile(`^export ([A-Za-z_][A-Za-z0-9_]*)=`)

// readReadmeExample finds the yaml block that defines approvers in the README's Configuration
// section and the sh blocks right before and after it.
func readReadmeExample(t *testing.T) readmeExample {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Configuration\n")
	if !ok {
		t.Fatal("README has no ## Configuration section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	type block struct{ lang, body string }
	var blocks []block
	sc := bufio.NewScanner(strings.NewReader(section))
	var cur *block
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &block{lang: strings.TrimPrefix(line, "```")}
		case cur != nil && line == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.body += line + "\n"
		}
	}
	for i, bl := range blocks {
		if bl.lang != "yaml" || !strings.Contains(bl.body, "approvers:") {
			continue
		}
		if i == 0 || blocks[i-1].lang != "sh" || i+1 == len(blocks) || blocks[i+1].lang != "sh" {
			t.Fatal("README: the example config must have a sh block with the variables it needs right before it and one with the commands right after it")
		}
		ex := readmeExample{yaml: bl.body}
		for _, line := range strings.Split(blocks[i-1].body, "\n") {
			if m := exportLine.FindStringSubmatch(line); m != nil {
				ex.exports = append(ex.exports, line)
				ex.names = append(ex.names, m[1])
			}
		}
		for _, line := range strings.Split(blocks[i+1].body, "\n") {
			line, _, _ = strings.Cut(line, "#")
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "go run ./cmd/tollgate "); ok {
				ex.commands = append(ex.commands, strings.Fields(rest))
			}
		}
		return ex
	}
	t.Fatal("README: no yaml example config with approvers in ## Configuration")
	return readmeExample{}
}

// shellExports runs the README's export lines in bash and returns the values they set.
// Without openssl on the machine, a stand-in prints random hex the same way.
func shellExports(t *testing.T, ex readmeExample) map[string]string {
	t.Helper()
	path := os.Getenv("PATH")
	if _, err := exec.LookPath("openssl"); err != nil {
		shim := t.TempDir()
		script := "#!/bin/sh\n# openssl rand -hex N\nod -An -tx1 -N\"$3\" /dev/urandom | tr -d ' \\n'\n"
		if err := os.WriteFile(filepath.Join(shim, "openssl"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		path = shim + ":" + path
	}
	script := "set -eu\n" + strings.Join(ex.exports, "\n") + "\n"
	for _, n := range ex.names {
		script += `printf '%s\0' "$` + n + `"` + "\n"
	}
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = []string{"PATH=" + path}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("README exports: %v\n%s", err, script)
	}
	vals := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if len(vals) != len(ex.names) {
		t.Fatalf("README exports gave %d values for %v", len(vals), ex.names)
	}
	env := map[string]string{}
	for i, n := range ex.names {
		env[n] = vals[i]
	}
	return env
}

// TestReadmeExampleConfigRuns: the README's example config, saved as the README says with the
// variables it shows, passes the README's `validate` command and its `run` command reaches
// /readyz in front of the demo upstream. config/example.yaml does the same. Only the listen
// ports and the upstream URL (through the config's own ${UPSTREAM_URL:-…}) are the test's.
func TestReadmeExampleConfigRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	ex := readReadmeExample(t)
	if len(ex.exports) == 0 || !slices.Contains(ex.names, "ALICE_TOKEN") {
		t.Fatalf("README: the exports before the example config must set ALICE_TOKEN (its approver's token): %v", ex.names)
	}
	if len(ex.commands) != 2 || ex.commands[0][0] != "validate" || ex.commands[1][0] != "run" {
		t.Fatalf("README: after the example config, want a validate and a run command, got %v", ex.commands)
	}
	readmeEnv := shellExports(t, ex)
	if len(readmeEnv["ALICE_TOKEN"]) < 16 {
		t.Fatalf("README's ALICE_TOKEN is %d bytes, Tollgate needs 16", len(readmeEnv["ALICE_TOKEN"]))
	}
	bin := buildBinary(t)
	_, upstreamURL := testkit.StartDemo(t)

	// The README's config at the root of a copy of the repository's layout.
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "tollgate.yaml"), []byte(ex.yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(root, "policies"), os.DirFS("../../policies")); err != nil {
		t.Fatal(err)
	}
	example, err := filepath.Abs("../../config/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		validate []string
		run      []string
		env      []string // beyond the README's exports
	}{
		{"README", ex.commands[0], ex.commands[1], nil},
		// example.yaml's second approver (finance needs two: min_approvals) has a token too.
		{"config/example.yaml", []string{"validate", "--config", example}, []string{"run", "--config", example},
			[]string{"BOB_TOKEN=" + strings.Repeat("b0", 16)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mcp, admin := freeAddr(t), freeAddr(t)
			env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "XDG_STATE_HOME=" + t.TempDir(),
				"TOLLGATE_LISTEN=" + mcp, "TOLLGATE_ADMIN_LISTEN=" + admin}
			for k, v := range readmeEnv {
				if k == "UPSTREAM_URL" {
					v = upstreamURL
				}
				env = append(env, k+"="+v)
			}
			if _, ok := readmeEnv["UPSTREAM_URL"]; !ok {
				env = append(env, "UPSTREAM_URL="+upstreamURL)
			}
			env = append(env, tc.env...)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, tc.validate...)
			cmd.Dir, cmd.Env = root, env
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "valid") || strings.Contains(string(out), "warning") {
				t.Fatalf("%v: %v\n%s", tc.validate, err, out)
			}
			// Without the README's token variable, validate says what run would refuse.
			cmd = exec.CommandContext(ctx, bin, tc.validate...)
			cmd.Dir, cmd.Env = root, slices.DeleteFunc(slices.Clone(env), func(e string) bool { return strings.HasPrefix(e, "ALICE_TOKEN=") })
			if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "ALICE_TOKEN") {
				t.Errorf("validate without ALICE_TOKEN: %v\n%s", err, out)
			}

			gw := exec.CommandContext(ctx, bin, tc.run...)
			gw.Dir, gw.Env = root, env
			gw.Cancel = func() error { return gw.Process.Signal(syscall.SIGTERM) }
			gw.WaitDelay = 10 * time.Second
			var logs bytes.Buffer
			gw.Stderr = &logs
			if err := gw.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- gw.Wait() }()
			ready := make(chan struct{})
			go func() {
				defer close(ready)
				g := &testkit.Gateway{MCP: "http://" + mcp + "/mcp", Admin: "http://" + admin}
				deadline := time.Now().Add(30 * time.Second)
				for time.Now().Before(deadline) {
					if resp, err := testkit.HTTPClient.Get(g.Admin + "/readyz"); err == nil {
						resp.Body.Close()
						if resp.StatusCode == 200 {
							return
						}
					}
					select {
					case <-ctx.Done():
						return
					case <-time.After(50 * time.Millisecond):
					}
				}
			}()
			select {
			case err := <-exited:
				t.Fatalf("%v exited: %v\n%s", tc.run, err, logs.String())
			case <-ready:
			}
			resp, err := testkit.HTTPClient.Get("http://" + admin + "/readyz")
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%v: /readyz not 200: %v %v", tc.run, err, resp)
			}
			resp.Body.Close()
			cancel()
			<-exited
		})
	}
}
