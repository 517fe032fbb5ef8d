// Package audit is Tollgate's append-only audit log: one JSON object per line for every
// governance decision on a tools/call (forward, deny, hold; see Decision) and every
// decision-relevant task transition (created, each approval vote of a call that needs several,
// approved, rejected, timed out, executed, failed, cancelled, expired).
//
// Events carry identifiers, hashes and approver names only. Tool arguments, headers, tokens and
// raw owner/session ids never reach the log: owners appear as OwnerHash, arguments as the
// task's ArgsHash.
package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/disclose"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// Kind names what happened to a task.
type Kind string

const (
	KindCreated   Kind = "created"
	KindVote      Kind = "vote" // one approval of several needed (min_approvals); the task still waits
	KindApproved  Kind = "approved"
	KindRejected  Kind = "rejected"
	KindTimedOut  Kind = "timed_out"
	KindExecuted  Kind = "executed"
	KindFailed    Kind = "failed"
	KindCancelled Kind = "cancelled"
	KindExpired   Kind = "expired"
	// KindDecision is governance deciding one tools/call (Logger.Decision); no task yet.
	KindDecision Kind = "decision"
	// Pinned tool definitions (package pins): a tool quarantined because its definition
	// changed, and an approver's accept or reject of the new definition (TaskID empty).
	KindPinQuarantined Kind = "pin_quarantined"
	KindPinAccepted    Kind = "pin_accepted"
	KindPinRejected    Kind = "pin_rejected"
)

