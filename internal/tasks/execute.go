package tasks

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
)

// commitTimeout bounds the final store write after an execution, which must happen even
// when the Manager is shutting down (the call already ran).
const commitTimeout = 10 * time.Second

// launch starts executing an Approved task on a goroutine owned by the Manager.
func (m *Manager) launch(id string) {
	m.mu.Lock()
	if m.closed || m.draining {
		m.mu.Unlock()
		return // stays Approved; the next start (or, sharing the store, another replica) runs it
	}
	m.wg.Add(1)
	m.execs.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		defer m.execs.Done()
		m.execute(m.ctx, id)
	}()
}

// execute runs an Approved task at most once: the Approved → Executing compare-and-swap in
// the store is the claim, so concurrent launches (approve racing on_timeout, a restart)
// cannot both reach the upstream.
func (m *Manager) execute(ctx context.Context, id string) {
	t, err := m.load1(ctx, id)
	if err != nil || t.State != Approved {
		return
	}
	// docs/contract.md §3: approval is bound to the canonical hash of (tool, arguments), and the
	// rule/policy is re-checked right before execution.
	var denied *jsonrpc.Error
	if !hmac.Equal([]byte(m.argsHash(t.Tool, t.Arguments)), []byte(t.ArgsHash)) {
		denied = argsChangedError(t)
	} else if m.recheck != nil {
		denied = m.recheck(ctx, t.Clone())
	}
	if denied != nil {
		_, err := m.update(ctx, id, func(t *Task) error {
			if t.State != Approved {
				return errNoop
			}
			t.State, t.Error = Failed, denied
			t.StatusMessage = "Failed: " + denied.Message
			return nil
		})
		if err != nil && !errors.Is(err, errNoop) {
			m.log.Error("task: recording re-check failure", "task_id", id, "error", err)
		}
		return
	}
	t, err = m.update(ctx, id, func(t *Task) error {
		if t.State != Approved {
			return errNoop
		}
		t.State, t.StatusMessage = Executing, "Executing"
		if m.shared {
			// The claim takes the execution lease; this replica renews it while the call
			// runs (lease.go), any replica fails the task when it lapses.
			t.LeaseHolder, t.LeaseUntil = m.opts.Replica, m.now().Add(m.opts.ExecutionLease)
		}
		return nil
	})
	if err != nil {
		if !errors.Is(err, errNoop) {
			m.log.Error("task: claiming execution failed", "task_id", id, "error", err)
		}
		return
	}

	// The call may run until the task's TTL ends (its result would be discarded after that),
	// and no longer than tasks.execution_timeout: a hung upstream must not hold the task, its
	// quota slot and an upstream connection for the whole TTL.
	budget, limit := t.ExpiresAt().Sub(m.now()), m.opts.ExecutionTimeout
	byLimit := limit > 0 && limit < budget
	if byLimit {
		budget = limit
	}
	execCtx, stop := context.WithTimeout(ctx, budget)
	defer stop()
	m.mu.Lock()
	m.running[id] = stop
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.running, id)
		m.mu.Unlock()
	}()
	// A cancel committed between the claim and registering stop would be missed; look again.
	// The claim is this replica's: while the store does not answer (a Redis failover right
	// after the claim) read again with backoff, renewing the lease meanwhile, instead of
	// leaving the claimed task unrun until its lease lapses.
	if cur, err := m.reread(ctx, id); err != nil || cur.State != Executing {
		if err != nil && !errors.Is(err, ErrNotFound) {
			m.log.Error("task: the store did not answer after the claim; the call was not sent and the task will fail as interrupted", "task_id", id, "error", err)
		}
		return
	}

	res, rpcErr := m.call(execCtx, t)
	switch {
	case rpcErr != nil && byLimit && errors.Is(execCtx.Err(), context.DeadlineExceeded):
		rpcErr = executionTimeoutError(t, limit) // ctx's end cancelled the upstream request
	case (rpcErr != nil || isErrorResult(res)) && ctx.Err() != nil:
		// This replica is stopping (Close): the call was cut off, e.g. while its question
		// waited for the owner. Say so; it is never run again (at most once).
		res, rpcErr = nil, interruptedError(t)
	}
	outcome := "completed"
	if rpcErr != nil || isErrorResult(res) {
		outcome = "failed"
	}
	m.met.executed(outcome)

	commitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	final, err := m.commit(commitCtx, id, func(t *Task) error {
		if t.State != Executing || (t.LeaseHolder != "" && t.LeaseHolder != m.opts.Replica) {
			// cancelled, expired or failed with the lease lost meanwhile: it stays so, the
			// result is discarded
			return errNoop
		}
		switch {
		case rpcErr != nil:
			t.State, t.Error = Failed, rpcErr
			t.StatusMessage = "Failed: " + rpcErr.Message
		case outcome == "failed":
			// spec 2025-11-25 tasks: a tool result with isError is a failed task; tasks/result
			// still returns that result.
			t.State, t.Result = Failed, res
			t.StatusMessage = "Failed: the tool reported an error"
		default:
			t.State, t.Result = Completed, res
			t.StatusMessage = "Completed"
		}
		return nil
	})
	switch {
	case errors.Is(err, errNoop) && final != nil && final.StatusMessage == leaseLostStatus:
		m.log.Warn("task: execution lease lost, late result dropped; the task stays failed", "task_id", id, "tool", t.Tool, "outcome", outcome)
	case errors.Is(err, errNoop):
		m.log.Info("task: execution result discarded, task no longer executing", "task_id", id, "tool", t.Tool)
	case err != nil:
		// The call ran; its result is lost with this process. With a shared store the task
		// fails as ExecutionInterrupted when its lease lapses, else at the next start.
		m.log.Error("task: storing execution result failed; the result is dropped and the task will fail as interrupted", "task_id", id, "error", err)
	}
}

