// Package slack is the interactive Slack channel for approvals (issue 18, docs/slack.md): a
// workflow whose destination is `{type: slack, channel: "#approvals"}` gets, for each held
// call, a Block Kit message posted with the bot token (chat.postMessage) carrying the tool,
// the requester, the redacted arguments, the deadline and Approve / Reject buttons. When the
// wait ends — decided in Slack, the console, the CLI, by timeout, cancel or expiry — the
// message is replaced (chat.update) by the outcome and who decided.
//
// A click comes back as a signed interactivity callback (Interactions). It is verified as
// Slack documents it, the Slack user is mapped to an approver by approvers[].slack_user_id,
// and the decision goes through the approvals API's path (Options.Decide = approval.Decide),
// so audit, self-approval refusal, re-check and exactly-once execution stay in one place.
//
// Slack being slow or down never holds up a call: task changes are only queued (bounded), one
// worker sends with retries and backoff, and failures show on /readyz through Health. The bot
// token and the signing secret are never logged.
package slack

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/pins"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// Defaults and bounds (docs/SECURITY.md "Limits").
const (
	DefaultQueueSize = 1000
	DefaultTimeout   = 5 * time.Second // per attempt
	// MaxMessages bounds the (channel, ts) pairs remembered for tasks awaiting a decision, so
	// their message can be updated; the oldest is forgotten first (its message then keeps its
	// buttons, and a click on them is answered "no longer pending").
	MaxMessages   = 10000
	maxAttempts   = 3
	maxRetryAfter = 5 * time.Second
	dropWarnEvery = 10 * time.Second
)

// DecideFunc decides a task as approver: approval.Decide over the task manager.
type DecideFunc func(ctx context.Context, id, approver string, approve bool, reason string) (*tasks.Task, error)

// Options configure a Slack channel.
type Options struct {
	// Workflow returns the named workflow of the current config snapshot.
	Workflow func(name string) (config.Workflow, bool)
	// Approver maps a Slack user id to an approver name (approvers[].slack_user_id of the
	// current snapshot).
	Approver func(slackUserID string) (string, bool)
	// Decide records a decision (approval.Decide).
	Decide DecideFunc
	// Lookup returns a task by id for the approvers (tasks.Manager.Lookup): a click is checked
	// against the messages kept with it before Decide.
	Lookup func(ctx context.Context, id string) (*tasks.Task, error)
	// Remember keeps a posted message's place with its task (tasks.Manager.NoteMessage), so
	// the message is updated after a restart or when another replica ends the wait; nil: the
	// place is kept in memory only.
	// It returns the task as it now is.
	Remember func(ctx context.Context, id string, ref tasks.MessageRef) (*tasks.Task, error)
	// BotToken is $TOLLGATE_SLACK_BOT_TOKEN; empty: nothing is posted (Health says why).
	BotToken string
	// SigningSecret is $TOLLGATE_SLACK_SIGNING_SECRET; empty: Interactions answers 404.
	SigningSecret string
	// APIURL is the Web API base ($TOLLGATE_SLACK_API_URL); "" = config.DefaultSlackAPIURL.
	APIURL string
	// ConsoleURL is linked from each message ("" = no link).
	ConsoleURL string
	// Client sends the requests; nil = a 5 s client that follows no redirects.
	Client     *http.Client
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// QueueSize bounds the requests waiting to be sent; 0 = DefaultQueueSize.
	QueueSize int
	// Now is the clock of the signature window; nil = time.Now.
	Now func() time.Time
	// CannotRun tells why a pending call could no longer run if approved now (nil = nothing
	// known), read when its request is posted or updated: the message says so and offers
	// Reject alone. Nil = never.
	CannotRun func(t *tasks.Task) *tasks.Unrunnable
	// NotWaiting tells that nobody waits for a pending held call any more (nil = someone
	// may), read as CannotRun is: the message says so. Nil = never.
	NotWaiting func(t *tasks.Task) *tasks.NotWaiting
}

// Slack posts approval messages and takes the clicks on their buttons. Create it with New,
// pass OnTaskChange to tasks.Manager.Subscribe, run Run, and mount Interactions.
type Slack struct {
	opts    Options
	client  *http.Client
	timeout time.Duration
	log     *slog.Logger
	met     *metrics
	queue   chan *job
	now     func() time.Time
	backoff []time.Duration // before attempts 2 and 3; tests shorten it

	dropped  atomic.Int64
	lastWarn atomic.Int64

	msgs    messages
	replays replayCache
	health  healthTable
}

// jobKind says what a queued job sends.
type jobKind int

