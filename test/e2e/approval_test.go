package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

const approvalRules = `governance:
  defaults: {action: forward}
  rules:
    - {match: "delete_*", action: approve}
    - {match: "list_*", action: approve, approval: quick}
    - {match: "read_*", action: approve, approval: autoapprove}
    - {match: "transfer_*", action: approve}
approval:
  default: {timeout: 10m, on_timeout: deny, redact_fields: [password]}
  quick: {timeout: 400ms, on_timeout: deny}
  autoapprove: {timeout: 400ms, on_timeout: approve}
approvers:
  - {name: alice, token_env: ALICE_TOKEN}
  - {name: bob, token_env: BOB_TOKEN}
`

var approverEnv = map[string]string{"ALICE_TOKEN": "alice-secret-token", "BOB_TOKEN": "bob-secret-token",
	// Replicas sharing a Redis store must share the arguments hash key.
	"TOLLGATE_ARGUMENT_HASH_KEY": "e2e-argument-hash-key-0123456789abcdef"}

// TestApprovalLifecycle: a held call waits, is not executed until approved, runs exactly once
// on approval, and tasks/result returns exactly the upstream's result with the related-task
// _meta; reject, cancel, on_timeout deny/approve and foreign sessions behave per contract.
func TestApprovalLifecycle(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, approvalRules), approverEnv, nil)
	g.WaitReady(t)
	a := g.NewClient(t)
	b := g.NewClient(t)

	t.Run("approve", func(t *testing.T) {
		a.T = t
		tid := a.CallTask(1, "delete_user", `{"user_id":"u-002","password":"hunter2"}`)
		m := a.TaskRPC(2, "tasks/get", tid).Message(t)
		// The status says a human decides, and where (docs/contract.md §2).
		waiting := "Awaiting approval by a human (workflow default): approve in the console at " + g.Admin + "/approvals or with `tollgate approvals approve " + tid + "`"
		if testkit.Dig(m, "result", "status") != "working" || testkit.Dig(m, "result", "statusMessage") != waiting || testkit.Dig(m, "result", "pollInterval") == nil {
			t.Errorf("tasks/get while waiting: %v", m)
		}
		time.Sleep(100 * time.Millisecond)
		if n := d.Calls("delete_user"); n != 0 {
			t.Fatalf("upstream called %d times before approval", n)
		}
		// The approver sees the request, redacted.
		st, view := g.AdminRequest(t, "GET", "/api/v1/approvals/"+tid, "alice-secret-token", "")
		if st != 200 || testkit.Dig(view, "arguments", "password") != "[REDACTED]" || testkit.Dig(view, "arguments", "user_id") != "u-002" {
			t.Errorf("approval view %d: %v", st, view)
		}
		if st, _ := g.AdminRequest(t, "GET", "/api/v1/approvals", "", ""); st != 401 {
			t.Errorf("no token: %d", st)
		}
		if st, _ := g.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/approve", "alice-secret-token", `{"reason":"ticket 42"}`); st != 200 {
			t.Fatalf("approve: %d", st)
		}
		st, late := g.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/reject", "bob-secret-token", `{"reason":"too late"}`)
		if st != 409 || testkit.Dig(late, "approval", "decision", "by") != "alice" {
			t.Errorf("late decision: %d %v", st, late)
		}
		// Foreign session: as if it did not exist.
		if code, _ := testkit.ErrorOf(b.TaskRPC(3, "tasks/result", tid).Message(t)); code != -32602 {
			t.Errorf("foreign tasks/result not -32602")
		}
		r := a.TaskRPC(4, "tasks/result", tid)
		res := r.ResponseBytes(t)
		var got map[string]any
		_ = json.Unmarshal(res, &got)
		if testkit.Dig(got, "result", "_meta", "io.modelcontextprotocol/related-task", "taskId") != tid {
			t.Errorf("related-task _meta missing: %s", res)
		}
		text, _ := json.Marshal(testkit.Dig(got, "result", "content"))
		if !strings.Contains(string(text), "u-002") {
			t.Errorf("result does not come from the upstream: %s", res)
		}
		if n := d.Calls("delete_user"); n != 1 {
			t.Errorf("upstream executions = %d, want 1", n)
		}
		if m := a.TaskRPC(5, "tasks/get", tid).Message(t); testkit.Dig(m, "result", "status") != "completed" {
			t.Errorf("final status %v", m)
		}
		if code, name := testkit.ErrorOf(a.TaskRPC(6, "tasks/cancel", tid).Message(t)); code != -32602 {
			t.Errorf("EC-SEP-008 cancel of terminal task: %v %s", code, name)
		}
	})

	t.Run("reject", func(t *testing.T) {
		a.T = t
		tid := a.CallTask(10, "delete_user", `{"user_id":"u-003"}`)
		if st, _ := g.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/reject", "bob-secret-token", `{"reason":"no"}`); st != 200 {
			t.Fatalf("reject: %d", st)
		}
		code, name := testkit.ErrorOf(a.TaskRPC(11, "tasks/result", tid).Message(t))
		if code != -32007 || name != "ApprovalRejected" {
			t.Errorf("rejected result: %v %q", code, name)
		}
		if m := a.TaskRPC(12, "tasks/get", tid).Message(t); testkit.Dig(m, "result", "status") != "failed" {
			t.Errorf("rejected status: %v", m)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		a.T = t
		tid := a.CallTask(20, "delete_user", `{"user_id":"u-004"}`)
		if m := a.TaskRPC(21, "tasks/cancel", tid).Message(t); testkit.Dig(m, "result", "status") != "cancelled" {
			t.Fatalf("cancel: %v", m)
		}
		if st, _ := g.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/approve", "alice-secret-token", `{}`); st != 409 {
			t.Errorf("approve after cancel: %d, want 409", st)
		}
		if m := a.TaskRPC(22, "tasks/get", tid).Message(t); testkit.Dig(m, "result", "status") != "cancelled" {
			t.Errorf("cancelled task changed: %v", m)
		}
	})

	t.Run("on_timeout deny", func(t *testing.T) {
		a.T = t
		before := d.Calls("list_users")
		tid := a.CallTask(30, "list_users", `{}`)
		code, name := testkit.ErrorOf(a.TaskRPC(31, "tasks/result", tid).Message(t))
		if code != -32008 || name != "ApprovalTimedOut" {
			t.Errorf("timed out: %v %q", code, name)
		}
		if d.Calls("list_users") != before {
			t.Errorf("timed-out call executed")
		}
	})

	t.Run("on_timeout approve", func(t *testing.T) {
		a.T = t
		tid := a.CallTask(40, "read_file", `{"path":"/etc/motd"}`)
		m := a.TaskRPC(41, "tasks/result", tid).Message(t)
		if m["result"] == nil {
			t.Fatalf("auto-approved call: %v", m)
		}
		if d.Calls("read_file") != 1 {
			t.Errorf("read_file executions = %d", d.Calls("read_file"))
		}
	})

	t.Run("unknown approver token", func(t *testing.T) {
		a.T = t
		// Self-approval needs a known requester identity: see TestIdentityHeader.
		tid := a.CallTask(50, "delete_user", `{"user_id":"u-005"}`)
		if st, _ := g.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/approve", "not-a-token", `{}`); st != 401 {
			t.Errorf("unknown token: %d", st)
		}
	})
}

