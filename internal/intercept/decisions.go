package intercept

import (
	"github.com/tollgate-mcp/tollgate/internal/audit"
	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/disclose"
	"github.com/tollgate-mcp/tollgate/internal/governance"
	"github.com/tollgate-mcp/tollgate/internal/logcap"
)

// audited writes the audit line of one governance decision on a tools/call (both eras): the
// caller (verified subject and owner hash), the tool, the rule and Cedar policy ids, the
// outcome and the correlation id — never the arguments. Forward lines follow audit.forward.
func (g *Gateway) audited(x *Exchange, s *governance.Snapshot, tool string, eff governance.Effective) {
	if g.d.Audit == nil {
		return
	}
	e := audit.Event{
		Tool:          logcap.Clip(tool, logcap.NameBytes), // a client-chosen name
		Owner:         disclose.OwnerHash(owner(x)),
		Actor:         x.Subject,
		Rule:          governance.RuleName(eff.Decision),
		CorrelationID: x.CorrID,
	}
	switch eff.Action {
	case config.ActionDeny:
		e.Outcome = audit.OutcomeDeny
	case config.ActionApprove:
		e.Outcome, e.Workflow = audit.OutcomeHold, eff.Decision.Workflow
	default:
		e.Outcome = audit.OutcomeForward
	}
	switch eff.Would {
	case config.ActionDeny:
		e.Outcome, e.Mode = audit.OutcomeWouldDeny, config.ModeAudit
	case config.ActionApprove:
		e.Outcome, e.Mode, e.Workflow = audit.OutcomeWouldHold, config.ModeAudit, eff.Decision.Workflow
	}
	if eff.Would != "" {
		g.m.would(string(eff.Would))
	}
	if eff.Policy != nil {
		e.Policies, e.Reason = eff.Policy.PolicyIDs, eff.Policy.Reason
	}
	g.d.Audit.Decision(e, s.Config.Audit.Forward)
}
