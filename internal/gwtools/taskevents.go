package gwtools

import (
	"time"

	"github.com/tollgate-mcp/tollgate/internal/events"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// TaskEvent maps a committed task transition to an event: its type and data (never the
// arguments or result). ok is false for states that are not worth waking a client for
// (Executing follows an approval at once).
func TaskEvent(tr tasks.Transition) (typ string, data map[string]any, ok bool) {
	t := tr.Task
	switch tr.Event() {
	case tasks.EventRequested, tasks.EventAccelerated: // approved at once when accelerated (docs/contract.md §2)
		typ = events.TypeTaskCreated
	case tasks.EventApproved, tasks.EventRejected:
		typ = events.TypeTaskDecided
	case tasks.EventCompleted:
		typ = events.TypeTaskCompleted
	case tasks.EventFailed, tasks.EventTimedOut:
		typ = events.TypeTaskFailed
	case tasks.EventCancelled:
		typ = events.TypeTaskCancelled
	case tasks.EventExpired:
		typ = events.TypeTaskExpired
	case tasks.EventInput:
		if t.PendingQuestion() == nil {
			return "", nil, false // the answer was taken: nothing new for the client
		}
		typ = events.TypeTaskInputRequired
	default: // EventStarted
		return "", nil, false
	}
	data = map[string]any{
		"toolName": t.Tool,
		"status":   t.WireStatus(),
		"state":    string(t.State),
	}
	if t.StatusMessage != "" {
		data["statusMessage"] = t.StatusMessage
	}
	if d := t.Decision; d != nil && (typ == events.TypeTaskDecided || t.State == tasks.TimedOut) {
		data["decision"] = decisionView{Approved: d.Approved, By: d.By, Reason: d.Reason, At: d.At.UTC().Truncate(time.Millisecond)}
	}
	if t.Error != nil {
		data["error"] = map[string]any{"code": t.Error.Code, "name": t.Error.Name(), "message": t.Error.Message}
	}
	return typ, data, true
}

// PublishTaskChange queues t's transition as an event for the session that created the task.
// Pass it to (*tasks.Manager).Subscribe; it never blocks.
func (g *Tools) PublishTaskChange(tr tasks.Transition) {
	typ, data, ok := TaskEvent(tr)
	if !ok {
		return
	}
	t := tr.Task
	key := t.SessionID
	if key == "" {
		key = t.Owner
	}
	g.hub.Publish(key, typ, t.ID, data)
}