const (
	jobPost    jobKind = iota // chat.postMessage: a call awaits a decision
	jobUpdate                 // chat.update: the wait ended
	jobVote                   // chat.update: one of several approvals came; still waiting
	jobRespond                // response_url: an ephemeral answer to the clicking user
	jobPin                    // chat.postMessage: a pin event (governance.pins), no buttons
)

type job struct {
	kind jobKind
	task *tasks.Task // a copy owned by the job
	pin  *pins.Event // jobPin
	wf   config.Workflow
	url  string // jobRespond: the payload's response_url
	text string // jobRespond
	// refresh: a jobVote from Refresh, sent only if the task, read again, still awaits a
	// decision (the outcome's own update may have been queued meanwhile).
	refresh  bool
	enqueued time.Time
}

// New builds the channel. It sends nothing until Run is started.
func New(o Options) *Slack {
	s := &Slack{opts: o, client: o.Client, log: o.Logger, met: newMetrics(o.Registerer), now: o.Now,
		backoff: []time.Duration{200 * time.Millisecond, time.Second}}
	if s.opts.APIURL == "" {
		s.opts.APIURL = config.DefaultSlackAPIURL
	}
	if s.client == nil {
		s.client = &http.Client{
			Timeout: DefaultTimeout,
			// A redirect would carry the bot token or approval details to an unconfigured host.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	s.timeout = s.client.Timeout
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	size := o.QueueSize
	if size <= 0 {
		size = DefaultQueueSize
	}
	s.queue = make(chan *job, size) // pointers: an idle queue is 8 bytes a slot, not 200
	return s
}

// Uses reports whether wf posts through this channel (a slack destination with a channel).
func Uses(wf config.Workflow) bool {
	return wf.Destination.Type == config.DestinationSlack && wf.Destination.Channel != ""
}

// OnTaskChange is a tasks.Manager subscriber: the start of an approval wait is posted, its end
// updates the message. It never blocks: the job is queued, or dropped (counted, WARN).
func (s *Slack) OnTaskChange(tr tasks.Transition) {
	t := tr.Task
	if t == nil || s.opts.Workflow == nil || t.Accelerated {
		return
	}
	var kind jobKind
	switch ev := tr.Event(); {
	case ev == tasks.EventRequested:
		kind = jobPost
	case ev == tasks.EventVoted:
		kind = jobVote // still waiting: the same message, buttons kept, with the votes so far
	case tr.From == tasks.AwaitingApproval:
		kind = jobUpdate // approved, rejected, timed out, cancelled or expired before a decision
	default:
		return // execution progress is not the approvers' business
	}
	wf, ok := s.opts.Workflow(t.Workflow)
	if !ok || !Uses(wf) {
		return
	}
	s.enqueue(job{kind: kind, task: t, wf: wf})
}

// OnPinEvent posts a pin event to wf's channel (governance.pins.workflow, when it is a Slack
// destination with a channel): a quarantine once (pins.Event.Notify), however often a
// flapping upstream changes the tool, and each accept and reject. It never blocks.
func (s *Slack) OnPinEvent(e pins.Event, wf config.Workflow) {
	if !e.Notify() || !Uses(wf) {
		return
	}
	s.enqueue(job{kind: jobPin, pin: &e, wf: wf})
}

// Refresh brings the request message of pending task t up to date (what approvers must know
// before deciding: it can no longer run); nothing for a task that is not pending or has no
// message here. It never blocks: the update is queued, or dropped (counted).
//
// A message this process knows that already says what is true now is left alone, so
// refreshing every pending call after a change (of the tools, say) sends only what changed.
func (s *Slack) Refresh(t *tasks.Task) {
	if t == nil || t.State != tasks.AwaitingApproval || t.Accelerated || s.opts.Workflow == nil {
		return
	}
	wf, ok := s.opts.Workflow(t.Workflow)
	if !ok || !Uses(wf) {
		return
	}
	flags := flagsOf(s.cannotRun(t), s.notWaiting(t))
	if ref, known := s.msgs.get(t.ID); known && ref.shown == flags {
		return
	} else if !known && flags == "" {
		return // nothing to add to a message kept elsewhere
	}
	s.enqueue(job{kind: jobVote, task: t.Clone(), wf: wf, refresh: true})
}

// flagsOf names what a request says beyond the call: why it cannot run, that nobody waits.
func flagsOf(cannot *tasks.Unrunnable, gone *tasks.NotWaiting) string {
	f := ""
	if cannot != nil {
		f = cannot.Reason
	}
	if gone != nil {
		f += "|not-waiting"
	}
	return f
}

// notWaiting is Options.NotWaiting of a pending task, nil otherwise.
func (s *Slack) notWaiting(t *tasks.Task) *tasks.NotWaiting {
	if s.opts.NotWaiting == nil || t.State != tasks.AwaitingApproval {
		return nil
	}
	return s.opts.NotWaiting(t)
}

// cannotRun is Options.CannotRun of a pending task, nil otherwise.
func (s *Slack) cannotRun(t *tasks.Task) *tasks.Unrunnable {
	if s.opts.CannotRun == nil || t.State != tasks.AwaitingApproval {
		return nil
	}
	return s.opts.CannotRun(t)
}

// Resume posts the messages a previous run of this process had queued but not sent: each
// task awaiting a decision in a Slack workflow with no Slack message kept with it. Pass the
// tasks this process created (tasks.Manager.Mine) after they were loaded, before decisions
// can arrive. It returns how many posts it queued.
func (s *Slack) Resume(pending []*tasks.Task) int {
	n := 0
	for _, t := range pending {
		if t.State != tasks.AwaitingApproval || t.Accelerated || len(t.MessagesOf(refKind)) > 0 || s.opts.Workflow == nil {
			continue
		}
		if wf, ok := s.opts.Workflow(t.Workflow); ok && Uses(wf) {
			s.enqueue(job{kind: jobPost, task: t, wf: wf})
			n++
		}
	}
	return n
}

func (s *Slack) enqueue(j job) {
	j.enqueued = time.Now()
	select {
	case s.queue <- &j:
	default:
		s.met.sent(j.method(), resultDropped)
		total := s.dropped.Add(1)
		now := time.Now().UnixNano()
		last := s.lastWarn.Load()
		if now-last >= int64(dropWarnEvery) && s.lastWarn.CompareAndSwap(last, now) {
			s.log.Warn("slack queue full, message dropped", "method", j.method(), "dropped_total", total)
		}
	}
}

// Run sends queued jobs one at a time, in order, until ctx ends.
func (s *Slack) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-s.queue:
			if ctx.Err() != nil {
				return
			}
			s.send(ctx, *j)
		}
	}
}

