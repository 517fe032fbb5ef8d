package server

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store/storetest"
)

// TestOpenStoreCorrupt: a corrupt store file used to make bbolt panic at start (exit 2, a
// crash loop with both listeners down). Under auto it is moved aside, kept byte for byte, and
// Tollgate runs on memory with a warning for /readyz; an explicit file store fails with a
// clear error instead of a panic, leaving the file where it is.
func TestOpenStoreCorrupt(t *testing.T) {
	for _, typ := range []string{config.StoreAuto, config.StoreFile} {
		t.Run(typ, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, config.DefaultStoreFileName)
			storetest.WriteCorruptStore(t, path, 300)
			corrupt, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			cfg := &config.Config{Sources: []config.Source{{URL: "http://127.0.0.1:1/mcp"}}}
			cfg.Tasks.Store = config.Store{Type: typ, Path: path}
			var logs bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&logs, nil))
			var got *openedStore
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("openStore panicked: %v", p)
					}
				}()
				got, err = openStore(cfg, func(string) (string, bool) { return "", false }, log)
			}()

			if typ == config.StoreFile {
				if err == nil {
					got.Close()
					t.Fatal("an explicit corrupt file store opened")
				}
				if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), "move the file aside") {
					t.Errorf("error %q: want ErrCorrupt and what to do", err)
				}
				if _, err := os.Stat(path); err != nil {
					t.Errorf("explicit store file moved: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer got.Close()
			if got.cfg.Type != config.StoreMemory || !strings.Contains(got.warning, "corrupt") || !strings.Contains(got.warning, "will not survive a restart") {
				t.Errorf("store %+v, warning %q: want memory with a corrupt warning", got.cfg, got.warning)
			}
			if !strings.Contains(logs.String(), `"level":"WARN","msg":"task store: MEMORY ONLY"`) {
				t.Errorf("no WARN:\n%s", logs.String())
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("corrupt file still at %s: %v", path, err)
			}
			aside, _ := filepath.Glob(path + ".corrupt-*")
			if len(aside) != 1 {
				t.Fatalf("moved-aside files: %v", aside)
			}
			if b, err := os.ReadFile(aside[0]); err != nil || !bytes.Equal(b, corrupt) {
				t.Errorf("the file kept for inspection differs from the corrupt one (%v)", err)
			}
			if !strings.Contains(got.warning, aside[0]) {
				t.Errorf("warning does not name %s: %q", aside[0], got.warning)
			}
		})
	}
}
