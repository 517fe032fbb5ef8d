package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

const backupRules = `governance:
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve, approval: default}
approval:
  default: {destination: {type: console}, timeout: 10m, on_timeout: deny}
`

// heldTaskID reads the tg_ task id from a task-augmented tools/call reply (JSON or one SSE event).
func heldTaskID(body []byte) string {
	if i := bytes.Index(body, []byte("data: ")); i >= 0 {
		body = body[i+len("data: "):]
		if j := bytes.IndexByte(body, '\n'); j >= 0 {
			body = body[:j]
		}
	}
	var m map[string]any
	if json.Unmarshal(body, &m) != nil {
		return ""
	}
	id, _ := testkit.Dig(m, "result", "task", "taskId").(string)
	return id
}

// waitRan polls one approval until its call ran: completed, or failed with the tool's error
// result (the demo refuses to delete a user it does not have); the upstream counts each run.
func waitRan(t *testing.T, g *testkit.Gateway, id string) {
	t.Helper()
	var last any
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		st, v := g.AdminRequest(t, "GET", "/api/v1/approvals/"+id, testkit.AdminToken, "")
		if st == 200 && (v["state"] == "completed" || v["state"] == "failed") {
			return
		}
		last = v["state"]
	}
	t.Fatalf("task %s: state %v, want completed or failed within 15s", id, last)
}

// TestBackupUnderLoadRestores: `tollgate backup` copies the running gateway's file store while
// a client keeps creating held calls; the copy, with the store's key file, restores into a
// fresh process where every call acknowledged before the backup started is pending and
// approvable, the calls completed before it stay completed, and nothing runs twice (the
// upstream counts every execution).
func TestBackupUnderLoadRestores(t *testing.T) {
	bin := buildBinary(t)
	d, upURL := testkit.StartDemo(t)
	a := testkit.StartGateway(t, testkit.BasicConfig(upURL, backupRules), nil, nil)
	a.WaitReady(t)
	c := a.NewClient(t)

	var pending []string
	for i := range 5 {
		pending = append(pending, c.CallTask(i+1, "delete_user", fmt.Sprintf(`{"user_id":"u-%d"}`, i)))
	}
	done := pending[:2]
	pending = pending[2:]
	for _, id := range done {
		if st, v := a.AdminRequest(t, "POST", "/api/v1/approvals/"+id+"/approve", testkit.AdminToken, `{}`); st != 200 {
			t.Fatalf("approve %s: %d %v", id, st, v)
		}
		waitRan(t, a, id)
	}

	// Load: a second client creates held calls until the backup is over.
	var (
		mu    sync.Mutex
		acked []string
		errs  []error
	)
	stop, loadDone := make(chan struct{}), make(chan struct{})
	load := a.NewClient(t)
	go func() {
		defer close(loadDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			r, err := load.TryPost(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"delete_user","arguments":{"user_id":"load-%d"},"task":{"ttl":600000}}}`, i+1, i))
			id := heldTaskID(r.Body)
			mu.Lock()
			if err != nil || !strings.HasPrefix(id, "tg_") {
				errs = append(errs, fmt.Errorf("call %d: %v %s", i, err, r.Body))
			} else {
				acked = append(acked, id)
			}
			mu.Unlock()
		}
	}()
	// Wait for some load, then take the backup while it goes on.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the load created %d calls in 10s", n)
		}
	}
	mu.Lock()
	before := append(append([]string{}, pending...), acked...)
	mu.Unlock()
	out := filepath.Join(t.TempDir(), "backup.db")
	cmd := exec.Command(bin, "backup", "--out", out, "--url", a.Admin)
	cmd.Env = append(os.Environ(), "TOLLGATE_ADMIN_TOKEN="+testkit.AdminToken)
	res, err := cmd.CombinedOutput()
	close(stop)
	<-loadDone
	if err != nil {
		t.Fatalf("tollgate backup: %v\n%s", err, res)
	}
	t.Logf("tollgate backup: %s", bytes.TrimSpace(res))
	mu.Lock()
	if len(errs) > 0 {
		t.Errorf("load errors: %v", errs[0])
	}
	t.Logf("%d calls held before the backup started, %d created during the load in all", len(before), len(acked))
	mu.Unlock()

	// Restore into a fresh process: the copy as tasks.db, the key file beside it. The old
	// process is gone first, as after losing its host.
	a.Stop()
	dir := t.TempDir()
	copyFile(t, out, filepath.Join(dir, "tasks.db"))
	copyFile(t, filepath.Join(a.Dir, "data", "tasks.db.key"), filepath.Join(dir, "tasks.db.key"))
	b := testkit.StartGateway(t, testkit.BasicConfig(upURL, backupRules), map[string]string{"TOLLGATE_DATA_DIR": dir}, nil)
	b.WaitReady(t)

	st, list := b.AdminRequest(t, "GET", "/api/v1/approvals?status=pending&limit=1000", testkit.AdminToken, "")
	if st != 200 {
		t.Fatalf("list after restore: %d %v", st, list)
	}
	restored := map[string]bool{}
	items, _ := list["approvals"].([]any)
	for _, it := range items {
		id, _ := it.(map[string]any)["taskId"].(string)
		restored[id] = true
	}
	for _, id := range before {
		if !restored[id] {
			t.Errorf("pending call %s, acknowledged before the backup started, is not pending after the restore", id)
		}
	}
	for _, id := range done {
		waitRan(t, b, id)
	}
	// Every restored pending call is approvable and runs once.
	for id := range restored {
		if st, v := b.AdminRequest(t, "POST", "/api/v1/approvals/"+id+"/approve", testkit.AdminToken, `{"reason":"after restore"}`); st != 200 {
			t.Errorf("approve %s after restore: %d %v", id, st, v)
		}
	}
	for id := range restored {
		waitRan(t, b, id)
	}
	if got, want := d.Calls("delete_user"), len(done)+len(restored); got != want {
		t.Errorf("delete_user ran %d times, want %d (%d before the backup, %d restored and approved): something ran twice or not at all", got, want, len(done), len(restored))
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestBackupAuth: only the approver admin may copy the store (it holds unredacted arguments
// and results); another approver's token is 403, none 401, and a memory store has nothing to
// copy (409).
func TestBackupAuth(t *testing.T) {
	_, upURL := testkit.StartDemo(t)
	rules := backupRules + "approvers: [{name: alice, token_env: ALICE_TOKEN}]\n"
	env := map[string]string{"ALICE_TOKEN": "alice-backup-token-0123"}
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, rules), env, nil)
	get := func(g *testkit.Gateway, token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, g.Admin+"/api/v1/backup", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := testkit.HTTPClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(b)
	}
	if st, body := get(g, ""); st != http.StatusUnauthorized {
		t.Errorf("no token: %d %s", st, body)
	}
	if st, body := get(g, "alice-backup-token-0123"); st != http.StatusForbidden || !strings.Contains(body, "not_authorized") {
		t.Errorf("alice: %d %s", st, body)
	}
	if st, body := get(g, testkit.AdminToken); st != http.StatusOK || len(body) < 4096 {
		t.Errorf("admin: %d, %d bytes", st, len(body))
	}
	mem := testkit.StartGateway(t, testkit.BasicConfig(upURL, backupRules+"tasks: {store: {type: memory}}\n"), nil, nil)
	if st, body := get(mem, testkit.AdminToken); st != http.StatusConflict || !strings.Contains(body, "no_file_store") {
		t.Errorf("memory store: %d %s", st, body)
	}
}
