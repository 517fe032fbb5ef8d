package config

import (
	"slices"
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