// commit is update for an execution's outcome, which exists only in memory: while the store
// does not answer (ErrStore: Redis away, a disk error) it is tried again with backoff until
// ctx (commitTimeout) ends, so a short store outage loses no result.
func (m *Manager) commit(ctx context.Context, id string, mutate func(t *Task) error) (*Task, error) {
	backoff := storeRetryMin
	for {
		t, err := m.update(ctx, id, mutate)
		if !storeFailure(err) {
			return t, err
		}
		if backoff == storeRetryMin {
			m.log.Warn("task: storing execution result failed; retrying while the result is in memory", "task_id", id, "within", commitTimeout.String(), "error", err.Error())
		}
		if _, werr := sleepOrTick(ctx, backoff, nil); werr != nil {
			return t, err
		}
		backoff = min(2*backoff, storeRetryMax)
	}
}

// reread is load1 tried again with backoff while the store does not answer (ErrStore), for
// up to commitTimeout.
func (m *Manager) reread(ctx context.Context, id string) (*Task, error) {
	ctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	backoff := storeRetryMin
	for {
		t, err := m.load1(ctx, id)
		if !storeFailure(err) {
			return t, err
		}
		if _, werr := sleepOrTick(ctx, backoff, nil); werr != nil {
			return t, err
		}
		backoff = min(2*backoff, storeRetryMax)
	}
}

// call invokes the Executor, turning a panic or an empty answer into a JSON-RPC error.
func (m *Manager) call(ctx context.Context, t *Task) (res json.RawMessage, rpcErr *jsonrpc.Error) {
	defer func() {
		if p := recover(); p != nil {
			m.log.Error("task: executor panicked", "task_id", t.ID, "tool", t.Tool, "panic", fmt.Sprint(p))
			res, rpcErr = nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "InternalError",
				"internal error while executing the task", "taskId", t.ID)
		}
	}()
	ctx, done := m.withNotes(m.withAsker(ctx, t.ID), t)
	defer done()
	res, rpcErr = m.exec.Execute(ctx, t.Clone())
	if rpcErr == nil && len(res) == 0 {
		rpcErr = jsonrpc.NewError(jsonrpc.CodeInternalError, "InternalError",
			"the upstream returned neither a result nor an error", "taskId", t.ID)
	}
	if rpcErr != nil {
		res = nil
	}
	return res, rpcErr
}

// isErrorResult reports whether a CallToolResult has isError: true.
func isErrorResult(res json.RawMessage) bool {
	var r struct {
		IsError bool `json:"isError"`
	}
	return len(res) > 0 && json.Unmarshal(res, &r) == nil && r.IsError
}
