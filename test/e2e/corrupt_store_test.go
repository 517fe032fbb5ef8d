package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/tasks/store/storetest"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// TestCorruptStoreFallsBackToMemory: two corrupted pages of tasks.db used to make Tollgate
// panic at start (a crash loop, both listeners down). Under the default store (auto) the file
// is moved aside for inspection and Tollgate serves on memory, saying so in /readyz and the log.
func TestCorruptStoreFallsBackToMemory(t *testing.T) {
	_, upURL := testkit.StartDemo(t)
	dataDir := t.TempDir()
	storetest.WriteCorruptStore(t, filepath.Join(dataDir, "tasks.db"), 300)
	env := map[string]string{"TOLLGATE_DATA_DIR": dataDir}
	for k, v := range approverEnv {
		env[k] = v
	}
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, approvalRules), env, nil)
	g.WaitReady(t)
	resp, err := testkit.HTTPClient.Get(g.Admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "degraded: tasks are kept in memory") ||
		!strings.Contains(string(body), "is corrupt and was moved aside to "+filepath.Join(dataDir, "tasks.db.corrupt-")) {
		t.Errorf("/readyz %d:\n%s", resp.StatusCode, body)
	}
	if aside, _ := filepath.Glob(filepath.Join(dataDir, "tasks.db.corrupt-*")); len(aside) != 1 {
		t.Errorf("files kept for inspection: %v", aside)
	}
	if !strings.Contains(g.Logs.String(), `"level":"WARN","msg":"task store: MEMORY ONLY"`) {
		t.Errorf("no WARN about the memory store:\n%s", g.Logs.String())
	}
	g.NewClient(t).CallTask(1, "delete_user", `{"user_id":"u-corrupt"}`) // and it holds calls for approval
}

// TestCorruptExplicitFileStoreExits: with tasks.store.type file, a corrupt store stops the real
// binary with a clear error and exit status 1 — not a bbolt panic (exit 2).
func TestCorruptExplicitFileStoreExits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "tasks.db")
	storetest.WriteCorruptStore(t, path, 300)
	cfg := filepath.Join(dir, "tollgate.yaml")
	yaml := testkit.BasicConfig("http://127.0.0.1:1/mcp", "tasks:\n  store: {type: file, path: "+path+"}\n")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "--config", cfg)
	cmd.Env = append(os.Environ(), "TOLLGATE_LISTEN="+freeAddr(t), "TOLLGATE_ADMIN_LISTEN="+freeAddr(t))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		t.Fatalf("tollgate run: %v (want exit status 1)\n%s", err, out.String())
	}
	// A Go panic prints "panic: …" at the start of a line and a goroutine trace.
	if s := out.String(); strings.HasPrefix(s, "panic: ") || strings.Contains(s, "\npanic: ") || strings.Contains(s, "goroutine ") ||
		!strings.Contains(s, "the store file is corrupt") || !strings.Contains(s, "move the file aside") {
		t.Errorf("output:\n%s", s)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("an explicit store file was moved: %v", err)
	}
}
