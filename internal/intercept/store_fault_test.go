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
	h := newHarnessOn(t, unitConfig, st)
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
