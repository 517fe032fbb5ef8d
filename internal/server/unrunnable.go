package server

import (
	"context"
	"strings"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/intercept"
	"github.com/tollgate-mcp/tollgate/internal/session"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

// unrunnable tells why a pending task's call could no longer run if it were approved now
// (docs/contract.md §4 cannotRun), from what this process knows without asking anyone: the
// caller ended its session, the stdio process its session lived on is gone, the tool is
// quarantined or no longer listed. Nil for a task that is not pending, or when nothing is
// known against it. Every check is a map lookup: the approvals list asks it per row.
func (s *Server) unrunnable(bridge *intercept.Bridge) func(t *tasks.Task) *tasks.Unrunnable {
	shared := store.IsShared(s.store)
	return func(t *tasks.Task) *tasks.Unrunnable {
		if t.State != tasks.AwaitingApproval || t.Accelerated || t.Promoted {
			return nil // a promoted task's call is already in flight; it needs no session of its own
		}
		if u := s.ann.Unrunnable(t); u != nil {
			return u
		}
		// Sessions live in the process that created the task: another replica sharing the
		// store cannot tell. (Without a shared store every task is this process's, also one
		// stored before a restart, whose sessions did not survive it.)
		if (shared && t.Replica != s.tasks.Replica()) || t.SessionID == "" || bridge.Sessionless(t) {
			return nil
		}
		if s.sessions.Ended(t.SessionID) {
			return &tasks.Unrunnable{Reason: tasks.UnrunnableSessionEnded,
				Message: "The caller ended its MCP session; approved now, the call fails (SessionGone) and does not run"}
		}
		if s.stdio != nil && !s.stdio.Shared() && !strings.HasPrefix(t.SessionID, session.LocalPrefix) && !s.stdio.Has(t.SessionID) {
			return &tasks.Unrunnable{Reason: tasks.UnrunnableStdioExited,
				Message: "The stdio server process the call's session ran on has exited (or was restarted); a new process does not have the session, so approved now the call fails (SessionGone) and does not run"}
		}
		return nil
	}
}

// maxEndedQueue bounds the ended sessions waiting for refreshEnded; beyond it an end is not
// told to Slack (the console, CLI and API still compute it on read).
const maxEndedQueue = 256

// noteSessionEnd queues a stdio session that ended (stdio.Options.OnEnd); never blocks.
func (s *Server) noteSessionEnd(id string) {
	select {
	case s.endedSessions <- id:
	default:
	}
}

// refreshEnded updates the Slack request of each pending call whose session ended, so its
// approvers read that it can no longer run before they decide. Ends that arrive together are
// handled with one read of the pending tasks.
func (s *Server) refreshEnded(ctx context.Context) {
	for {
		var first string
		select {
		case <-ctx.Done():
			return
		case first = <-s.endedSessions:
		}
		ended := map[string]bool{first: true}
	more:
		for len(ended) < maxEndedQueue {
			select {
			case id := <-s.endedSessions:
				ended[id] = true
			default:
				break more
			}
		}
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		pending, err := s.tasks.ListAll(lctx, tasks.Filter{States: []tasks.State{tasks.AwaitingApproval}})
		cancel()
		if err != nil {
			s.log.Warn("could not read pending tasks to tell approvers of an ended session", "error", err.Error())
			continue
		}
		for _, t := range pending {
			if t != nil && ended[t.SessionID] {
				s.slack.Refresh(t)
			}
		}
	}
}
