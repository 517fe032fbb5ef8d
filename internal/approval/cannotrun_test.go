package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// TestCannotRunShownBeforeApproval: a pending approval whose call can no longer run carries
// cannotRun in the list, the detail view and the CLI; decided tasks never do; the list asks
// for the rows of its page only (O(page)).
func TestCannotRunShownBeforeApproval(t *testing.T) {
	var asked atomic.Int64
	cannot := func(tk *tasks.Task) *tasks.Unrunnable {
		asked.Add(1)
		if tk.ID == "tg_a" || tk.ID == "tg_c" {
			return &tasks.Unrunnable{Reason: tasks.UnrunnableStdioExited, Message: "the stdio process exited"}
		}
		return nil
	}
	srv := httptest.NewServer(NewHandler(fixture(), testAuth(), Options{Workflow: testWorkflows, CannotRun: cannot}))
	defer srv.Close()
	get := func(path string, v any) {
		t.Helper()
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("Authorization", "Bearer "+aliceToken)
		rec := httptest.NewRecorder()
		srv.Config.Handler.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
		if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
			t.Fatal(err)
		}
	}

	var lr ListResponse
	get("/api/v1/approvals?status=all", &lr)
	flagged := map[string]string{}
	for _, v := range lr.Approvals {
		if v.CannotRun != nil {
			flagged[v.TaskID] = v.CannotRun.Reason
		}
	}
	// tg_c (approved) is not pending: nothing to warn an approver of.
	if len(flagged) != 1 || flagged["tg_a"] != tasks.UnrunnableStdioExited {
		t.Errorf("flagged rows %v; want only tg_a (stdio_process_exited)", flagged)
	}
	var v View
	get("/api/v1/approvals/tg_a", &v)
	if v.CannotRun == nil || v.CannotRun.Message != "the stdio process exited" {
		t.Errorf("detail cannotRun = %+v", v.CannotRun)
	}
	var vb View
	get("/api/v1/approvals/tg_b", &vb)
	if vb.CannotRun != nil {
		t.Errorf("tg_b flagged: %+v", vb.CannotRun)
	}

	asked.Store(0)
	get("/api/v1/approvals?limit=1", &lr) // of three pending
	if n := asked.Load(); len(lr.Approvals) != 1 || n != 1 {
		t.Errorf("a page of 1 asked CannotRun %d times; want 1 (O(page))", n)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	env := map[string]string{"TOLLGATE_ADMIN_URL": srv.URL + "/", "TOLLGATE_ADMIN_TOKEN": aliceToken}
	for _, args := range [][]string{{"list"}, {"show", "tg_a"}} {
		var out, errb bytes.Buffer
		if code := RunCLI(ctx, args, &out, &errb, func(k string) string { return env[k] }); code != 0 {
			t.Fatalf("%v: exit %d %s", args, code, &errb)
		}
		if !strings.Contains(out.String(), "CANNOT RUN") || !strings.Contains(out.String(), "stdio_process_exited") {
			t.Errorf("tollgate approvals %v does not show it cannot run:\n%s", args, &out)
		}
	}
}

// TestRequesterNotWaitingShown: a pending held call nobody waits for carries
// requesterNotWaiting (until when its result is kept) in the API and the CLI; decided tasks
// never do.
func TestRequesterNotWaitingShown(t *testing.T) {
	kept := t0.Add(30 * time.Minute)
	gone := func(tk *tasks.Task) *tasks.NotWaiting {
		if tk.ID == "tg_b" || tk.ID == "tg_c" {
			return &tasks.NotWaiting{ResultKeptUntil: kept, Message: "Requester no longer waiting; the result will be kept for 30m"}
		}
		return nil
	}
	srv := httptest.NewServer(NewHandler(fixture(), testAuth(), Options{Workflow: testWorkflows, NotWaiting: gone}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	env := map[string]string{"TOLLGATE_ADMIN_URL": srv.URL + "/", "TOLLGATE_ADMIN_TOKEN": aliceToken}
	var out, errb bytes.Buffer
	if code := RunCLI(ctx, []string{"list", "--status", "all", "--json"}, &out, &errb, func(k string) string { return env[k] }); code != 0 {
		t.Fatalf("exit %d %s", code, &errb)
	}
	var lr ListResponse
	if err := json.Unmarshal(out.Bytes(), &lr); err != nil {
		t.Fatal(err, out.String())
	}
	for _, v := range lr.Approvals {
		want := v.TaskID == "tg_b" // tg_c is approved: nothing to tell
		if got := v.RequesterNotWaiting != nil; got != want || (got && !v.RequesterNotWaiting.ResultKeptUntil.Equal(kept)) {
			t.Errorf("%s: requesterNotWaiting %+v", v.TaskID, v.RequesterNotWaiting)
		}
	}
	for _, args := range [][]string{{"list"}, {"show", "tg_b"}} {
		out.Reset()
		if code := RunCLI(ctx, args, &out, &errb, func(k string) string { return env[k] }); code != 0 {
			t.Fatalf("%v: exit %d %s", args, code, &errb)
		}
		if o := out.String(); !strings.Contains(o, "requester not waiting") && !strings.Contains(o, "no longer waiting") {
			t.Errorf("tollgate approvals %v does not say the requester is not waiting:\n%s", args, &out)
		}
	}
}
