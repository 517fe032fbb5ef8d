package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tollgate-mcp/tollgate/internal/audit"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type okExec struct{}

func (okExec) Execute(context.Context, *tasks.Task) (json.RawMessage, *jsonrpc.Error) {
	return json.RawMessage(`{"content":[{"type":"text","text":"deleted"}]}`), nil
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestWithTaskManager drives the real tasks.Manager (memory store) through the CLI and the
// HTTP API, with the audit log subscribed, end to end on loopback.
func TestWithTaskManager(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m := tasks.NewManager(store.NewMemory(), okExec{}, nil, tasks.Options{Workflow: testWorkflows})
	defer m.Close()
	var auditOut lockedBuffer
	al := audit.New(&auditOut)
	defer m.Subscribe(al.OnTaskChange)()

	args := json.RawMessage(`{"user":"bob","password":"` + secretPW + `"}`)
	create := func() *tasks.Task {
		tk, err := m.Create(ctx, tasks.CreateRequest{
			Owner: sessionID, SessionID: "7f3c9a1e5b2d4c6a8e0f", RequestedBy: "carol",
			Tool: "delete_user", Arguments: args, Workflow: "default",
		})
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	t1, t2 := create(), create()

	srv := httptest.NewServer(NewHandler(m, testAuth(), Options{Workflow: testWorkflows}))
	defer srv.Close()
	cli := func(token string, args ...string) (int, string, string) {
		env := map[string]string{"TOLLGATE_ADMIN_URL": srv.URL, "TOLLGATE_ADMIN_TOKEN": token}
		var out, errb bytes.Buffer
		code := RunCLI(ctx, args, &out, &errb, func(k string) string { return env[k] })
		return code, out.String(), errb.String()
	}

	steps := []struct {
		name    string
		token   string
		args    []string
		code    int
		contain string
	}{
		{"list shows both", aliceToken, []string{"list"}, 0, t2.ID},
		{"show redacts", aliceToken, []string{"show", t1.ID}, 0, `"password": "[REDACTED]"`},
		{"requester cannot approve", carolToken, []string{"approve", t1.ID}, 1, "HTTP 403"},
		{"alice approves", aliceToken, []string{"approve", t1.ID, "--reason", "ticket 42"}, 0, "approved " + t1.ID},
		{"bob is too late", bobToken, []string{"reject", t1.ID, "--reason", "no"}, 1, "already decided: approved by alice"},
		{"bob rejects the other", bobToken, []string{"reject", t2.ID, "--reason", "not today"}, 0, "rejected " + t2.ID},
		{"unknown id", aliceToken, []string{"show", "tg_00000000-0000-4000-8000-000000000000"}, 1, "not found"},
		{"approved list", aliceToken, []string{"list", "--status", "approved"}, 0, t1.ID},
	}
	for _, s := range steps {
		code, out, errOut := cli(s.token, s.args...)
		if code != s.code || !strings.Contains(out+errOut, s.contain) {
			t.Fatalf("%s: exit %d (want %d), output lacks %q?\nstdout: %s\nstderr: %s", s.name, code, s.code, s.contain, out, errOut)
		}
	}

	// Approval executes at once (docs/contract.md §3); rejection answers -32007.
	res, rpcErr, err := m.Result(ctx, sessionID, t1.ID)
	if err != nil || rpcErr != nil || !bytes.Contains(res, []byte("deleted")) {
		t.Fatalf("t1 result = %s, %v, %v", res, rpcErr, err)
	}
	if _, rpcErr, err = m.Result(ctx, sessionID, t2.ID); err != nil || rpcErr == nil || rpcErr.Code != jsonrpc.CodeApprovalRejected {
		t.Fatalf("t2 result error = %v, %v", rpcErr, err)
	}

	got := auditOut.String()
	var kinds []string
	for _, line := range strings.Split(strings.TrimSpace(got), "\n") {
		var e audit.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		kinds = append(kinds, e.TaskID+"/"+string(e.Kind)+":"+e.Actor)
	}
	joined := strings.Join(kinds, ",")
	for _, want := range []string{
		t1.ID + "/created:carol", t1.ID + "/approved:alice", t1.ID + "/executed:", t2.ID + "/rejected:bob",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("audit events %s lack %s", joined, want)
		}
	}
	for _, secret := range []string{secretPW, sessionID, "7f3c9a1e5b2d4c6a8e0f", aliceToken, bobToken, carolToken} {
		if strings.Contains(got, secret) {
			t.Errorf("audit log leaks %q", secret)
		}
	}
}
