package audit

import (
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

// Outcomes of a decision line.
const (
	OutcomeForward   = "forward"
	OutcomeDeny      = "deny"
	OutcomeHold      = "hold" // approval needed: a task is created (or the call held on it)
	OutcomeWouldDeny = "would deny"
	OutcomeWouldHold = "would hold"
)

// ForwardSampleRate is how many forward lines a second audit.forward: sampled writes at most.
const ForwardSampleRate = 10

// forwardSampler lets ForwardSampleRate forward lines through per second and counts the rest.
// It is used under Logger.mu.
type forwardSampler struct {
	second  int64 // unix second of the current window
	written int
	skipped int64
}

func (s *forwardSampler) allow(now time.Time) (ok bool, skipped int64) {
	if sec := now.Unix(); sec != s.second {
		s.second, s.written = sec, 0
	}
	if s.written >= ForwardSampleRate {
		s.skipped++
		return false, 0
	}
	s.written++
	skipped, s.skipped = s.skipped, 0
	return true, skipped
}

// Decision writes one governance decision on a tools/call (e.Kind is set to KindDecision).
// The caller fills Tool, Owner (an OwnerHash), Actor (the verified subject), Outcome, Rule,
// Policies, Workflow (of a hold) and CorrelationID — never arguments. forward is
// audit.forward: a forward outcome is written always (all), at most ForwardSampleRate a
// second (sampled), or never (none); every other outcome is always written.
func (l *Logger) Decision(e Event, forward string) {
	if l == nil {
		return
	}
	e.Kind = KindDecision
	if e.Outcome == OutcomeForward && forward == config.AuditForwardNone {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.Outcome != OutcomeForward {
		e.Time = e.Time.UTC()
		l.recent.add(e)
	}
	if e.Outcome == OutcomeForward && forward == config.AuditForwardSampled {
		ok, skipped := l.fwd.allow(e.Time)
		if !ok {
			return
		}
		e.SkippedForwards = skipped
	}
	l.record(e)
}

// RecentDecisions is how many decisions other than plain forwards a Logger keeps for Recent.
const RecentDecisions = 512

// recentDecisions is a ring of the last RecentDecisions non-forward decisions; used under
// Logger.mu.
type recentDecisions struct {
	buf  []Event
	next int
}

func (r *recentDecisions) add(e Event) {
	if len(r.buf) < RecentDecisions {
		r.buf = append(r.buf, e)
		return
	}
	r.buf[r.next] = e
	r.next = (r.next + 1) % RecentDecisions
}

// Recent returns up to limit of the last decisions this process made that were not plain
// forwards (denials, holds, audit mode's would-be decisions), newest first; would keeps only
// the would-be ones. They are this replica's, kept in memory: the audit log has them all.
//
// keep, if not nil, selects the entries the asker may see (the approvals API keeps those of
// workflows the approver may decide).
func (l *Logger) Recent(would bool, limit int, keep func(Event) bool) []Event {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Event, 0, min(limit, len(l.recent.buf)))
	n := len(l.recent.buf)
	for i := range n {
		if len(out) >= limit {
			break
		}
		// Newest first: the slot before next, walking back.
		e := l.recent.buf[((l.recent.next-1-i)%n+n)%n]
		if would && e.Mode != config.ModeAudit || keep != nil && !keep(e) {
			continue
		}
		out = append(out, e)
	}
	return out
}
