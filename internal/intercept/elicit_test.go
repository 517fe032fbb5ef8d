package intercept

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// TestApprovalQuestionFailsClosed: the question put to a requester shows the arguments as
// approvers see them — redact_fields hidden, and everything hidden once a reload removed the
// task's workflow (it used to show them unredacted then).
func TestApprovalQuestionFailsClosed(t *testing.T) {
	h := newHarness(t, `schema: 1
sources:
  - {id: upstream, kind: mcp, url: "http://127.0.0.1:1/mcp"}
approval:
  ask: {destination: {type: elicitation}, redact_fields: [password]}
`)
	args := json.RawMessage(`{"user":"bob","password":"hunter2"}`)
	for _, tc := range []struct {
		workflow, want string
	}{
		{"ask", `{"user":"bob","password":"[REDACTED]"}`},
		{"removed-by-reload", `"[REDACTED]"`},
	} {
		q := h.gw.approvalQuestion(&tasks.Task{ID: "tg_q", Tool: "delete_user", Workflow: tc.workflow, Arguments: args})
		msg, _ := q["message"].(string)
		if !strings.Contains(msg, "Arguments: "+tc.want+"\n") || strings.Contains(msg, "hunter2") {
			t.Errorf("workflow %q: question %q, want arguments %s", tc.workflow, msg, tc.want)
		}
	}
}
