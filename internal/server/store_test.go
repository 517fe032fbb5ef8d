package server

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

// TestOpenStore: which backend each tasks.store setting and environment yields, and why.
func TestOpenStore(t *testing.T) {
	dir := t.TempDir()
	notADir := filepath.Join(dir, "plain-file")
	if err := os.WriteFile(notADir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	locked := filepath.Join(dir, "locked")
	held, err := store.OpenFile(filepath.Join(locked, config.DefaultStoreFileName))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	const upURL = "http://127.0.0.1:3000/mcp"

	tests := []struct {
		name     string
		store    config.Store
		env      map[string]string
		wantType string
		wantPath string // "" = do not check
		warn     bool
		err      bool
	}{
		{name: "explicit memory", store: config.Store{Type: config.StoreMemory}, env: map[string]string{config.EnvDataDir: dir},
			wantType: config.StoreMemory},
		{name: "auto in the data directory", store: config.Store{Type: config.StoreAuto, Path: filepath.Join(dir, "dd", config.DefaultStoreFileName)},
			env: map[string]string{config.EnvDataDir: filepath.Join(dir, "dd")}, wantType: config.StoreFile, wantPath: filepath.Join(dir, "dd", config.DefaultStoreFileName)},
		{name: "auto in the XDG state directory, named after the upstream", store: config.Store{Type: config.StoreAuto},
			env:      map[string]string{"XDG_STATE_HOME": filepath.Join(dir, "xdg"), "HOME": filepath.Join(dir, "home")},
			wantType: config.StoreFile, wantPath: filepath.Join(dir, "xdg", "tollgate", "tasks-") /* prefix */},
		{name: "auto in ~/.local/state without XDG_STATE_HOME", store: config.Store{Type: config.StoreAuto},
			env: map[string]string{"HOME": filepath.Join(dir, "home")}, wantType: config.StoreFile, wantPath: filepath.Join(dir, "home", ".local", "state", "tollgate", "tasks-")},
		{name: "auto, data directory not writable: memory, loudly", store: config.Store{Type: config.StoreAuto, Path: filepath.Join(notADir, config.DefaultStoreFileName)},
			env: map[string]string{config.EnvDataDir: notADir}, wantType: config.StoreMemory, warn: true},
		{name: "auto, store file locked by another process: memory, loudly", store: config.Store{Type: config.StoreAuto, Path: filepath.Join(locked, config.DefaultStoreFileName)},
			env: map[string]string{config.EnvDataDir: locked}, wantType: config.StoreMemory, warn: true},
		{name: "explicit file that cannot be opened fails", store: config.Store{Type: config.StoreFile, Path: filepath.Join(notADir, "x.db")}, err: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{Sources: []config.Source{{URL: upURL}}}
			cfg.Tasks.Store = tc.store
			var logs bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&logs, nil))
			got, err := openStore(cfg, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }, log)
			if tc.err {
				if err == nil {
					got.Close()
					t.Fatal("opened, want an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer got.Close()
			if got.cfg.Type != tc.wantType || !strings.HasPrefix(got.cfg.Path, tc.wantPath) {
				t.Errorf("store %+v, want type %s at %s…", got.cfg, tc.wantType, tc.wantPath)
			}
			if _, isFile := got.Store.(*store.File); isFile != (tc.wantType == config.StoreFile) {
				t.Errorf("backend %T for type %s", got.Store, tc.wantType)
			}
			if (got.warning != "") != tc.warn || strings.Contains(logs.String(), `"level":"WARN"`) != tc.warn {
				t.Errorf("warning %q, want one: %v; log:\n%s", got.warning, tc.warn, logs.String())
			}
			if !strings.Contains(logs.String(), `"why":`) {
				t.Errorf("the log does not say why this store:\n%s", logs.String())
			}
		})
	}
}

// Two upstreams never share a default store file; one upstream always gets the same one.
func TestDefaultStoreName(t *testing.T) {
	cfg := func(url string) *config.Config { return &config.Config{Sources: []config.Source{{URL: url}}} }
	a, b := defaultStoreName(cfg("http://127.0.0.1:3000/mcp")), defaultStoreName(cfg("http://127.0.0.1:3001/mcp"))
	if a == b || a != defaultStoreName(cfg("http://127.0.0.1:3000/mcp")) || !strings.HasSuffix(a, ".db") {
		t.Errorf("names %q, %q", a, b)
	}
}
