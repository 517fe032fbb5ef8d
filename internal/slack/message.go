package slack

import (
	"fmt"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/disclose"
	"github.com/tollgate-mcp/tollgate/internal/mrkdwn"
	"github.com/tollgate-mcp/tollgate/internal/pins"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// Action ids of the two buttons; their value is the task id.
const (
	ActionApprove = "tollgate_approve"
	ActionReject  = "tollgate_reject"
	blockDecision = "tollgate_decision"
)

// Block Kit limits: a section's text at most 3000 characters, a field's 2000, a button's 75.
const (
	argsMax  = 2000
	fieldMax = 200
)

// Message is the JSON body of chat.postMessage (channel, text, blocks) and chat.update
// (channel, ts, text, blocks). Text is the notification fallback.
type Message struct {
	Channel string  `json:"channel"`
	TS      string  `json:"ts,omitempty"`
	Text    string  `json:"text"`
	Blocks  []Block `json:"blocks"`
}

// Block is a section, actions or context block.
type Block struct {
	Type     string    `json:"type"`
	BlockID  string    `json:"block_id,omitempty"`
	Text     *Text     `json:"text,omitempty"`
	Fields   []Text    `json:"fields,omitempty"`
	Elements []Element `json:"elements,omitempty"`
}

// Text is a mrkdwn or plain_text composition object.
type Text struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// Element is a button (in actions) or a text (in context).
type Element struct {
	Type     string `json:"type"`
	Text     any    `json:"text,omitempty"` // *Text for a button, string for a context mrkdwn
	ActionID string `json:"action_id,omitempty"`
	Value    string `json:"value,omitempty"`
	Style    string `json:"style,omitempty"`
}

func md(s string) *Text { return &Text{Type: "mrkdwn", Text: s} }

func fmtTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 MST") }

// title is the message's headline for the task's current state.
func title(t *tasks.Task) string {
	d := t.Decision
	switch {
	case t.State == tasks.AwaitingApproval:
		return "Approval needed"
	case t.State == tasks.Cancelled && d == nil:
		return "Cancelled by the requester before a decision"
	case t.State == tasks.Expired && d == nil:
		return "Expired before a decision (task TTL ended)"
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

// shownArguments is the task's arguments as a message shows them: redacted (redact_fields
// hidden, fail closed), numbers as written.
func shownArguments(t *tasks.Task, wf config.Workflow) string {
	return disclose.Pretty(disclose.Arguments(t.Arguments, t.Workflow, func(string) (config.Workflow, bool) { return wf, true }))
}

// truncated reports whether a message cannot show the call whole (its tool name or its
// redacted arguments cut to Block Kit's limits). Such a request carries no buttons: nobody
// approves what they could not read; the console shows it in full.
func truncated(t *tasks.Task, wf config.Workflow) bool {
	return len(t.Tool) > fieldMax || len(shownArguments(t, wf)) > argsMax
}

// blocks is the body shared by the request and the outcome: headline, fields, arguments.
func blocks(t *tasks.Task, wf config.Workflow, head string) []Block {
	tool := mrkdwn.Truncate(t.Tool, fieldMax)
	fields := []Text{
		{Type: "mrkdwn", Text: "*Tool*\n`" + mrkdwn.Code(tool) + "`"},
		{Type: "mrkdwn", Text: "*Workflow*\n" + mrkdwn.Escape(mrkdwn.Truncate(t.Workflow, fieldMax))},
	}
	requester := t.RequestedBy
	if requester == "" {
		requester = "anonymous (owner " + disclose.OwnerHash(t.Owner) + ")"
	}
	fields = append(fields, Text{Type: "mrkdwn", Text: "*Requested by*\n" + mrkdwn.Escape(mrkdwn.Truncate(requester, fieldMax))})
	if t.State == tasks.AwaitingApproval && !t.ApprovalDeadline.IsZero() {
		fields = append(fields, Text{Type: "mrkdwn", Text: "*Expires*\n" + fmtTime(t.ApprovalDeadline)})
	}
	if n := tasks.RequiredApprovals(t, func(string) (config.Workflow, bool) { return wf, true }); n > 1 && !t.Accelerated {
		fields = append(fields, Text{Type: "mrkdwn", Text: "*Approvals*\n" + kOfN(t, n)})
	}
	if d := t.Decision; d != nil {
		fields = append(fields, Text{Type: "mrkdwn", Text: "*Decided*\n" + fmtTime(d.At)})
		if d.Reason != "" {
			fields = append(fields, Text{Type: "mrkdwn", Text: "*Reason*\n" + mrkdwn.Escape(mrkdwn.Truncate(d.Reason, fieldMax))})
		}
	}
	out := []Block{
		{Type: "section", Text: md(fmt.Sprintf("*%s*: `%s`", head, mrkdwn.Code(tool)))},
		{Type: "section", Fields: fields},
		{Type: "section", Text: md("*Arguments* (redacted)\n```" + mrkdwn.Code(mrkdwn.Truncate(shownArguments(t, wf), argsMax)) + "```")},
	}
	if p := t.PreviousRejection; p != nil {
		// The same call was rejected before and its requester told; this is its request again.
		txt := "*Rejected before* by " + mrkdwn.Escape(mrkdwn.Truncate(p.By, fieldMax)) + " at " + fmtTime(p.At) +
			" (task `" + mrkdwn.Code(p.TaskID) + "`)"
		if p.Reason != "" {
			txt += "\n*Earlier reason*: " + mrkdwn.Escape(mrkdwn.Truncate(p.Reason, fieldMax))
		}
		out = append(out, Block{Type: "section", Text: md(txt)})
	}
	return out
}

// kOfN is "1 of 2 approvals: alice" for a call that needs n approvals (min_approvals).
func kOfN(t *tasks.Task, n int) string {
	s := fmt.Sprintf("%d of %d approvals", len(t.Approvals), n)
	for i, v := range t.Approvals {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		s += sep + mrkdwn.Escape(mrkdwn.Truncate(v.By, fieldMax))
	}
	return s
}

func contextBlock(t *tasks.Task, consoleURL string) Block {
	s := "Task `" + mrkdwn.Code(t.ID) + "`"
	if consoleURL != "" {
		s += " · <" + mrkdwn.Escape(consoleURL) + "|Open the approvals console>"
	}
	return Block{Type: "context", Elements: []Element{{Type: "mrkdwn", Text: s}}}
}

// requestMessage asks for a decision: the call and Approve / Reject buttons — or, when the
// message cannot show the call whole (truncated), a pointer to the console instead.
// A call that can no longer run (cannot, docs/contract.md §4 cannotRun) says why, and offers
// Reject alone: approving it would only fail the task.
// A held call nobody waits for any more (gone) says so, and how long its outcome is kept.
func requestMessage(t *tasks.Task, wf config.Workflow, consoleURL string, cannot *tasks.Unrunnable, gone *tasks.NotWaiting) Message {
	b := blocks(t, wf, "Approval needed")
	if gone != nil {
		b = append(b, Block{Type: "section", Text: md(":hourglass: " + mrkdwn.Escape(mrkdwn.Truncate(gone.Message, fieldMax)))})
	}
	if cannot != nil {
		b = append(b, Block{Type: "section", Text: md(":warning: *Cannot run any more* (" + mrkdwn.Escape(cannot.Reason) + "): " +
			mrkdwn.Escape(mrkdwn.Truncate(cannot.Message, fieldMax)) + ". Approve is not offered; reject to tell the requester.")})
	}
	if truncated(t, wf) {
		where := "with `tollgate approvals show " + mrkdwn.Code(t.ID) + "`"
		if consoleURL != "" {
			where = "in the <" + mrkdwn.Escape(consoleURL) + "|approvals console>"
		}
		b = append(b, Block{Type: "section", Text: md("This call is too large to show here in full, so it cannot be decided in Slack: read and decide it " + where + ".")})
	} else {
		buttons := []Element{
			{Type: "button", Text: &Text{Type: "plain_text", Text: "Approve"}, ActionID: ActionApprove, Value: t.ID, Style: "primary"},
			{Type: "button", Text: &Text{Type: "plain_text", Text: "Reject"}, ActionID: ActionReject, Value: t.ID, Style: "danger"},
		}
		if cannot != nil {
			buttons = buttons[1:]
		}
		b = append(b, Block{Type: "actions", BlockID: blockDecision, Elements: buttons})
	}
	b = append(b, contextBlock(t, consoleURL))
	return Message{Text: fmt.Sprintf("Tollgate: approval needed: %s (workflow %s)", mrkdwn.Escape(mrkdwn.Truncate(t.Tool, fieldMax)), mrkdwn.Escape(mrkdwn.Truncate(t.Workflow, fieldMax))), Blocks: b}
}

// outcomeMessage replaces the request once the wait ended: no buttons, the outcome and who.
func outcomeMessage(t *tasks.Task, wf config.Workflow, consoleURL string) Message {
	head := title(t)
	b := append(blocks(t, wf, head), contextBlock(t, consoleURL))
	return Message{Text: fmt.Sprintf("Tollgate: %s: %s", head, mrkdwn.Escape(mrkdwn.Truncate(t.Tool, fieldMax))), Blocks: b}
}

// Bounds on a pin message's diff summary (pins.SummaryText).
const (
	pinDiffLines = 40
	pinDiffLine  = 160
)

// pinMessage tells the channel of a pin event (governance.pins): a quarantined tool with a
// bounded summary of what changed, or an approver's decision. No buttons: pins are decided in
// the console, the CLI or the API, linked here.
func pinMessage(e pins.Event, consoleURL string) Message {
	head := mrkdwn.Escape(mrkdwn.Truncate(e.Headline(), argsMax))
	tool := mrkdwn.Truncate(e.Tool, fieldMax)
	fields := []Text{
		{Type: "mrkdwn", Text: "*Tool*\n`" + mrkdwn.Code(tool) + "`"},
		{Type: "mrkdwn", Text: "*Definition*\n`" + mrkdwn.Code(mrkdwn.Truncate(e.Digest, fieldMax)) + "`"},
	}
	b := []Block{
		{Type: "section", Text: md(fmt.Sprintf("*%s*: `%s`", head, mrkdwn.Code(tool)))},
		{Type: "section", Fields: fields},
	}
	if text := pins.SummaryText(e.Diff, pinDiffLines, pinDiffLine); text != "" {
		b = append(b, Block{Type: "section", Text: md("*What changed*\n```" + mrkdwn.Code(mrkdwn.Truncate(text, argsMax)) + "```")})
	}
	where := "Decide it with `tollgate pins accept|reject " + mrkdwn.Code(tool) + "`"
	if consoleURL != "" {
		where = "<" + mrkdwn.Escape(consoleURL+"#pins") + "|Review it in the console> or with `tollgate pins`"
	}
	b = append(b, Block{Type: "context", Elements: []Element{{Type: "mrkdwn", Text: where}}})
	return Message{Text: fmt.Sprintf("Tollgate: %s: %s", head, mrkdwn.Escape(tool)), Blocks: b}
}
