package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

// TestTwoApprovers drives the real task manager with min_approvals 2 through the API and the
// CLI: alice's approval is 200 with the call still awaiting approval ("1 of 2"), her second
// is 409 already_approved, show prints "1 of 2 (alice)", bob's approval approves it.
func TestTwoApprovers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wfs := func(string) (config.Workflow, bool) { return config.Workflow{MinApprovals: 2}, true }
	m := tasks.NewManager(store.NewMemory(), okExec{}, nil, tasks.Options{Workflow: wfs})
	defer m.Close()
	tk, err := m.Create(ctx, tasks.CreateRequest{Owner: sessionID, RequestedBy: "carol", Tool: "delete_user",
		Arguments: json.RawMessage(`{}`), Workflow: "default"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewHandler(m, testAuth(), Options{Workflow: wfs}))
	defer srv.Close()

	post := func(token, verb string) (int, []byte) {
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/api/v1/approvals/"+tk.ID+"/"+verb, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.Bytes()
	}

	code, body := post(aliceToken, "approve")
	var v View
	if err := json.Unmarshal(body, &v); err != nil || code != 200 {
		t.Fatalf("alice: %d %s", code, body)
	}
	if v.State != "awaiting_approval" || v.RequiredApprovals != 2 || len(v.Approvals) != 1 || v.Approvals[0].By != "alice" ||
		v.Decision != nil || !strings.Contains(v.StatusMessage, "1 of 2 approvals") {
		t.Errorf("after alice: %+v", v)
	}

	code, body = post(aliceToken, "approve")
	var er ErrorResponse
	if err := json.Unmarshal(body, &er); err != nil || code != http.StatusConflict || er.Error != "already_approved" ||
		er.Approval == nil || len(er.Approval.Approvals) != 1 {
		t.Errorf("alice again: %d %s", code, body)
	}

	env := map[string]string{"TOLLGATE_ADMIN_URL": srv.URL, "TOLLGATE_ADMIN_TOKEN": aliceToken}
	var out, errb bytes.Buffer
	if rc := RunCLI(ctx, []string{"show", tk.ID}, &out, &errb, func(k string) string { return env[k] }); rc != 0 ||
		!strings.Contains(out.String(), "Approvals:") || !strings.Contains(out.String(), "1 of 2 (alice)") {
		t.Errorf("show: exit %d\n%s%s", rc, out.String(), errb.String())
	}

	env["TOLLGATE_ADMIN_TOKEN"] = bobToken
	out.Reset()
	if rc := RunCLI(ctx, []string{"approve", tk.ID}, &out, &errb, func(k string) string { return env[k] }); rc != 0 ||
		!strings.Contains(out.String(), "approved "+tk.ID) || !strings.Contains(out.String(), "2 of 2 (alice, bob)") {
		t.Errorf("bob approve: exit %d\n%s%s", rc, out.String(), errb.String())
	}
	if _, rpcErr, err := m.Result(ctx, sessionID, tk.ID); err != nil || rpcErr != nil {
		t.Errorf("result: %v, %v", rpcErr, err)
	}
}

// TestCLIVoteLine: approve answers "approval recorded … 1 of 2" while the call still waits.
func TestCLIVoteLine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	wfs := func(string) (config.Workflow, bool) { return config.Workflow{MinApprovals: 2}, true }
	m := tasks.NewManager(store.NewMemory(), okExec{}, nil, tasks.Options{Workflow: wfs})
	defer m.Close()
	tk, err := m.Create(ctx, tasks.CreateRequest{Owner: sessionID, Tool: "delete_user", Workflow: "default"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewHandler(m, testAuth(), Options{Workflow: wfs}))
	defer srv.Close()
	env := map[string]string{"TOLLGATE_ADMIN_URL": srv.URL, "TOLLGATE_ADMIN_TOKEN": aliceToken}
	var out, errb bytes.Buffer
	rc := RunCLI(ctx, []string{"approve", tk.ID}, &out, &errb, func(k string) string { return env[k] })
	if rc != 0 || !strings.HasPrefix(out.String(), "approval recorded for "+tk.ID+" (delete_user): 1 of 2 (alice); waiting for another approver\n") {
		t.Errorf("exit %d\n%s%s", rc, out.String(), errb.String())
	}
}
