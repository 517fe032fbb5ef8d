package notify

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/disclose"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/mrkdwn"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// SchemaVersion is the "version" field of webhook bodies; it changes only when a field
// changes meaning or goes away (new fields may be added).
const SchemaVersion = 1

// Webhook is the JSON body POSTed to a webhook destination (docs/configuration.md,
// "Approval notifications").
type Webhook struct {
	Version          int              `json:"version"`
	Event            string           `json:"event"`
	DeliveryID       string           `json:"delivery_id"` // same on every retry of one event
	TaskID           string           `json:"task_id"`
	Tool             string           `json:"tool"`
	Workflow         string           `json:"workflow"`
	Arguments        json.RawMessage  `json:"arguments"` // redacted per the workflow's redact_fields
	ArgsHash         string           `json:"args_hash"`
	State            string           `json:"state"`
	Status           string           `json:"status"`
	StatusMessage    string           `json:"status_message"`
	RequestedBy      string           `json:"requested_by"`
	Owner            string           `json:"owner"` // disclose.OwnerHash, never the session id
	CreatedAt        string           `json:"created_at"`
	ApprovalDeadline *string          `json:"approval_deadline"`
	Decision         *WebhookDecision `json:"decision"`
	ConsoleURL       string           `json:"console_url"`
	// Approvals are the votes so far and RequiredApprovals how many distinct ones the call
	// needs (approval.<name>.min_approvals): "k of N". Added in version 1 (new fields only).
	Approvals         []WebhookVote `json:"approvals"`
	RequiredApprovals int           `json:"required_approvals"`
}

// WebhookVote is one approver's approval of a call that needs several.
type WebhookVote struct {
	By     string `json:"by"`
	Reason string `json:"reason"`
	At     string `json:"at"`
}

// WebhookDecision is the verdict in a webhook body; null until decided.
type WebhookDecision struct {
	Approved bool   `json:"approved"`
	By       string `json:"by"`
	Reason   string `json:"reason"`
	At       string `json:"at"`
}

const timeFormat = "2006-01-02T15:04:05.000Z07:00"

func fmtTime(t time.Time) string { return t.UTC().Format(timeFormat) }

// redactedArgs is what may leave the process (disclose.Arguments) under wf, the workflow the
// message is sent for.
func redactedArgs(t *tasks.Task, wf config.Workflow) json.RawMessage {
	return disclose.Arguments(t.Arguments, t.Workflow, func(string) (config.Workflow, bool) { return wf, true })
}

// deliveryID names one event of t: the same on every retry, and when a restarted process sends
// an event it had not recorded as delivered.
func deliveryID(t *tasks.Task) string { return t.ID + "/" + string(t.State) }

func webhookBody(it item, consoleURL string) ([]byte, error) {
	t := it.task
	w := Webhook{
		Version: SchemaVersion, Event: it.event, DeliveryID: deliveryID(t),
		TaskID: t.ID, Tool: t.Tool, Workflow: t.Workflow,
		Arguments: redactedArgs(t, it.wf), ArgsHash: t.ArgsHash,
		State: string(t.State), Status: t.WireStatus(), StatusMessage: t.StatusMessage,
		RequestedBy: t.RequestedBy, Owner: disclose.OwnerHash(t.Owner),
		CreatedAt: fmtTime(t.CreatedAt), ConsoleURL: consoleURL,
	}
	if !t.ApprovalDeadline.IsZero() {
		d := fmtTime(t.ApprovalDeadline)
		w.ApprovalDeadline = &d
	}
	if d := t.Decision; d != nil {
		w.Decision = &WebhookDecision{Approved: d.Approved, By: d.By, Reason: d.Reason, At: fmtTime(d.At)}
	}
	w.Approvals = make([]WebhookVote, 0, len(t.Approvals))
	for _, v := range t.Approvals {
		w.Approvals = append(w.Approvals, WebhookVote{By: v.By, Reason: v.Reason, At: fmtTime(v.At)})
	}
	if !t.Accelerated {
		w.RequiredApprovals = tasks.RequiredApprovals(t, func(string) (config.Workflow, bool) { return it.wf, true })
	}
	if it.event == EventVoted {
		// every vote is its own event; the state alone would repeat the request's id
		w.DeliveryID = fmt.Sprintf("%s/vote-%d", t.ID, len(t.Approvals))
	}
	return jsonrpc.Marshal(w)
}

// Slack limits: a section's text is at most 3000 characters, a field's 2000.
const (
	slackArgsMax  = 2000
	slackFieldMax = 200
)

type slackText struct {
	Type string `json:"type"` // mrkdwn
	Text string `json:"text"`
}

type slackBlock struct {
	Type     string      `json:"type"` // section | context
	Text     *slackText  `json:"text,omitempty"`
	Fields   []slackText `json:"fields,omitempty"`
	Elements []slackText `json:"elements,omitempty"`
}

