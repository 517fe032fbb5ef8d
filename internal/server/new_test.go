package server

import (
	"log/slog"
	"net"
	"path/filepath"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestNewCleansUpOnFailure: when New fails part-way (here the admin address is taken), what
// it had opened is closed again: the MCP listener's port and the store file's lock are free.
func TestNewCleansUpOnFailure(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	mcpAddr, storePath := freeAddr(t), filepath.Join(dir, "tasks.db")
	yaml := "schema: 1\nsources:\n  - {id: upstream, kind: mcp, url: \"http://127.0.0.1:1/mcp\"}\n" +
		"server: {listen: \"" + mcpAddr + "\", admin_listen: \"" + busy.Addr().String() + "\"}\n" +
		"tasks: {store: {type: file, path: \"" + storePath + "\"}}\n" +
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
		t.Fatalf("New succeeded with the admin address taken (%v)", s)
	}
	ln, err := net.Listen("tcp", mcpAddr)
	if err != nil {
		t.Fatalf("the MCP listener of the failed New is still open: %v", err)
	}
	ln.Close()
	st, err := store.OpenFile(storePath)
	if err != nil {
		t.Fatalf("the store of the failed New is still open: %v", err)
	}
	st.Close()
}