// Event is one audit record. Owner must already be an OwnerHash; Error is a stable error name
// and code, never an upstream message (which may echo arguments).
type Event struct {
	Time     time.Time `json:"time"`
	Kind     Kind      `json:"kind"`
	TaskID   string    `json:"task_id,omitempty"` // every task event has one; a decision has none
	Tool     string    `json:"tool,omitempty"`
	Workflow string    `json:"workflow,omitempty"`
	Owner    string    `json:"owner,omitempty"`
	Actor    string    `json:"actor,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	ArgsHash string    `json:"args_hash,omitempty"`
	Error    string    `json:"error,omitempty"`
	// Approvals and RequiredApprovals are "k of N" for a task that needs several approvals
	// (approval.<name>.min_approvals > 1), on its votes and its decision.
	Approvals         int `json:"approvals,omitempty"`
	RequiredApprovals int `json:"required_approvals,omitempty"`

	// Decision lines (KindDecision) only.
	Outcome  string   `json:"outcome,omitempty"`  // forward, deny, hold; "would deny", "would hold" in audit mode
	Rule     string   `json:"rule,omitempty"`     // the matching rule's glob, or "defaults"
	Policies []string `json:"policies,omitempty"` // Cedar policy ids that decided (or failed to evaluate)
	Mode     string   `json:"mode,omitempty"`     // "audit" when the decision was recorded, not enforced
	// CorrelationID is the request's data.correlation_id, the same in logs and error replies.
	CorrelationID string `json:"correlation_id,omitempty"`
	// SkippedForwards counts forward decisions left out since the last forward line
	// (audit.forward: sampled).
	SkippedForwards int64 `json:"skipped_forwards,omitempty"`
	// Digest is the pinned definition digest of a pin_* event.
	Digest string `json:"digest,omitempty"`
}

// seenLimit bounds how many finished tasks are remembered to drop late or repeated callbacks.
const seenLimit = 4096

type seen struct {
	state   tasks.State
	version uint64
	votes   int
}

// Logger writes events as JSON lines. It is safe for concurrent use.
type Logger struct {
	mu     sync.Mutex
	w      io.Writer
	closer io.Closer
	log    *slog.Logger
	failed bool // a write failed already (warn once)
	// buf and enc encode each line, reused under mu: a buffer grown anew per line was most
	// of what auditing a created task allocated.
	buf bytes.Buffer
	enc *json.Encoder

	// fwd samples forward decision lines (audit.forward: sampled); recent keeps the last
	// decisions that were not plain forwards, for the admin API (Recent).
	fwd    forwardSampler
	recent recentDecisions

	// OnTaskChange bookkeeping: last state seen per task, and a FIFO of finished task ids.
	seen     map[string]seen
	finished []string
}

// New returns a Logger writing to w.
func New(w io.Writer) *Logger {
	return &Logger{w: w, log: slog.Default(), seen: make(map[string]seen)}
}

// Open returns a Logger appending to the file at path (created 0600 if missing); "" or "-"
// means stderr.
func Open(path string) (*Logger, error) {
	if path == "" || path == "-" {
		return New(os.Stderr), nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit log %q: %w", path, err)
	}
	l := New(f)
	l.closer = f
	return l, nil
}

// SetLogger sets where write failures are reported (default slog.Default()).
func (l *Logger) SetLogger(log *slog.Logger) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if log != nil {
		l.log = log
	}
}

// Close closes the file opened by Open; it is a no-op for New and stderr.
func (l *Logger) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closer == nil {
		return nil
	}
	err := l.closer.Close()
	l.closer = nil
	return err
}

// Record writes e as one line. A zero Time is set to now (UTC).
func (l *Logger) Record(e Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.record(e)
}

// maxKeptLine is the largest encoding buffer a Logger keeps between lines.
const maxKeptLine = 16 << 10

func (l *Logger) record(e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	e.Time = e.Time.UTC()
	if l.enc == nil {
		l.enc = json.NewEncoder(&l.buf)
		l.enc.SetEscapeHTML(false)
	}
	l.buf.Reset()
	defer func() {
		if l.buf.Cap() > maxKeptLine {
			l.buf = bytes.Buffer{} // an unusually long line does not stay allocated
		}
	}()
	if err := l.enc.Encode(e); err != nil { // Encode appends the newline
		return
	}
	// One Write per line so concurrent writers (O_APPEND) never interleave within a line.
	if _, err := l.w.Write(l.buf.Bytes()); err != nil && !l.failed {
		l.failed = true
		l.log.Error("audit log write failed; further failures are not reported", "err", err)
	}
}

// OnTaskChange maps a committed task transition to audit events; pass it to the task
// manager's Subscribe. Repeated or out-of-order callbacks for a task (same state, or an older
// store version) are ignored.
func (l *Logger) OnTaskChange(tr tasks.Transition) {
	t := tr.Task
	if t == nil || t.ID == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()

	ev := tr.Event()
	prev, known := l.seen[t.ID]
	// A vote keeps the state; it is new when it adds an approval.
	newVote := ev == tasks.EventVoted && len(t.Approvals) > prev.votes
	if known && ((t.State == prev.state && !newVote) || (t.Version != 0 && t.Version <= prev.version)) {
		return
	}
	if known && prev.state.Terminal() {
		return // a finished task does not change again
	}
	l.seen[t.ID] = seen{state: t.State, version: t.Version, votes: len(t.Approvals)}
	if t.State.Terminal() {
		l.finished = append(l.finished, t.ID)
		if len(l.finished) > seenLimit {
			delete(l.seen, l.finished[0])
			l.finished = l.finished[1:]
		}
	}

	base := Event{
		TaskID:   t.ID,
		Tool:     t.Tool,
		Workflow: t.Workflow,
		Owner:    disclose.OwnerHash(t.Owner),
		ArgsHash: t.ArgsHash,
	}
	if t.RequiredApprovals > 1 {
		base.Approvals, base.RequiredApprovals = len(t.Approvals), t.RequiredApprovals
	}
	if tr.Created() {
		e := base
		e.Kind, e.Time, e.Actor = KindCreated, t.CreatedAt, t.RequestedBy
		l.record(e)
	}

	e := base
	e.Time = t.UpdatedAt
	switch ev {
	case tasks.EventVoted:
		if n := len(t.Approvals); n > 0 {
			v := t.Approvals[n-1]
			e.Kind, e.Actor, e.Reason = KindVote, v.By, v.Reason
			if !v.At.IsZero() {
				e.Time = v.At
			}
		} else {
			return
		}
	case tasks.EventAccelerated, tasks.EventApproved:
		if t.Accelerated && t.Decision == nil {
			return // accelerated approve (F-005.6): no human decision to record
		}
		e.Kind = KindApproved
		decided(&e, t.Decision)
	case tasks.EventRejected:
		e.Kind = KindRejected
		decided(&e, t.Decision)
	case tasks.EventTimedOut:
		e.Kind = KindTimedOut
		decided(&e, t.Decision)
		if e.Actor == "" {
			e.Actor = "system:on_timeout"
		}
	case tasks.EventCompleted:
		e.Kind = KindExecuted
	case tasks.EventFailed:
		e.Kind = KindFailed
		e.Error = errorName(t)
	case tasks.EventCancelled:
		e.Kind = KindCancelled
	case tasks.EventExpired:
		e.Kind = KindExpired
	default: // EventRequested, EventStarted: nothing to record beyond creation
		return
	}
	l.record(e)
}

func decided(e *Event, d *tasks.Decision) {
	if d == nil {
		return
	}
	e.Actor, e.Reason = d.By, d.Reason
	if !d.At.IsZero() {
		e.Time = d.At
	}
}

// errorName is the stable name and code of a task's error; the message is left out because an
// upstream error message may quote the arguments.
func errorName(t *tasks.Task) string {
	if t.Error == nil {
		return ""
	}
	if n := t.Error.Name(); n != "" {
		return fmt.Sprintf("%s (%d)", n, t.Error.Code)
	}
	return fmt.Sprintf("code %d", t.Error.Code)
}
