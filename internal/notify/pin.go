package notify

import (
	"fmt"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/mrkdwn"
	"github.com/tollgate-mcp/tollgate/internal/pins"
)

// Pin events (governance.pins, docs/contract.md "Pinned tool definitions"), the "event" field
// of a pin webhook body; sent to governance.pins.workflow's destination.
const (
	EventPinQuarantined = "pin.quarantined" // a tool's definition changed (or a new tool appeared) and is hidden
	EventPinAccepted    = "pin.accepted"    // an approver accepted the new definition: the tool is back
	EventPinRejected    = "pin.rejected"    // an approver rejected it: refused while the upstream serves it
)

// Bounds on the diff summary a pin event carries (pins.Summary).
const (
	webhookDiffLines = 200
	webhookDiffLine  = 500
	slackDiffLines   = 40
	slackDiffLine    = 160
)

// PinWebhook is the JSON body POSTed for a pin event.
type PinWebhook struct {
	Version        int    `json:"version"`
	Event          string `json:"event"`
	DeliveryID     string `json:"delivery_id"` // same on every retry of one event
	Tool           string `json:"tool"`
	Reason         string `json:"reason"`          // changed | new | too_large
	Digest         string `json:"digest"`          // the new definition's
	AcceptedDigest string `json:"accepted_digest"` // "" for a new tool
	Changes        int    `json:"changes"`         // definitions seen since the accepted one
	// Diff is a bounded summary of what changed (pin.quarantined): each field's name, then its
	// removed ("- ") and added ("+ ") lines; DiffTruncated says lines were left out.
	Diff          []string `json:"diff"`
	DiffTruncated bool     `json:"diff_truncated"`
	By            string   `json:"by"` // the approver (accepted, rejected)
	At            string   `json:"at"`
	ConsoleURL    string   `json:"console_url"`
}

var pinEvents = map[string]string{
	pins.StatusQuarantined: EventPinQuarantined, "accepted": EventPinAccepted, pins.StatusRejected: EventPinRejected,
}

// OnPinEvent queues a pin event for wf, governance.pins.workflow's workflow (a webhook or a
// Slack incoming webhook destination; others send nothing here). A quarantine is announced
// once (pins.Event.Notify), however often a flapping upstream changes the tool. It never
// blocks; it reports whether it queued the event.
func (n *Notifier) OnPinEvent(e pins.Event, wf config.Workflow) bool {
	ev, ok := pinEvents[e.Kind]
	if !ok || !e.Notify() {
		return false
	}
	return n.push(&item{event: ev, pin: &e, wf: wf})
}

// pinConsoleURL is the console's list of quarantined tools.
func pinConsoleURL(consoleURL string) string {
	if consoleURL == "" {
		return ""
	}
	return consoleURL + "#pins"
}

func pinWebhookBody(it item, consoleURL string) ([]byte, error) {
	e := it.pin
	w := PinWebhook{
		Version: SchemaVersion, Event: it.event,
		DeliveryID: "pin/" + e.Tool + "/" + e.Digest + "/" + e.Kind,
		Tool:       e.Tool, Reason: e.Reason, Digest: e.Digest, AcceptedDigest: e.AcceptedDigest, Changes: e.Changes,
		By: e.By, At: fmtTime(e.At), ConsoleURL: pinConsoleURL(consoleURL),
	}
	w.Diff, w.DiffTruncated = pins.Summary(e.Diff, webhookDiffLines, webhookDiffLine)
	if w.Diff == nil {
		w.Diff = []string{}
	}
	return jsonrpc.Marshal(w)
}

// pinSlackDiff is the bounded, escaped diff summary of a quarantine as a Slack code block
// ("" when there is nothing to show).
func pinSlackDiff(e pins.Event) string {
	text := pins.SummaryText(e.Diff, slackDiffLines, slackDiffLine)
	if text == "" {
		return ""
	}
	return "*What changed*\n```" + mrkdwn.Code(mrkdwn.Truncate(text, slackArgsMax)) + "```"
}

func pinSlackBody(it item, consoleURL string) ([]byte, error) {
	e := it.pin
	title := mrkdwn.Escape(mrkdwn.Truncate(e.Headline(), slackArgsMax))
	tool := mrkdwn.Truncate(e.Tool, slackFieldMax)
	fields := []slackText{
		{Type: "mrkdwn", Text: "*Tool*\n`" + mrkdwn.Code(tool) + "`"},
		{Type: "mrkdwn", Text: "*Definition*\n`" + mrkdwn.Code(mrkdwn.Truncate(e.Digest, slackFieldMax)) + "`"},
	}
	if e.Kind == pins.StatusQuarantined && e.Changes > 1 {
		fields = append(fields, slackText{Type: "mrkdwn", Text: fmt.Sprintf("*Changes seen*\n%d", e.Changes)})
	}
	blocks := []slackBlock{
		{Type: "section", Text: md(fmt.Sprintf("*%s*: `%s`", title, mrkdwn.Code(tool)))},
		{Type: "section", Fields: fields},
	}
	if d := pinSlackDiff(*e); d != "" {
		blocks = append(blocks, slackBlock{Type: "section", Text: md(d)})
	}
	if u := pinConsoleURL(consoleURL); u != "" {
		blocks = append(blocks, slackBlock{Type: "context", Elements: []slackText{
			{Type: "mrkdwn", Text: "<" + mrkdwn.Escape(u) + "|Review it in the console> (tool `" + mrkdwn.Code(tool) + "`)"},
		}})
	}
	text := fmt.Sprintf("Tollgate: %s: %s", title, mrkdwn.Escape(tool))
	return jsonrpc.Marshal(Slack{Text: text, Blocks: blocks})
}
