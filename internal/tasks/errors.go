package tasks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

var (
	ErrNotFound     = errors.New("task not found")        // unknown, foreign owner, or expired
	ErrTerminal     = errors.New("task already terminal") // cancel of a finished task
	ErrSelfApproval = errors.New("requester cannot decide own request")
	// ErrInvalidTransition means a change is not in the transition table (a bug, never a race).
	ErrInvalidTransition = errors.New("invalid task state transition")
	// ErrClosed is returned by Create after Close.
	ErrClosed = errors.New("task manager closed")
	// ErrStore wraps the store failing to answer (Redis unreachable, a disk error): it says
	// nothing about the task, which may well exist. Callers answer StoreUnavailable.
	ErrStore = errors.New("task store unavailable")
)

// storeErr wraps a store error about task id: ErrStore unless the store was closed or the
// context ended (those are no outage).
func storeErr(id string, err error) error {
	if errors.Is(err, store.ErrClosed) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("task %s: %w", id, err)
	}
	return fmt.Errorf("task %s: %w: %w", id, ErrStore, err)
}

// CodeTaskCancelled is the JSON-RPC code tasks/result answers for a cancelled task. The spec
// defines none (a cancelled request has no reply), so Tollgate uses internal error with the
// stable name "TaskCancelled" in data.error.
const CodeTaskCancelled = jsonrpc.CodeInternalError

// ConflictError: a decision arrives after another one stands (or the task is no longer
// awaiting approval). Task shows the standing state and decision.
type ConflictError struct{ Task *Task }

func (e *ConflictError) Error() string {
	if e.Task == nil {
		return "task is no longer awaiting approval"
	}
	if d := e.Task.Decision; d != nil {
		verdict := "rejected"
		if d.Approved {
			verdict = "approved"
		}
		return fmt.Sprintf("task %s is %s: already %s by %s", e.Task.ID, e.Task.State, verdict, d.By)
	}
	return fmt.Sprintf("task %s is %s, no longer awaiting approval", e.Task.ID, e.Task.State)
}

// DuplicateVoteError: an approver approves a task they already approved while it still needs
// other approvers (min_approvals > 1). The vote is not counted twice; Task shows the votes.
type DuplicateVoteError struct {
	Task     *Task
	Approver string
	Required int
}

func (e *DuplicateVoteError) Error() string {
	return fmt.Sprintf("%s already approved task %s (%d of %d approvals); another approver must approve",
		e.Approver, e.Task.ID, len(e.Task.Approvals), e.Required)
}

func capacityError(qe *store.QuotaError) *jsonrpc.Error {
	var msg string
	switch qe.Limit {
	case "max_pending_per_owner":
		msg = fmt.Sprintf("CapacityExceeded: this caller already has %d pending tasks (limit %d, tasks.quotas.max_pending_per_owner); wait for some to finish or cancel them", qe.Current, qe.Max)
	case "max_pending_per_source":
		msg = fmt.Sprintf("CapacityExceeded: callers from this source (identity, else network address) already have %d pending tasks (limit %d, tasks.quotas.max_pending_per_source); wait for some to finish or cancel them", qe.Current, qe.Max)
	case "max_pending_total":
		msg = fmt.Sprintf("CapacityExceeded: Tollgate holds %d pending tasks from all callers (limit %d, tasks.quotas.max_pending_total); try again later", qe.Current, qe.Max)
	case "max_stored_bytes_per_source":
		msg = fmt.Sprintf("CapacityExceeded: pending tasks' arguments from this source (identity, else network address) would exceed %d bytes (tasks.quotas.max_stored_bytes_per_source); wait for some to finish or cancel them", qe.Max)
	case "max_argument_bytes":
		msg = fmt.Sprintf("CapacityExceeded: tool arguments are %d bytes, the limit for a task is %d (tasks.quotas.max_argument_bytes)", qe.Current, qe.Max)
	default:
		msg = fmt.Sprintf("CapacityExceeded: pending tasks' arguments from all callers would exceed %d bytes (tasks.quotas.max_stored_bytes); try again later", qe.Max)
	}
	return jsonrpc.NewError(jsonrpc.CodeCapacityExceeded, "CapacityExceeded", msg, "limit", qe.Limit, "max", qe.Max)
}

