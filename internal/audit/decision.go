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
	if e.Outcome == OutcomeForward && forward == config.AuditForwardSampled {
		ok, skipped := l.fwd.allow(e.Time)
		if !ok {
			return
		}
		e.SkippedForwards = skipped
	}
	l.record(e)
}
