// Package notify tells approval channels about held tool calls (docs/contract.md §1 "webhooks out"):
// when a task starts awaiting approval and when its wait ends, it POSTs a JSON event to the
// workflow's webhook, or a short summary to a Slack incoming webhook. Approvals themselves go
// through the approvals API and console; these messages carry no buttons.
//
// Delivery never holds up a task: Manager.Subscribe callbacks only enqueue into a bounded
// queue, and one worker (Run) sends. Arguments are redacted with the workflow's
// redact_fields before they leave the process; webhook URLs embed secrets, so logs name only
// their scheme and host.
package notify

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/pins"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// Defaults.
const (
	DefaultQueueSize = 1000
	DefaultTimeout   = 5 * time.Second // per attempt
	maxAttempts      = 3
	maxRetryAfter    = 5 * time.Second
	dropWarnEvery    = 10 * time.Second
)

// Options configure a Notifier.
type Options struct {
	// Workflow returns the named approval workflow of the current config snapshot, so a reload
	// that changes a destination applies to the next event.
	Workflow func(name string) (config.Workflow, bool)
	// ConsoleURL is the approvals console, linked from every message ("" = no link).
	ConsoleURL string
	// Client sends the requests; nil = a client with a 5 s timeout that follows no redirects.
	Client *http.Client
	Logger *slog.Logger
	// Registerer receives tollgate_notifications_total; nil = no metrics.
	Registerer prometheus.Registerer
	// QueueSize bounds the events waiting to be sent; 0 = DefaultQueueSize.
	QueueSize int
	// Remember records on the task that its approval.requested event was delivered
	// (tasks.Manager.NoteMessage), so a restarted process sends the ones it had not (Resume);
	// nil: nothing is recorded and nothing resumed.
	Remember func(ctx context.Context, id string, ref tasks.MessageRef) (*tasks.Task, error)
}

// refKind is the tasks.MessageRef kind recording a delivered approval.requested event.
const refKind = "notify"

// Notifier sends approval events to webhook and Slack destinations. Create it with New, pass
// OnTaskChange to tasks.Manager.Subscribe and run Run on a goroutine.
type Notifier struct {
	opts    Options
	client  *http.Client
	timeout time.Duration // per attempt
	log     *slog.Logger
	met     *metrics
	queue   chan *item

	backoff       []time.Duration // wait before attempt 2, 3; tests shorten it
	maxRetryAfter time.Duration

	dropped  atomic.Int64
	lastWarn atomic.Int64 // unix nanos of the last "queue full" WARN

	health healthTable // per destination URL: probe, then last delivery
}

// item is one event waiting to be sent: a task's (task set) or a pin's (pin set).
type item struct {
	event    string
	task     *tasks.Task // a copy owned by the notifier
	pin      *pins.Event
	wf       config.Workflow
	enqueued time.Time
}

// logAttrs name the item in logs: the task or the tool, and the event.
func (it *item) logAttrs() []any {
	if it.pin != nil {
		return []any{"tool", it.pin.Tool, "event", it.event}
	}
	return []any{"task_id", it.task.ID, "event", it.event}
}

