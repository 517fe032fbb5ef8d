package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/tollgate-mcp/tollgate/internal/approval"
	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/slack"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// newSlack builds the interactive Slack channel from $TOLLGATE_SLACK_* (read once, at start).
// Its clicks decide through approval.Decide, the approvals API's own path.
func (s *Server) newSlack(consoleURL string) *slack.Slack {
	env := func(k string) string { v, _ := s.opts.LookupEnv(k); return v }
	api := env(config.EnvSlackAPIURL)
	if api == "" {
		api = config.DefaultSlackAPIURL
	}
	return slack.New(slack.Options{
		Workflow: s.snaps.Workflow,
		Approver: s.slackApprover,
		Decide: func(ctx context.Context, id, approver string, approve bool, reason string) (*tasks.Task, error) {
			t, err := approval.Decide(ctx, s.tasks, approval.Authorizer{Config: func() *config.Config { return s.snaps.Load().Config }},
				id, approver, approve, reason)
			if na, ok := errors.AsType[*approval.NotAuthorizedError](err); ok {
				err = fmt.Errorf("%w: %s", slack.ErrNotAuthorized, na.Error())
			}
			return t, err
		},
		Remember: s.tasks.NoteMessage,
		Lookup:   s.tasks.Lookup,
		BotToken: env(config.EnvSlackBotToken), SigningSecret: env(config.EnvSlackSigningSecret), APIURL: api,
		ConsoleURL: consoleURL, Logger: s.log, Registerer: s.reg, CannotRun: s.cannotRun, NotWaiting: s.notWaitingFor,
	})
}

// slackApprover maps a Slack member id to the approver listing it (approvers[].slack_user_id)
// in the current configuration, so a reload that adds or removes one applies to the next click.
func (s *Server) slackApprover(id string) (string, bool) {
	if id == "" {
		return "", false
	}
	for _, a := range s.snaps.Load().Config.Approvers {
		if a.SlackUserID == id {
			return a.Name, true
		}
	}
	return "", false
}