// Slack is an incoming-webhook message: text is the notification fallback, blocks the layout.
type Slack struct {
	Text   string       `json:"text"`
	Blocks []slackBlock `json:"blocks"`
}

func md(s string) *slackText { return &slackText{Type: "mrkdwn", Text: s} }

// code renders s inside a code span or block; backticks inside would end it early.

func slackTitle(it item) string {
	t := it.task
	d := t.Decision
	switch {
	case it.event == EventRequested:
		return "Approval needed"
	case it.event == EventCancelled:
		return "Cancelled by the requester before a decision"
	case it.event == EventExpired:
		return "Expired before a decision (task TTL ended)"
	case it.event == EventVoted && len(t.Approvals) > 0:
		return fmt.Sprintf("Approved by %s (%s): waiting for another approver",
			mrkdwn.Escape(t.Approvals[len(t.Approvals)-1].By), kOfN(it))
	case t.State == tasks.TimedOut:
		return "Approval timed out: rejected"
	case d != nil && d.By == tasks.ByTimeout:
		return "Approval timed out: approved (on_timeout: approve)"
	case d != nil && d.Approved:
		return "Approved by " + mrkdwn.Escape(d.By)
	case d != nil:
		return "Rejected by " + mrkdwn.Escape(d.By)
	}
	return mrkdwn.Escape(t.StatusMessage)
}

// kOfN is "1 of 2 approvals: alice" for a call that needs several approvals.
func kOfN(it item) string {
	t := it.task
	n := tasks.RequiredApprovals(t, func(string) (config.Workflow, bool) { return it.wf, true })
	s := fmt.Sprintf("%d of %d approvals", len(t.Approvals), n)
	if len(t.Approvals) > 0 {
		names := make([]string, len(t.Approvals))
		for i, v := range t.Approvals {
			names[i] = mrkdwn.Escape(mrkdwn.Truncate(v.By, slackFieldMax))
		}
		s += ": " + strings.Join(names, ", ")
	}
	return s
}

func slackBody(it item, consoleURL string) ([]byte, error) {
	t := it.task
	title := slackTitle(it)
	tool := mrkdwn.Truncate(t.Tool, slackFieldMax)
	wf := mrkdwn.Truncate(t.Workflow, slackFieldMax)

	fields := []slackText{
		{Type: "mrkdwn", Text: "*Tool*\n`" + mrkdwn.Code(tool) + "`"},
		{Type: "mrkdwn", Text: "*Workflow*\n" + mrkdwn.Escape(wf)},
		{Type: "mrkdwn", Text: "*Task*\n`" + mrkdwn.Code(t.ID) + "`"},
	}
	if t.RequestedBy != "" {
		fields = append(fields, slackText{Type: "mrkdwn", Text: "*Requested by*\n" + mrkdwn.Escape(mrkdwn.Truncate(t.RequestedBy, slackFieldMax))})
	}
	if it.event == EventRequested && !t.ApprovalDeadline.IsZero() {
		fields = append(fields, slackText{Type: "mrkdwn", Text: "*Deadline*\n" + fmtTime(t.ApprovalDeadline)})
	}
	if n := tasks.RequiredApprovals(t, func(string) (config.Workflow, bool) { return it.wf, true }); n > 1 && !t.Accelerated {
		fields = append(fields, slackText{Type: "mrkdwn", Text: "*Approvals*\n" + kOfN(it)})
	}
	if d := t.Decision; d != nil && d.Reason != "" {
		fields = append(fields, slackText{Type: "mrkdwn", Text: "*Reason*\n" + mrkdwn.Escape(mrkdwn.Truncate(d.Reason, slackFieldMax))})
	}

	pretty := disclose.Pretty(redactedArgs(t, it.wf))

	blocks := []slackBlock{
		{Type: "section", Text: md(fmt.Sprintf("*%s*: `%s`", title, mrkdwn.Code(tool)))},
		{Type: "section", Fields: fields},
		{Type: "section", Text: md("*Arguments* (redacted)\n```" + mrkdwn.Code(mrkdwn.Truncate(pretty, slackArgsMax)) + "```")},
	}
	if consoleURL != "" {
		blocks = append(blocks, slackBlock{Type: "context", Elements: []slackText{
			{Type: "mrkdwn", Text: "<" + mrkdwn.Escape(consoleURL) + "|Open the approvals console> (task `" + mrkdwn.Code(t.ID) + "`)"},
		}})
	}
	text := fmt.Sprintf("Tollgate: %s: %s (workflow %s)", title, mrkdwn.Escape(tool), mrkdwn.Escape(wf))
	return jsonrpc.Marshal(Slack{Text: text, Blocks: blocks})
}
