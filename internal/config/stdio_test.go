package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestStdioSource(t *testing.T) {
	env := envMap(map[string]string{"PATH": "/bin", "HOME": "/home/t", "GH": "secret", "OTHER_SECRET": "admin-secret"})
	c, err := Parse([]byte(`schema: 1
sources:
  - id: gh
    kind: mcp
    command: server-github
    args: ["--read-only"]
    env: {GITHUB_TOKEN: "${GH}", HOME: /srv}
`), "", env)
	if err != nil {
		t.Fatal(err)
	}
	s := c.Sources[0]
	if !s.Stdio() || s.MaxProcesses != DefaultMaxProcesses || s.IdleTimeout.D() != 10*time.Minute {
		t.Fatalf("defaults: %+v", s)
	}
	// PATH and HOME are inherited, env wins, nothing else of Tollgate's environment passes.
	want := []string{"GITHUB_TOKEN=secret", "HOME=/srv", "PATH=/bin"}
	if got := s.ProcessEnv(env); !slices.Equal(got, want) {
		t.Fatalf("ProcessEnv = %v, want %v", got, want)
	}
}

func TestRestartRequiredStdio(t *testing.T) {
	base := func() *Config {
		return &Config{Sources: []Source{{ID: "s", Kind: SourceKindMCP, Command: "a", MaxProcesses: 1}}}
	}
	old, nw := base(), base()
	nw.Sources[0].Args = []string{"x"}
	nw.Sources[0].Env = map[string]string{"A": "b"}
	nw.Sources[0].MaxProcesses = 2
	if got, want := RestartRequired(old, nw), []string{"sources[0].args", "sources[0].env", "sources[0].max_processes"}; !slices.Equal(got, want) {
		t.Fatalf("RestartRequired = %v, want %v", got, want)
	}
}

func TestUseCommand(t *testing.T) {
	env := envMap(map[string]string{"GH": "tok"})
	t.Run("no file", func(t *testing.T) {
		c, err := Parse([]byte(CommandConfig), "", env)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.UseCommand([]string{"npx", "-y", "server"}, []string{"write_*"}, []string{"rm_*"}, []string{"GH"}, env); err != nil {
			t.Fatal(err)
		}
		s := c.Sources[0]
		if s.Command != "npx" || !slices.Equal(s.Args, []string{"-y", "server"}) || s.Env["GH"] != "tok" {
			t.Fatalf("source %+v", s)
		}
		r := c.Governance.Rules
		if len(r) != 2 || r[0].Match != "rm_*" || r[0].Action != ActionDeny || r[1].Match != "write_*" || r[1].Action != ActionApprove {
			t.Fatalf("rules %+v", r)
		}
		if c.Governance.Defaults.Action != ActionForward {
			t.Fatalf("default action %q", c.Governance.Defaults.Action)
		}
	})
	t.Run("file with a url", func(t *testing.T) {
		c, err := Parse([]byte("schema: 1\nsources: [{id: up, kind: mcp, url: \"http://127.0.0.1:1/mcp\"}]\ngovernance: {rules: [{match: \"*\", action: deny}]}\n"), "", env)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.UseCommand([]string{"server"}, []string{"a"}, nil, nil, env); err != nil {
			t.Fatal(err)
		}
		if s := c.Sources[0]; s.URL != "" || s.Command != "server" || s.ID != "up" || s.MaxProcesses != DefaultMaxProcesses {
			t.Fatalf("source %+v", s)
		}
		if r := c.Governance.Rules; len(r) != 2 || r[0].Match != "a" || r[1].Match != "*" {
			t.Fatalf("shorthand rules must come first: %+v", r)
		}
	})
	t.Run("errors", func(t *testing.T) {
		c, _ := Parse([]byte(CommandConfig), "", env)
		if err := c.UseCommand(nil, nil, nil, nil, env); err == nil {
			t.Error("no command accepted")
		}
		if err := c.UseCommand([]string{"x"}, nil, nil, []string{"UNSET_VAR"}, env); err == nil || !strings.Contains(err.Error(), "UNSET_VAR") {
			t.Errorf("--env of an unset variable: %v", err)
		}
	})
}

// TestRunAs: sources[].run_as names a numeric user and group, both; for a command only.
func TestRunAs(t *testing.T) {
	env := envMap(map[string]string{"PATH": "/bin"})
	for _, tc := range []struct{ src, err string }{
		{"command: srv\n    run_as: {uid: 65533, gid: 65533}", ""},
		{"command: srv\n    run_as: {uid: 65533}", "sources[0].run_as.gid: must be set"},
		{"command: srv\n    run_as: {uid: -1, gid: 5}", "sources[0].run_as.uid: must be set, between 1"},
		{"url: http://127.0.0.1:1/mcp\n    run_as: {uid: 1, gid: 1}", "sources[0].run_as: applies to a command"},
	} {
		c, err := Parse([]byte("schema: 1\nsources:\n  - id: s\n    kind: mcp\n    "+tc.src+"\n"), "", env)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.src, err)
		case tc.err == "" && (c.Sources[0].RunAs.UID != 65533 || c.Sources[0].RunAs.GID != 65533):
			t.Errorf("%s: parsed %+v", tc.src, c.Sources[0].RunAs)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want %q", tc.src, err, tc.err)
		}
	}
}
