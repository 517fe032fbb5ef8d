package server

import (
	"context"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// resumeNotices sends what a previous run of this process owed approvers and never delivered
// (its queues are in memory): the Slack messages and the approval.requested webhooks of the
// pending tasks it created. It runs once the stored tasks are loaded, before decisions can
// arrive. Nothing is listed unless some workflow notifies anyone.
func (s *Server) resumeNotices(ctx context.Context) {
	notifies := false
	for _, wf := range s.snaps.Load().Config.Approval {
		notifies = notifies || wf.Destination.Type == config.DestinationWebhook || wf.Destination.Type == config.DestinationSlack
	}
	if !notifies {
		return
	}
	pending, err := s.tasks.ListAll(ctx, tasks.Filter{States: []tasks.State{tasks.AwaitingApproval}})
	if err != nil {
		s.log.Warn("listing pending tasks to resume their approval messages failed", "error", err.Error())
		return
	}
	mine := pending[:0]
	for _, t := range pending {
		if s.tasks.Mine(t) {
			mine = append(mine, t)
		}
	}
	posts, events := s.slack.Resume(mine), s.notifier.Resume(mine)
	if posts+events > 0 {
		s.log.Info("sending approval messages a previous run left undelivered", "slack_posts", posts, "webhook_events", events)
	}
}
