package gwtools

import (
	"encoding/json"
	"strings"
	"time"
	"unique"

	"github.com/tollgate-mcp/tollgate/internal/events"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// TaskEvent maps a committed task transition to an event: its type and data (never the
// arguments or result). ok is false for states that are not worth waking a client for
// (Executing follows an approval at once). consoleURL is the one the task manager names in
// status messages (kept by pointer: every queued event shares it).
func TaskEvent(tr tasks.Transition, consoleURL *string) (typ string, data events.Deferred, ok bool) {
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
	d := &taskEventData{tool: unique.Make(t.Tool), state: index(eventStates, string(t.State)), status: index(eventStatuses, t.WireStatus())}
	switch {
	case d.state < 0 || d.status < 0: // a state this package does not name: kept as it is
		d.state, d.status, d.msg = -1, -1, string(t.State)+"\x00"+t.WireStatus()+"\x00"+t.StatusMessage
	case t.State == tasks.AwaitingApproval && len(t.Approvals) < 1<<15 && t.RequiredApprovals < 1<<15 && consoleURL != nil &&
		t.StatusMessage == tasks.AwaitingMessage(t.Workflow, t.ID, *consoleURL, len(t.Approvals), t.RequiredApprovals):
		// The message of a task awaiting a decision is rebuilt when the event is read rather
		// than kept: it is most of what a pending approval's queued event would cost.
		d.rebuild, d.workflow, d.id, d.console = true, unique.Make(t.Workflow), t.ID, consoleURL
		d.given, d.need = int16(len(t.Approvals)), int16(t.RequiredApprovals)
	default:
		d.msg = t.StatusMessage
	}
	if dec := t.Decision; dec != nil && (typ == events.TypeTaskDecided || t.State == tasks.TimedOut) {
		d.decision = &decisionView{Approved: dec.Approved, By: dec.By, Reason: dec.Reason, At: dec.At.UTC().Truncate(time.Millisecond)}
	}
	if t.Error != nil {
		d.err = &eventError{Code: t.Error.Code, Message: t.Error.Message, Name: t.Error.Name()}
	}
	return typ, d, true
}

// taskEventData is a task event's data as a session's queue keeps it until a reader takes it
// (events.Deferred), 80 bytes: the tool and workflow names interned, status and state as
// indexes of the package's constants, and the status message of a task awaiting a decision
// rebuilt from what it is made of (the task id is the queued event's own).
type taskEventData struct {
	tool, workflow unique.Handle[string]
	id             string
	msg            string
	console        *string
	decision       *decisionView
	err            *eventError
	given, need    int16
	state, status  int8
	rebuild        bool
}

type eventError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Name    string `json:"name"`
}

var (
	eventStates = func() (n []string) {
		for _, s := range tasks.States() {
			n = append(n, string(s))
		}
		return n
	}()
	eventStatuses = func() (n []string) {
		for _, s := range tasks.States() {
			if w := s.Wire(); index(n, w) < 0 {
				n = append(n, w)
			}
		}
		return append(n, "input_required")
	}()
)

func index(names []string, s string) int8 {
	for i, n := range names {
		if n == s {
			return int8(i)
		}
	}
	return -1
}

// EventData encodes the data as the client reads it: keys in sorted order, as a JSON object
// built from a map has them.
func (d *taskEventData) EventData() json.RawMessage {
	var state, status, msg string
	if d.state < 0 {
		var rest string
		state, rest, _ = strings.Cut(d.msg, "\x00")
		status, msg, _ = strings.Cut(rest, "\x00")
	} else {
		state, status, msg = eventStates[d.state], eventStatuses[d.status], d.msg
	}
	if d.rebuild {
		msg = tasks.AwaitingMessage(d.workflow.Value(), d.id, *d.console, int(d.given), int(d.need))
	}
	b, err := json.Marshal(struct {
		Decision      *decisionView `json:"decision,omitempty"`
		Error         *eventError   `json:"error,omitempty"`
		State         string        `json:"state"`
		Status        string        `json:"status"`
		StatusMessage string        `json:"statusMessage,omitempty"`
		ToolName      string        `json:"toolName"`
	}{d.decision, d.err, state, status, msg, d.tool.Value()})
	if err != nil {
		return nil
	}
	return b
}

// PublishTaskChange queues t's transition as an event for the session that created the task.
// Pass it to (*tasks.Manager).Subscribe; it never blocks.
func (g *Tools) PublishTaskChange(tr tasks.Transition) {
	typ, data, ok := TaskEvent(tr, &g.opts.ConsoleURL)
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