// TestTaskStatusNotifications: notifications/tasks/status reach the owner's open stream only.
func TestTaskStatusNotifications(t *testing.T) {
	_, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, approvalRules), approverEnv, nil)
	g.WaitReady(t)
	a := g.NewClient(t)
	b := g.NewClient(t)

	open := func(session string) (<-chan string, func()) {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.MCP, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", session)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 100)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		return lines, func() { cancel(); resp.Body.Close() }
	}
	la, closeA := open(a.Session)
	defer closeA()
	lb, closeB := open(b.Session)
	defer closeB()
	// Both streams are attached: their headers arrived (open returned after Do).

	tid := a.CallTask(1, "delete_user", `{"user_id":"u-002"}`)
	if st, _ := g.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/approve", "alice-secret-token", `{}`); st != 200 {
		t.Fatal("approve failed")
	}
	deadline := time.After(5 * time.Second)
	completed := false
	for !completed {
		select {
		case l := <-la:
			if strings.Contains(l, "notifications/tasks/status") && strings.Contains(l, tid) && strings.Contains(l, `"completed"`) {
				completed = true
			}
		case <-deadline:
			t.Fatal("owner did not receive notifications/tasks/status completed")
		}
	}
	for {
		select {
		case l := <-lb:
			if strings.Contains(l, tid) {
				t.Fatalf("another session received the owner's task notification: %s", l)
			}
		default:
			return
		}
	}
}