// executionTimeoutError fails a task whose call got no answer within tasks.execution_timeout;
// the upstream request has been cancelled and is never sent again (at most once).
func executionTimeoutError(t *Task, limit time.Duration) *jsonrpc.Error {
	return jsonrpc.NewError(jsonrpc.CodeUpstreamTimeout, "ExecutionTimeout",
		fmt.Sprintf("The upstream did not answer the call within tasks.execution_timeout (%s); it was cancelled and will not be retried", limit),
		"taskId", t.ID, "tool", t.Tool)
}

func rejectedError(t *Task, by, reason string) *jsonrpc.Error {
	msg := fmt.Sprintf("ApprovalRejected: the call to tool %q was rejected by %s", t.Tool, by)
	if reason != "" {
		msg += ": " + reason
	}
	return jsonrpc.NewError(jsonrpc.CodeApprovalRejected, "ApprovalRejected", msg,
		"taskId", t.ID, "tool", t.Tool, "approver", by, "reason", reason)
}

func timedOutError(t *Task, after time.Duration) *jsonrpc.Error {
	return jsonrpc.NewError(jsonrpc.CodeApprovalTimedOut, "ApprovalTimedOut",
		fmt.Sprintf("ApprovalTimedOut: no approver decided on the call to tool %q within %s (on_timeout: deny)", t.Tool, after),
		"taskId", t.ID, "tool", t.Tool)
}

func expiredError(t *Task) *jsonrpc.Error {
	return jsonrpc.NewError(jsonrpc.CodeTaskExpired, "TaskExpired",
		fmt.Sprintf("TaskExpired: task %s reached its TTL (%s) before it finished", t.ID, t.TTL),
		"taskId", t.ID, "tool", t.Tool)
}

func cancelledError(t *Task) *jsonrpc.Error {
	return jsonrpc.NewError(CodeTaskCancelled, "TaskCancelled",
		fmt.Sprintf("TaskCancelled: task %s was cancelled", t.ID), "taskId", t.ID, "tool", t.Tool)
}

func interruptedError(t *Task) *jsonrpc.Error {
	return jsonrpc.NewError(jsonrpc.CodeInternalError, "ExecutionInterrupted",
		fmt.Sprintf("ExecutionInterrupted: the call to tool %q was interrupted by a Tollgate restart; it is not retried because a task executes at most once", t.Tool),
		"taskId", t.ID, "tool", t.Tool)
}

// leaseLostError fails a task whose executing replica stopped renewing its execution lease
// (killed, partitioned from the store): the call may or may not have run upstream.
func leaseLostError(t *Task) *jsonrpc.Error {
	return jsonrpc.NewError(jsonrpc.CodeInternalError, "ExecutionInterrupted",
		fmt.Sprintf("ExecutionInterrupted: the Tollgate replica executing the call to tool %q stopped answering (its execution lease expired); the call may or may not have reached the upstream and it is not retried because a task executes at most once", t.Tool),
		"taskId", t.ID, "tool", t.Tool)
}

// notStartedError fails an approved task whose creating replica (which alone holds the
// caller's upstream session) never started it: the call was not sent.
func notStartedError(t *Task) *jsonrpc.Error {
	return jsonrpc.NewError(jsonrpc.CodeInternalError, "ExecutionInterrupted",
		fmt.Sprintf("ExecutionInterrupted: the call to tool %q was approved, but the Tollgate replica holding the caller's session stopped answering before it started; the call was not sent upstream", t.Tool),
		"taskId", t.ID, "tool", t.Tool)
}

func argsChangedError(t *Task) *jsonrpc.Error {
	return jsonrpc.NewError(jsonrpc.CodePolicyChanged, "ArgumentsChanged",
		fmt.Sprintf("ArgumentsChanged: the stored call to tool %q no longer matches the approved arguments hash", t.Tool),
		"taskId", t.ID, "tool", t.Tool)
}
