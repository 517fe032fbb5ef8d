package intercept

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/session"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store/storetest"
)

// leaksStore reports what of the store's error (its address, its file) a client-facing text shows.
func leaksStore(s string) bool {
	return strings.Contains(s, "10.9.8.7") || strings.Contains(s, "/var/lib/tollgate") || strings.Contains(s, "connection refused")
}

// TestTaskCreateFailedHidesStore (issue 30): a task the store could not create is answered
// TaskCreateFailed with a generic message and the correlation_id; the store's address and
// file are in the log line that carries the same correlation_id, never in the reply. Old
// code: the message carried the store error and no log line had the id.
func TestTaskCreateFailedHidesStore(t *testing.T) {
	st := storetest.NewFailing(store.NewMemory())
	h := newHarnessStore(t, unitConfig, st)
	st.SetDown(true)
	x := exchange(t, &session.Session{ID: "s1"}, callRequest(`{"name":"delete_x","arguments":{"n":1},"task":{"ttl":60000}}`))
	x.CorrID = "corr-create-1"
	res := h.router.Route(context.Background(), x)
	e := replyError(t, res)
	if e.Data["error"] != "TaskCreateFailed" || e.Data["correlation_id"] != x.CorrID {
		t.Fatalf("got %+v, want TaskCreateFailed with correlation_id %s", e, x.CorrID)
	}
	if raw, _ := json.Marshal(e); leaksStore(string(raw)) {
		t.Errorf("the reply shows the store's details: %s", raw)
	}
	var line string
	for l := range strings.SplitSeq(h.logs.String(), "\n") {
		if strings.Contains(l, "correlation_id="+x.CorrID) {
			line = l
		}
	}
	if !leaksStore(line) {
		t.Errorf("no log line with correlation_id %s and the store's error; log:\n%s", x.CorrID, h.logs.String())
	}
}

// TestStoreUnavailableIsNotTaskNotFound (issue 30): while the store does not answer, tasks/get,
// tasks/result and tasks/cancel of an existing task (both eras) answer -32013 StoreUnavailable
// (HTTP 503 in 2026-07-28), retryable, never -32602 TaskNotFound; once it is back the task is
// there. Old code: TaskNotFound for every store error.
func TestStoreUnavailableIsNotTaskNotFound(t *testing.T) {
	st := storetest.NewFailing(store.NewMemory())
	h := newHarnessStore(t, unitConfig, st)
	mine := &session.Session{ID: "mine"}
	legacyID := h.newTaskFor(t, mine)
	h.modernUpstream()
	var created map[string]any
	_ = json.Unmarshal(replyResult(t, h.routeModern(modernExchange(t, "tools/call", `{"name":"delete_user","arguments":{}}`, tasksCaps)).Reply), &created)
	modernID, _ := created["taskId"].(string)
	if modernID == "" {
		t.Fatalf("modern task not created: %v", created)
	}
	st.SetDown(true)
	check := func(what string, res Result, id string, status int) {
		t.Helper()
		e := replyError(t, res)
		if e.Code != -32013 || e.Data["error"] != "StoreUnavailable" || e.Data["taskId"] != id || e.Data["retry_after"] == nil {
			t.Errorf("%s: got %d %v, want -32013 StoreUnavailable with taskId and retry_after", what, e.Code, e.Data)
		}
		if leaksStore(e.Message) {
			t.Errorf("%s: message shows the store's details: %s", what, e.Message)
		}
		if statusOf(res) != status {
			t.Errorf("%s: HTTP %d, want %d", what, statusOf(res), status)
		}
	}
	for _, m := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		check("2025-11-25 "+m, h.route(t, mine, taskRequest(m, `{"taskId":"`+legacyID+`"}`)), legacyID, 200)
	}
	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		check("2026-07-28 "+m, h.routeModern(modernExchange(t, m, `{"taskId":"`+modernID+`","inputResponses":{}}`, tasksCaps)), modernID, 503)
	}
	st.SetDown(false)
	if res := h.route(t, mine, taskRequest("tasks/get", `{"taskId":"`+legacyID+`"}`)); res.Reply == nil || strings.Contains(string(res.Reply), `"error"`) {
		t.Errorf("tasks/get once the store is back: %s", res.Reply)
	}
}

// TestHeldCallStoreUnavailable (issue 30): a held plain call whose budget ends while the store
// does not answer gets StoreUnavailable, not silence or TaskNotFound. Old code: the wait ended
// at the store's first error with no answer at all.
func TestHeldCallStoreUnavailable(t *testing.T) {
	st := storetest.NewFailing(store.NewMemory())
	h := newHarnessStore(t, holdConfig("300ms", ""), st)
	res := h.route(t, &session.Session{ID: "s1"}, callRequest(`{"name":"delete_x","arguments":{"n":1}}`))
	st.SetDown(true)
	answer, _ := waitOut(t, res)
	if answer == nil {
		t.Fatal("the held call got no answer while the store was down")
	}
	a := decodeHeld(t, answer)
	if a.Error == nil || a.Error.Code != -32013 || a.Error.Data["error"] != "StoreUnavailable" {
		t.Fatalf("held call with the store down: %s, want -32013 StoreUnavailable", answer)
	}
}