// TestApprovalRace: 100 goroutines approve, reject, cancel and wait on the same tasks; each
// approved task executes exactly once at the real upstream.
func TestApprovalRace(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, approvalRules), approverEnv, nil)
	g.WaitReady(t)
	a := g.NewClient(t)

	const tasks = 10
	ids := make([]string, tasks)
	for i := range ids {
		// A distinct amount per task lets the upstream's ledger show which task ran how often.
		ids[i] = a.CallTask(200+i, "transfer_funds", fmt.Sprintf(`{"from_account":"acc-payroll","to_account":"acc-savings","amount":%d,"currency":"USD"}`, i+1))
	}
	var wg sync.WaitGroup
	outcomes := make([]map[int]int, 100)
	for w := 0; w < 100; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			outcomes[w] = map[int]int{}
			tid := ids[w%tasks]
			// Not the test's goroutine: failures are reported with t.Error, never t.Fatal.
			var err error
			c := &testkit.RPC{URL: g.MCP, Session: a.Session}
			switch w % 4 {
			case 0:
				var st int
				st, _, err = g.TryAdminRequest("POST", "/api/v1/approvals/"+tid+"/approve", "alice-secret-token", `{}`)
				outcomes[w][st]++
			case 1:
				var st int
				st, _, err = g.TryAdminRequest("POST", "/api/v1/approvals/"+tid+"/reject", "bob-secret-token", `{"reason":"race"}`)
				outcomes[w][st]++
			case 2:
				_, err = c.TryTaskRPC(1000+w, "tasks/cancel", tid)
			case 3:
				_, err = c.TryTaskRPC(2000+w, "tasks/result", tid)
			}
			if err != nil {
				t.Error(err)
			}
		}(w)
	}
	wg.Wait()
	// Every task is decided or cancelled by now (each gets an approve and a cancel, or a reject
	// and a wait); tasks/result answers once it is terminal, so an execution started by the
	// last approvals has finished before the ledger is read.
	for i, tid := range ids {
		a.TaskRPC(4000+i, "tasks/result", tid).Message(t)
	}
	ran := map[int]int{}
	for _, tr := range d.Transfers() {
		ran[int(tr.Amount)]++
	}
	completed := 0
	for i, tid := range ids {
		m := a.TaskRPC(3000+i, "tasks/get", tid).Message(t)
		_, view := g.AdminRequest(t, "GET", "/api/v1/approvals/"+tid, "alice-secret-token", "")
		approved := testkit.Dig(view, "decision", "approved") == true
		switch status := testkit.Dig(m, "result", "status"); {
		case ran[i+1] > 1:
			t.Errorf("task %d executed %d times", i, ran[i+1])
		case status == "completed" && ran[i+1] != 1:
			t.Errorf("task %d completed but executed %d times", i, ran[i+1])
		case !approved && ran[i+1] != 0:
			t.Errorf("task %d executed without approval (status %v)", i, status)
		}
		if testkit.Dig(m, "result", "status") == "completed" {
			completed++
		}
	}
	var buf bytes.Buffer
	for _, o := range outcomes {
		for k, v := range o {
			fmt.Fprintf(&buf, "%d:%d ", k, v)
		}
	}
	t.Logf("completed=%d decisions=%s", completed, buf.String())
}

// TestIdentityHeader: with server.identity_header, tasks belong to the asserted identity
// across its sessions, other identities see nothing, and an approver cannot decide their own
// request.
func TestIdentityHeader(t *testing.T) {
	_, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, approvalRules+"server:\n  identity_header: X-Forwarded-User\n"), approverEnv, nil)
	g.WaitReady(t)
	as := func(user string) *testkit.RPC {
		c := &testkit.RPC{T: t, URL: g.MCP, Header: http.Header{"X-Forwarded-User": {user}}}
		c.Initialize()
		return c
	}
	alice1, alice2, mallory := as("alice"), as("alice"), as("mallory")
	tid := alice1.CallTask(1, "delete_user", `{"user_id":"u-002"}`)
	if m := alice2.TaskRPC(2, "tasks/get", tid).Message(t); testkit.Dig(m, "result", "taskId") != tid {
		t.Errorf("same identity, other session cannot see the task: %v", m)
	}
	if code, _ := testkit.ErrorOf(mallory.TaskRPC(3, "tasks/get", tid).Message(t)); code != -32602 {
		t.Errorf("another identity sees the task")
	}
	if st, body := g.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/approve", "alice-secret-token", `{}`); st != 403 {
		t.Errorf("self-approval: %d %v, want 403", st, body)
	}
	if st, _ := g.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/approve", "bob-secret-token", `{}`); st != 200 {
		t.Errorf("approval by another approver: %d", st)
	}
	if m := alice2.TaskRPC(4, "tasks/result", tid).Message(t); m["result"] == nil {
		t.Errorf("result for the owner's other session: %v", m)
	}
}

// TestApprovedAfterSessionGone: a call approved after its caller ended the upstream session
// fails with a clear error instead of running in no one's session.
func TestApprovedAfterSessionGone(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, approvalRules), approverEnv, nil)
	g.WaitReady(t)
	c := g.NewClient(t)
	tid := c.CallTask(1, "delete_user", `{"user_id":"u-002"}`)
	req, _ := http.NewRequest(http.MethodDelete, g.MCP, nil)
	req.Header.Set("Mcp-Session-Id", c.Session)
	resp, err := testkit.HTTPClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if st, _ := g.AdminRequest(t, "POST", "/api/v1/approvals/"+tid+"/approve", "alice-secret-token", `{}`); st != 200 {
		t.Fatalf("approve: %d", st)
	}
	var view map[string]any
	defer func() {
		if t.Failed() {
			t.Logf("view: %v\nlogs:\n%s", view, g.Logs.String())
		}
	}()
	waitFor(t, "the task to fail", func() bool {
		_, view = g.AdminRequest(t, "GET", "/api/v1/approvals/"+tid, "alice-secret-token", "")
		return view["state"] == "failed"
	})
	if testkit.Dig(view, "failure", "name") != "SessionGone" {
		t.Errorf("failure = %v, want SessionGone", view["failure"])
	}
	if d.Calls("delete_user") != 0 {
		t.Errorf("the call ran although its session was gone")
	}
}
