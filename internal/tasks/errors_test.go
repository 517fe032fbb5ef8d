package tasks

import (
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
)

// TestErrorDataSpellsTaskID: every error naming a task names it data.taskId, the MCP spelling
// (docs/errors.md); task_id is the log key only. Clients match on one key, whatever the error.
func TestErrorDataSpellsTaskID(t *testing.T) {
	tk := &Task{ID: "tg_1", Tool: "delete_file", State: Rejected, TTL: time.Minute}
	cases := map[string]*jsonrpc.Error{
		"ExecutionTimeout":     executionTimeoutError(tk, time.Second),
		"ApprovalRejected":     rejectedError(tk, "bob", "no"),
		"ApprovalTimedOut":     timedOutError(tk, time.Minute),
		"TaskExpired":          expiredError(tk),
		"TaskCancelled":        cancelledError(tk),
		"ExecutionInterrupted": interruptedError(tk),
		"ArgumentsChanged":     argsChangedError(tk),
	}
	_, cases["TaskFailed"] = outcome(tk) // a terminal task with neither result nor error
	for name, e := range cases {
		if e.Name() != name || e.Data["taskId"] != "tg_1" || e.Data["task_id"] != nil {
			t.Errorf("%s: data %v; want data.taskId tg_1 and no task_id", name, e.Data)
		}
	}
}

// TestRejectionNamesTaskID: the error a requester gets for a rejected call, through Result.
func TestRejectionNamesTaskID(t *testing.T) {
	e := newEnv(t, nil)
	tk := e.create(t, "alice")
	if _, err := e.m.Reject(bg, tk.ID, "bob", ""); err != nil {
		t.Fatal(err)
	}
	_, rpcErr := e.result(t, "alice", tk.ID)
	if rpcErr == nil || rpcErr.Code != jsonrpc.CodeApprovalRejected || rpcErr.Data["taskId"] != tk.ID || rpcErr.Data["task_id"] != nil {
		t.Fatalf("rejected: %+v; want -32007 with data.taskId %s", rpcErr, tk.ID)
	}
}
