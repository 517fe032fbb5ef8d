package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

// cleanEnv clears every variable Tollgate reads and points the default data directory at a
// temporary one, so a developer's environment never decides a test.
func cleanEnv(t *testing.T) {
	t.Helper()
	for _, v := range config.EnvVars {
		t.Setenv(v.Name, "")
		os.Unsetenv(v.Name)
	}
	t.Setenv("XDG_STATE_HOME", t.TempDir())
}

// closedURL is an MCP URL on a loopback port nothing listens on.
func closedURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr + "/mcp"
}

// openURL is an MCP URL on a loopback port that accepts connections for the test's life.
func openURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return "http://" + ln.Addr().String() + "/mcp"
}

func runCLI(args ...string) (code int, out string) {
	var stdout, stderr bytes.Buffer
	code = run(args, &stdout, &stderr)
	return code, stdout.String() + stderr.String()
}

// TestValidateReportsWhatRunRefuses: each thing `tollgate run` refuses at start is an error of
// `tollgate validate` (exit 1), each thing it starts with but warns about is a warning (exit 0).
func TestValidateReportsWhatRunRefuses(t *testing.T) {
	const token = "0123456789abcdef-alice"
	const hashKey = "0123456789abcdef0123456789abcdef-key"
	for _, tc := range []struct {
		name    string
		yaml    string            // after "schema: 1\nsources: …"; DIR is the test's directory
		env     map[string]string // set on top of a clean environment
		files   map[string]string // made in DIR before validating
		args    []string          // besides --config; "--offline" unless the row is about the probe
		code    int
		want    []string
		notWant []string
	}{
		{name: "approver token set", yaml: "approvers: [{name: alice, token_env: ALICE_TOKEN}]\n",
			env: map[string]string{"ALICE_TOKEN": token}, code: 0, want: []string{"valid (0 rules"}, notWant: []string{"warning"}},
		{name: "approver token variable unset", yaml: "approvers: [{name: alice, token_env: ALICE_TOKEN}]\n",
			code: 1, want: []string{`approvers[0].token_env: environment variable ALICE_TOKEN (token of approver "alice") is not set`}},
		{name: "approver token variable empty", yaml: "approvers: [{name: alice, token_env: ALICE_TOKEN}]\n",
			env: map[string]string{"ALICE_TOKEN": ""}, code: 1, want: []string{"ALICE_TOKEN", "is not set"}},
		{name: "approver token too short", yaml: "approvers: [{name: alice, token_env: ALICE_TOKEN}]\n",
			env: map[string]string{"ALICE_TOKEN": "short-tok"}, code: 1, want: []string{`token of approver "alice" is 9 bytes`}, notWant: []string{"short-tok"}},
		{name: "admin token too short", env: map[string]string{config.EnvAdminToken: "adm"},
			code: 1, want: []string{`$TOLLGATE_ADMIN_TOKEN: token of approver "admin" is 3 bytes`}},
		{name: "two approvers share a token", yaml: "approvers: [{name: alice, token_env: ALICE_TOKEN}, {name: bob, token_env: BOB_TOKEN}]\n",
			env: map[string]string{"ALICE_TOKEN": token, "BOB_TOKEN": token}, code: 1, want: []string{`approver "bob" has the same token as approver "alice"`}, notWant: []string{token}},
		{name: "approval rule and no approver token", yaml: "governance: {rules: [{match: \"delete_*\", action: approve}]}\n",
			code: 0, want: []string{"warning: no approver tokens", "valid (1 rule, "}},
		{name: "file store under a regular file", yaml: "tasks: {store: {type: file, path: DIR/afile/tasks.db}}\n",
			files: map[string]string{"afile": "x"}, code: 1, want: []string{"tasks.store: file task store", "afile: not a directory"}},
		{name: "file store path is a directory", yaml: "tasks: {store: {type: file, path: DIR/adir}}\n",
			files: map[string]string{"adir/keep": "x"}, code: 1, want: []string{"adir: not a regular file"}},
		{name: "file store in a directory still to make", yaml: "tasks: {store: {type: file, path: DIR/new/sub/tasks.db}}\n",
			code: 0, want: []string{"valid"}, notWant: []string{"warning"}},
		{name: "file store from TOLLGATE_DATA_DIR under a regular file", yaml: "tasks: {store: {type: file}}\n",
			env: map[string]string{config.EnvDataDir: "DIR/afile/data"}, files: map[string]string{"afile": "x"},
			code: 1, want: []string{"tasks.store: file task store", "not a directory"}},
		{name: "auto store that would fall back to memory", yaml: "tasks: {store: {type: auto, path: DIR/afile/tasks.db}}\n",
			files: map[string]string{"afile": "x"}, code: 0, want: []string{"warning: tasks.store: tasks are kept in memory", "valid"}},
		{name: "redis URL go-redis refuses", yaml: "tasks: {store: {type: redis, url: \"redis://:s3cret-pw@127.0.0.1:6379/not-a-db\"}}\n",
			env: map[string]string{config.EnvArgumentHashKey: hashKey}, code: 1, want: []string{"tasks.store: redis task store: invalid tasks.store.url"}, notWant: []string{"s3cret-pw"}},
		{name: "redis expiry_margin refused", yaml: "tasks: {store: {type: redis, url: \"redis://127.0.0.1:6379/0?expiry_margin=soon\"}}\n",
			env: map[string]string{config.EnvArgumentHashKey: hashKey}, code: 1, want: []string{"expiry_margin"}},
		{name: "redis without the arguments hash key", yaml: "tasks: {store: {type: redis, url: \"redis://127.0.0.1:6379/0\"}}\n",
			code: 1, want: []string{"tasks.store.type redis needs TOLLGATE_ARGUMENT_HASH_KEY"}},
		{name: "redis with everything run needs", yaml: "tasks: {store: {type: redis, url: \"redis://127.0.0.1:6379/0\"}}\n",
			env: map[string]string{config.EnvArgumentHashKey: hashKey}, code: 0, want: []string{"valid"}},
		{name: "arguments hash key too short", env: map[string]string{config.EnvArgumentHashKey: "short"},
			code: 1, want: []string{"TOLLGATE_ARGUMENT_HASH_KEY must be at least 32 bytes"}, notWant: []string{": short"}},
		{name: "audit log in a missing directory", yaml: "audit: {path: DIR/nowhere/audit.log}\n",
			code: 1, want: []string{"audit.path", "nowhere does not exist"}},
		{name: "audit log writable", yaml: "audit: {path: DIR/audit.log}\n", code: 0, want: []string{"valid"}},
		{name: "upstream unreachable warns", yaml: "sources: [{id: u, kind: mcp, url: CLOSED}]\n", args: []string{},
			code: 0, want: []string{"warning: sources[0].url: upstream 127.0.0.1:", "is not reachable", "--offline", "valid"}},
		{name: "upstream unreachable, --offline", yaml: "sources: [{id: u, kind: mcp, url: CLOSED}]\n", args: []string{"--offline"},
			code: 0, want: []string{"valid"}, notWant: []string{"warning"}},
		{name: "upstream reachable", yaml: "sources: [{id: u, kind: mcp, url: OPEN}]\n", args: []string{},
			code: 0, want: []string{"valid"}, notWant: []string{"warning"}},
		{name: "stdio command not in PATH", yaml: "sources: [{id: u, kind: mcp, command: no-such-mcp-server-7c1}]\n", args: []string{},
			code: 1, want: []string{`sources[0].command: "no-such-mcp-server-7c1" not found in PATH`}},
		{name: "stdio command found, nothing probed", yaml: "sources: [{id: u, kind: mcp, command: sh, args: [-c, \"true\"]}]\n", args: []string{},
			code: 0, want: []string{"valid"}, notWant: []string{"warning"}},
		{name: "stdio cwd missing", yaml: "sources: [{id: u, kind: mcp, command: sh, cwd: DIR/nowhere}]\n",
			code: 1, want: []string{"sources[0].cwd:", "is not a directory"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cleanEnv(t)
			dir := t.TempDir()
			for name, content := range tc.files {
				p := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for k, v := range tc.env {
				t.Setenv(k, strings.ReplaceAll(v, "DIR", dir))
			}
			body := tc.yaml
			if !strings.HasPrefix(body, "sources:") {
				body = "sources: [{id: u, kind: mcp, url: OPEN}]\n" + body
			}
			body = strings.NewReplacer("DIR", dir, "CLOSED", closedURL(t), "OPEN", openURL(t)).Replace(body)
			path := filepath.Join(dir, "tollgate.yaml")
			if err := os.WriteFile(path, []byte("schema: 1\n"+body), 0o644); err != nil {
				t.Fatal(err)
			}
			args := tc.args
			if args == nil {
				args = []string{"--offline"}
			}
			code, out := runCLI(append([]string{"validate", "--config", path}, args...)...)
			if code != tc.code {
				t.Errorf("exit %d, want %d:\n%s", code, tc.code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(out, w) {
					t.Errorf("output has %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestValidateCreatesNothing: validate probes the store's directory, it does not make it (nor
// the default data directory, nor a hash key file).
func TestValidateCreatesNothing(t *testing.T) {
	cleanEnv(t)
	state := os.Getenv("XDG_STATE_HOME")
	dir := t.TempDir()
	path := filepath.Join(dir, "tollgate.yaml")
	cfg := "schema: 1\nsources: [{id: u, kind: mcp, url: \"http://127.0.0.1:1/mcp\"}]\ntasks: {store: {type: file, path: " + dir + "/new/tasks.db}}\n"
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := runCLI("validate", "--offline", "--config", path); code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, d := range []string{dir, state} {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if e.Name() != "tollgate.yaml" {
				t.Errorf("validate left %s in %s", e.Name(), d)
			}
		}
	}
}

// TestNoConfigPointsToDemo: without a config file, run and validate say how to start: the
// demo, or the minimal config shown — which validates as printed.
func TestNoConfigPointsToDemo(t *testing.T) {
	cleanEnv(t)
	dir := t.TempDir()
	t.Chdir(dir)
	if _, err := os.Stat(config.SystemConfigFile); err == nil {
		t.Skipf("%s exists on this machine", config.SystemConfigFile)
	}
	for _, cmd := range []string{"run", "validate"} {
		code, out := runCLI(cmd)
		if code != 2 {
			t.Errorf("%s: exit %d, want 2:\n%s", cmd, code, out)
		}
		for _, w := range []string{"no config file found", "tollgate demo", "make demo", "save this as ./tollgate.yaml", "schema: 1", `url: "http://127.0.0.1:3000/mcp"`, "TOLLGATE_ADMIN_TOKEN"} {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output lacks %q:\n%s", cmd, w, out)
			}
		}
		if n := strings.Count(config.MinimalConfig, "\n"); n < 5 || n > 8 {
			t.Errorf("the minimal config has %d lines, want 5 to 8", n)
		}
	}
	// The config as printed (indented in the message) is the one that validates.
	_, out := runCLI("validate")
	var shown []string
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "    "); ok && !strings.HasPrefix(rest, "export ") && !strings.HasPrefix(rest, "tollgate ") {
			shown = append(shown, rest)
		}
	}
	if err := os.WriteFile("tollgate.yaml", []byte(strings.Join(shown, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(config.EnvAdminToken, "0123456789abcdef-admin")
	if code, out := runCLI("validate", "--offline"); code != 0 || strings.Contains(out, "warning") {
		t.Errorf("the minimal config as shown: exit %d:\n%s", code, out)
	}
}
