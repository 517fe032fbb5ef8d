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

// recentDecisions keeps the last RecentDecisions non-forward decisions, oldest first; used
// under Logger.mu. Full, it drops the oldest entry of the source holding the most (the
// verified caller, else the owner hash), so one caller's flood of denials pushes out its own
// entries, never the few of others (docs/SECURITY.md limits table).
type recentDecisions struct {
	buf    []Event
	counts map[string]int // source → entries in buf
}

func decisionSource(e Event) string {
	if e.Actor != "" {
		return "a:" + e.Actor
	}
	return "o:" + e.Owner
}

func (r *recentDecisions) add(e Event) {
	if r.counts == nil {
		r.counts = map[string]int{}
	}
	if len(r.buf) >= RecentDecisions {
		heaviest, most := "", 0
		for src, n := range r.counts {
			if n > most || n == most && src < heaviest {
				heaviest, most = src, n
			}
		}
		// The newcomer's own source gives way when it is as heavy as the heaviest.
		if src := decisionSource(e); r.counts[src]+1 > most {
			heaviest = src
		}
		for i := range r.buf {
			if decisionSource(r.buf[i]) == heaviest {
				r.buf = append(r.buf[:i], r.buf[i+1:]...)
				if r.counts[heaviest]--; r.counts[heaviest] == 0 {
					delete(r.counts, heaviest)
				}
				break
			}
		}
	}
	r.buf = append(r.buf, e)
	r.counts[decisionSource(e)]++
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
	for i := len(l.recent.buf) - 1; i >= 0; i-- { // newest first
		if len(out) >= limit {
			break
		}
		e := l.recent.buf[i]
		if would && e.Mode != config.ModeAudit || keep != nil && !keep(e) {
			continue
		}
		out = append(out, e)
	}
	return out
}