// Dropped is how many jobs were dropped because the queue was full.
func (s *Slack) Dropped() int64 { return s.dropped.Load() }

// msgRef is where a task's message is: the channel id chat.postMessage answered and the ts.
// shown is what the request last said beyond the call itself (flagsOf), so Refresh sends
// only what changed.
type msgRef struct{ channel, ts, shown string }

// refKind is the tasks.MessageRef kind of a Slack message.
const refKind = "slack"

// messages remembers each pending task's message in memory; the same place is kept with the
// task (Options.Remember), where a restarted process or another replica finds it.
type messages struct {
	mu    sync.Mutex
	m     map[string]msgRef
	order []string // insertion order, for forgetting the oldest
}

func (ms *messages) put(id string, r msgRef) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.m == nil {
		ms.m = map[string]msgRef{}
	}
	if _, ok := ms.m[id]; !ok {
		for len(ms.m) >= MaxMessages && len(ms.order) > 0 {
			delete(ms.m, ms.order[0])
			ms.order = ms.order[1:]
		}
		ms.order = append(ms.order, id)
	}
	ms.m[id] = r
}

// get returns the task's message and keeps it.
func (ms *messages) get(id string) (msgRef, bool) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	r, ok := ms.m[id]
	return r, ok
}

// take returns and forgets the task's message.
func (ms *messages) take(id string) (msgRef, bool) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	r, ok := ms.m[id]
	if ok {
		delete(ms.m, id)
		// order keeps the id until it reaches the front; put skips ids no longer in m
	}
	if len(ms.order) > 2*MaxMessages {
		kept := ms.order[:0]
		for _, k := range ms.order {
			if _, live := ms.m[k]; live {
				kept = append(kept, k)
			}
		}
		ms.order = kept
	}
	return r, ok
}

// Health is the last outcome of posting to one channel.
type Health struct {
	OK     bool
	Detail string // why not, e.g. "chat.postMessage: channel_not_found"
	At     time.Time
}

const maxHealthEntries = 256

type healthTable struct {
	mu sync.Mutex
	m  map[string]Health // by configured channel
}

func (h *healthTable) set(channel string, v Health) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil || len(h.m) >= maxHealthEntries {
		h.m = map[string]Health{}
	}
	h.m[channel] = v
}

// ChannelHealth is the last known health of posting to channel; false when never tried.
// Without a bot token it is always not OK.
func (s *Slack) ChannelHealth(channel string) (Health, bool) {
	if s.opts.BotToken == "" {
		return Health{Detail: config.EnvSlackBotToken + " is not set"}, true
	}
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	h, ok := s.health.m[channel]
	return h, ok
}
