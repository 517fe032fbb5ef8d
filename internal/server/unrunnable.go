package server

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/intercept"
	"github.com/tollgate-mcp/tollgate/internal/session"
	"github.com/tollgate-mcp/tollgate/internal/slack"
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

// noteSessionEnd queues a session that ended (a stdio one: stdio.Options.OnEnd; any one its
// client ended with DELETE); never blocks.
func (s *Server) noteSessionEnd(id string) {
	select {
	case s.endedSessions <- id:
	default:
	}
}

// refreshEnded updates the Slack request of each pending call whose session ended, so its
// approvers read that it can no longer run before they decide, and of each held call nobody
// waits for any more (noteStoppedWaiting). Ends that arrive together are handled with one read
// of the pending tasks. After the upstream's tools were listed again (noteToolsChanged) every
// pending request is refreshed; Slack.Refresh sends only the messages whose flags changed.
func (s *Server) refreshEnded(ctx context.Context) {
	for {
		ended, unwaited, all := map[string]bool{}, map[string]bool{}, false
		select {
		case <-ctx.Done():
			return
		case id := <-s.endedSessions:
			ended[id] = true
		case id := <-s.unwaitedTasks:
			unwaited[id] = true
		case <-s.toolsChanged:
			all = true // a tool may be quarantined or gone: every pending request is re-read
		}
	more:
		for len(ended)+len(unwaited) < 2*maxEndedQueue {
			select {
			case id := <-s.endedSessions:
				ended[id] = true
			case id := <-s.unwaitedTasks:
				unwaited[id] = true
			default:
				break more
			}
		}
		if len(ended) == 0 && !all {
			s.refreshUnwaited(ctx, unwaited)
			continue
		}
		if !s.usesSlack() {
			continue // only Slack messages are refreshed: nothing to read the tasks for
		}
		// Page through the pending tasks (the store's ordered index), so a refresh holds one
		// page of arguments at a time, never every pending call's.
		var after *tasks.Position
		for {
			lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			page, last, err := s.tasks.PageAwaiting(lctx, after, false, refreshPage)
			cancel()
			if err != nil {
				s.log.Warn("could not read pending tasks to tell approvers of an ended session", "error", err.Error())
				break
			}
			for _, t := range page {
				if t != nil && (all || ended[t.SessionID] || unwaited[t.ID]) {
					s.slack.Refresh(t)
				}
			}
			if last == nil {
				break
			}
			after = last
		}
	}
}

// refreshPage is how many pending tasks refreshEnded reads at a time.
const refreshPage = 64

// usesSlack reports whether some approval workflow of the running configuration posts to
// Slack.
func (s *Server) usesSlack() bool {
	for _, wf := range s.snaps.Load().Config.Approval {
		if slack.Uses(wf) {
			return true
		}
	}
	return false
}

// waitStartGrace is how young a task may be without a waiting call: a held call's wait begins
// right after its task is created, so a new task is not reported unwaited for.
const waitStartGrace = 2 * time.Second

// notWaiting tells that nobody waits for pending held call t any more (docs/contract.md §4
// requesterNotWaiting): its requester's plain call settled undecided, timed out or went away,
// and none of its retries waits on this process now. Only without a shared store: a retry
// may wait on another replica. A map lookup: the approvals list asks it per row.
func (s *Server) notWaiting(shared bool) func(t *tasks.Task) *tasks.NotWaiting {
	return func(t *tasks.Task) *tasks.NotWaiting {
		if shared || t.State != tasks.AwaitingApproval || t.Accelerated || t.Promoted || t.IdemKey == "" ||
			time.Since(t.CreatedAt) < waitStartGrace || s.gw.RequesterWaiting(t.ID) {
			return nil
		}
		until := t.ExpiresAt()
		return &tasks.NotWaiting{ResultKeptUntil: until, Message: fmt.Sprintf(
			"Requester no longer waiting; the result will be kept for %s (until %s) for the same call made again",
			roughly(time.Until(until)), until.UTC().Format(time.RFC3339))}
	}
}

// roughly is d for people: whole minutes from a minute on ("19m", "1h5m"), else seconds.
func roughly(d time.Duration) string {
	if d < time.Minute {
		return max(d, 0).Round(time.Second).String()
	}
	s := d.Round(time.Minute).String()
	return strings.TrimSuffix(s, "0s")
}

// noteStoppedWaiting queues a task whose last waiting call ended without its outcome
// (intercept.Deps.StoppedWaiting), for its Slack request; never blocks.
func (s *Server) noteStoppedWaiting(id string) {
	select {
	case s.unwaitedTasks <- id:
	default:
	}
}

// refreshUnwaited updates the Slack requests of the pending tasks ids (one read each).
func (s *Server) refreshUnwaited(ctx context.Context, ids map[string]bool) {
	for id := range ids {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		t, err := s.tasks.Lookup(lctx, id)
		cancel()
		if err == nil {
			s.slack.Refresh(t)
		}
	}
}

// noteToolsChanged asks refreshEnded to bring every pending Slack request up to date after
// the upstream's tools were listed again (a tool quarantined or gone); never blocks, and
// changes that come together are handled once.
func (s *Server) noteToolsChanged() {
	select {
	case s.toolsChanged <- struct{}{}:
	default:
	}
}