// New builds a Notifier. It sends nothing until Run is started.
func New(opts Options) *Notifier {
	n := &Notifier{
		opts:          opts,
		client:        opts.Client,
		log:           opts.Logger,
		met:           newMetrics(opts.Registerer),
		backoff:       []time.Duration{200 * time.Millisecond, time.Second},
		maxRetryAfter: maxRetryAfter,
	}
	if n.client == nil {
		n.client = &http.Client{
			Timeout: DefaultTimeout,
			// A redirect would carry approval details to a host nobody configured.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	n.timeout = n.client.Timeout
	if n.timeout <= 0 {
		n.timeout = DefaultTimeout // every attempt is bounded, whatever client was given
	}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	size := opts.QueueSize
	if size <= 0 {
		size = DefaultQueueSize
	}
	n.queue = make(chan *item, size) // pointers: an idle queue is 8 bytes a slot, not 176
	return n
}

// Event names, the "event" field of a webhook body.
const (
	EventRequested = "approval.requested" // a task is waiting for a decision
	EventVoted     = "approval.voted"     // one approval of several needed (min_approvals); still waiting
	EventDecided   = "approval.decided"   // approved, rejected or timed out (decision says by whom)
	EventCancelled = "approval.cancelled" // the requester cancelled before a decision
	EventExpired   = "approval.expired"   // the task TTL ended before a decision
)

// eventFor says which event, if any, a committed task change is. Only the start and the end of
// an approval wait are announced; execution progress is not a channel's business.
func eventFor(tr tasks.Transition) string {
	if tr.Task.Accelerated {
		return "" // forwarded by rule, nobody is asked
	}
	ev := tr.Event()
	switch {
	case ev == tasks.EventRequested:
		return EventRequested
	case ev == tasks.EventVoted:
		return EventVoted
	case tr.From != tasks.AwaitingApproval:
		return "" // EventAccelerated (nobody is asked), and every change after the decision
	}
	switch ev { // the end of the wait: decided, or given up before a decision
	case tasks.EventApproved, tasks.EventRejected, tasks.EventTimedOut:
		return EventDecided
	case tasks.EventCancelled:
		return EventCancelled
	case tasks.EventExpired:
		return EventExpired
	}
	return ""
}

// OnTaskChange is a tasks.Manager subscriber. It never blocks: the event is queued, or
// dropped (counted, WARN) when the queue is full.
func (n *Notifier) OnTaskChange(tr tasks.Transition) { n.enqueue(tr) }

// enqueue queues the event tr is for its workflow's destination, if any; it reports whether
// it queued one.
func (n *Notifier) enqueue(tr tasks.Transition) bool {
	t := tr.Task
	if t == nil || n.opts.Workflow == nil {
		return false
	}
	ev := eventFor(tr)
	if ev == "" {
		return false
	}
	wf, ok := n.opts.Workflow(t.Workflow)
	if !ok {
		return false // workflow removed by a reload: nowhere to send
	}
	return n.push(&item{event: ev, task: t, wf: wf})
}

// sends reports whether wf's destination is this package's: a webhook or a Slack incoming
// webhook (console: approvers look at the console; Slack with a channel: package slack posts).
func sends(wf config.Workflow) bool {
	dest := wf.Destination.Type
	return (dest == config.DestinationWebhook || dest == config.DestinationSlack) && wf.Destination.Channel == ""
}

// push queues it when its workflow's destination is this package's, or drops it when the
// queue is full (counted, WARN at most every dropWarnEvery).
func (n *Notifier) push(it *item) bool {
	if !sends(it.wf) {
		return false
	}
	it.enqueued = time.Now()
	select {
	case n.queue <- it:
		return true
	default:
		dest := it.wf.Destination.Type
		n.met.count(dest, resultDropped)
		total := n.dropped.Add(1)
		now := time.Now().UnixNano()
		last := n.lastWarn.Load()
		if now-last >= int64(dropWarnEvery) && n.lastWarn.CompareAndSwap(last, now) {
			n.log.Warn("notification queue full, event dropped",
				append(it.logAttrs(), "destination", dest, "dropped_total", total)...)
		}
		return false
	}
}

// Resume queues approval.requested for each task awaiting a decision in a webhook (or Slack
// incoming-webhook) workflow whose event was never delivered: still queued when the previous
// run stopped, or refused by the destination after the retries. Pass the tasks this process
// created (tasks.Manager.Mine) after they were loaded. The event keeps its delivery_id, so a
// receiver that got it after all (delivered, not yet recorded) can tell. It returns how many
// events it queued.
func (n *Notifier) Resume(pending []*tasks.Task) int {
	q := 0
	for _, t := range pending {
		if t.State == tasks.AwaitingApproval && len(t.MessagesOf(refKind)) == 0 &&
			n.enqueue(tasks.Transition{From: "", To: t.State, Task: t}) {
			q++
		}
	}
	return q
}

// Run sends queued events one at a time until ctx ends; an attempt in flight is aborted then,
// and events still queued are not sent.
func (n *Notifier) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case it := <-n.queue:
			if ctx.Err() != nil {
				return
			}
			n.send(ctx, *it)
		}
	}
}

// Dropped is how many events were dropped because the queue was full.
func (n *Notifier) Dropped() int64 { return n.dropped.Load() }
