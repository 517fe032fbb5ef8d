package server

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/slack"
)

// channelCheckTimeout bounds probing the webhook/Slack destinations after a reload.
const channelCheckTimeout = 10 * time.Second

// usedWorkflows are the approval workflows a rule (or the defaults) can send a call to:
// action approve, and policy (Cedar may say approve), and governance.pins.workflow with pins
// on. Sorted.
func usedWorkflows(c *config.Config) []string {
	var out []string
	add := func(a config.Action, wf string) {
		if a != config.ActionApprove && a != config.ActionPolicy {
			return
		}
		if wf == "" {
			wf = config.DefaultWorkflow
		}
		if !slices.Contains(out, wf) {
			out = append(out, wf)
		}
	}
	add(c.Governance.Defaults.Action, c.Governance.Defaults.Approval)
	for _, r := range c.Governance.Rules {
		add(r.Action, r.Approval)
	}
	if c.Governance.Pins.Enabled() {
		add(config.ActionApprove, c.Governance.Pins.Workflow) // its approvers decide pins, its destination hears of them
	}
	slices.Sort(out)
	return out
}

// channelProblems lists the workflows in use whose approval cannot reach a decider: no
// approver token at all (the console and API refuse everyone), or a webhook/Slack destination
// that did not answer its probe or whose last notification failed. A workflow asking the
// requester (elicitation) needs neither. Messages never contain a destination's path or query.
func (s *Server) channelProblems() []string {
	c := s.snaps.Load().Config
	var out, noDecider []string
	for _, name := range usedWorkflows(c) {
		wf, ok := c.WorkflowFor(name)
		if !ok {
			continue
		}
		switch wf.Destination.Type {
		case config.DestinationElicitation:
			continue
		case config.DestinationSlack:
			if slack.Uses(wf) {
				out = append(out, s.slackProblems(name, wf)...)
				break
			}
			fallthrough
		case config.DestinationWebhook:
			if h, known := s.notifier.ChannelHealth(wf.Destination.URL); known && !h.OK {
				target := h.Target
				if target == "" {
					target = "its destination.url"
				}
				out = append(out, fmt.Sprintf("approval.%s: %s notifications to %s do not arrive (%s)", name, wf.Destination.Type, target, h.Detail))
			}
		}
		if s.approvers.n.Load() == 0 && (len(c.Server.AdminAuth.TrustedProxy) == 0 || len(c.Approvers) == 0) { // proxy-signed-in approvers decide too
			noDecider = append(noDecider, name)
		}
	}
	if len(noDecider) > 0 {
		out = append(out, fmt.Sprintf("no approver token is configured (approvers, %s): nobody can decide calls held by workflow %s; they end by their timeout",
			config.EnvAdminToken, strings.Join(noDecider, ", ")))
	}
	return out
}

// checkChannels probes the webhook/Slack destinations of the workflows in use that were never
// probed nor used, then logs every workflow without a working channel (at start and after a
// reload), so a broken approval path shows before a call depends on it.
func (s *Server) checkChannels(ctx context.Context) {
	c := s.snaps.Load().Config
	for _, name := range usedWorkflows(c) {
		wf, ok := c.WorkflowFor(name)
		if !ok || (wf.Destination.Type != config.DestinationWebhook && wf.Destination.Type != config.DestinationSlack) {
			continue
		}
		if slack.Uses(wf) {
			if _, known := s.slack.ChannelHealth(wf.Destination.Channel); !known {
				s.slack.Probe(ctx, wf.Destination.Channel)
			}
			continue
		}
		if _, known := s.notifier.ChannelHealth(wf.Destination.URL); !known {
			s.notifier.Probe(ctx, wf.Destination.URL)
		}
	}
	if ctx.Err() != nil {
		return
	}
	for _, p := range s.channelProblems() {
		s.log.Warn("approval channel not working: " + p)
	}
}

// slackProblems: a Slack channel whose messages do not arrive (no bot token, a failed
// auth.test probe or last request), and buttons nobody can use (no signing secret).
func (s *Server) slackProblems(name string, wf config.Workflow) []string {
	var out []string
	ch := wf.Destination.Channel
	if h, known := s.slack.ChannelHealth(ch); known && !h.OK {
		out = append(out, fmt.Sprintf("approval.%s: slack messages to %s do not arrive (%s)", name, ch, h.Detail))
	}
	if v, _ := s.opts.LookupEnv(config.EnvSlackSigningSecret); v == "" {
		out = append(out, fmt.Sprintf("approval.%s: Slack buttons cannot decide: %s is not set (decide in the console)", name, config.EnvSlackSigningSecret))
	}
	return out
}
