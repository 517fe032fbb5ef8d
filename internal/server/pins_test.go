package server

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

// TestNewRefusesBadPinFile: with governance.pins.mode file, a pin file that does not parse or
// whose digest is not its definition's stops the start with an error naming the file.
func TestNewRefusesBadPinFile(t *testing.T) {
	const def = `{"name":"deploy","description":"Deploys."}`
	for name, tc := range map[string]struct{ file, want string }{
		"garbage":  {`{"version":1,"tools":[`, "not a pin file"},
		"unknown":  {`{"version":1,"tools":[],"pins":[]}`, "unknown field"},
		"mismatch": {`{"version":1,"tools":[{"tool":"deploy","digest":"sha256:00","definition":` + def + `}]}`, "digest mismatch"},
		"missing":  {"", "no such file"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.file != "" {
				if err := os.WriteFile(filepath.Join(dir, "pins.json"), []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			yaml := "schema: 1\nsources:\n  - {id: upstream, kind: mcp, url: \"http://127.0.0.1:1/mcp\"}\n" +
				"server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\"}\n" +
				"governance: {pins: {mode: file, file: pins.json}}\n" +
				"tasks: {store: {type: file, path: \"" + filepath.Join(dir, "tasks.db") + "\"}}\n" +
				"audit: {path: \"" + filepath.Join(dir, "audit.log") + "\"}\n"
			env := func(k string) (string, bool) {
				if k == config.EnvDataDir {
					return dir, true
				}
				return "", false
			}
			cfg, err := config.Parse([]byte(yaml), filepath.Join(dir, "tollgate.yaml"), env)
			if err != nil {
				t.Fatal(err)
			}
			s, err := New(cfg, Options{LookupEnv: env, Logger: slog.New(slog.DiscardHandler)})
			if err == nil {
				t.Fatalf("New started with a bad pin file (%v)", s)
			}
			if !strings.Contains(err.Error(), "governance.pins.file") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name the pin file and %q", err, tc.want)
			}
		})
	}
}

// TestPinsWorkflowInUse: with pins on, governance.pins.workflow is a workflow in use (its
// destination is probed and its health shown on /readyz), even when no rule sends calls to it.
func TestPinsWorkflowInUse(t *testing.T) {
	c := &config.Config{}
	c.Governance.Defaults.Action = config.ActionForward
	c.Governance.Pins = config.Pins{Mode: config.PinsTrustFirst, Workflow: "tools"}
	if got := usedWorkflows(c); len(got) != 1 || got[0] != "tools" {
		t.Fatalf("usedWorkflows with pins on = %v, want [tools]", got)
	}
	c.Governance.Pins.Mode = config.PinsOff
	if got := usedWorkflows(c); len(got) != 0 {
		t.Fatalf("usedWorkflows with pins off = %v, want none", got)
	}
}
