package server

import (
	"fmt"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/governance"
)

// Cedar policies checked against the upstream's tools (cedar.validation, docs/contract.md §3):
// every snapshot is validated against the tools the last Annotations.Refresh listed — at the
// first listing after start, at each reload (strict: a failing reload is refused), and when a
// listing changes the tools. A snapshot already serving cannot be refused; under strict, its
// Cedar decisions deny while it fails (governance.Snapshot.Evaluate).

// validatesPolicies reports whether the running configuration checks its policies.
func (s *Server) validatesPolicies() bool {
	snap := s.snaps.Load()
	return snap != nil && snap.Policy != nil && snap.Config.Cedar.Validation != config.ValidationOff
}

// checkPolicies validates snap against the upstream's tools as last listed, unless it was
// checked against these tools already, and reports a changed outcome.
func (s *Server) checkPolicies(snap *governance.Snapshot) {
	lt := s.ann.Listed()
	if lt == nil || snap == nil {
		return // tools not known yet: the first listing checks
	}
	s.policyCheckMu.Lock()
	defer s.policyCheckMu.Unlock()
	prev := snap.PolicyCheck()
	if prev != nil && prev.Digest == lt.Digest {
		return
	}
	s.reportPolicyCheck(snap, prev, snap.CheckPolicies(lt.Tools, lt.Digest))
}

// reportPolicyCheck logs a check's outcome when it differs from prev's and sets the metric.
func (s *Server) reportPolicyCheck(snap *governance.Snapshot, prev, c *governance.PolicyCheck) {
	if c == nil {
		s.metrics.PolicyValidation(0)
		return
	}
	s.metrics.PolicyValidation(len(c.Problems))
	if len(c.Warnings) > 0 {
		s.log.Debug("cedar policy schema: tool arguments left untyped", "warnings", c.Warnings)
	}
	mode := snap.Config.Cedar.Validation
	switch {
	case len(c.Problems) > 0 && mode == config.ValidationStrict:
		s.log.Error("cedar policies do not match the upstream's tools; calls Cedar decides are denied until they do (cedar.validation: strict)",
			"tools", c.Tools, "problems", c.Problems)
	case len(c.Problems) > 0:
		s.log.Warn("cedar policies do not match the upstream's tools; they are enforced as loaded (cedar.validation: warn)",
			"tools", c.Tools, "problems", c.Problems)
	case prev != nil && len(prev.Problems) > 0:
		s.log.Info("cedar policies match the upstream's tools again", "tools", c.Tools)
	case prev == nil:
		s.log.Info("cedar policies match the upstream's tools", "tools", c.Tools, "validation", mode)
	}
}

// policyDegraded is what /readyz says about the policies' last check, "" when nothing.
func policyDegraded(snap *governance.Snapshot) string {
	c := snap.PolicyCheck()
	if c == nil || len(c.Problems) == 0 {
		return ""
	}
	effect := "enforced as loaded"
	if snap.Config.Cedar.Validation == config.ValidationStrict {
		effect = "calls Cedar decides are denied"
	}
	return fmt.Sprintf("cedar policies do not match the upstream's %d tools (%d problems, first: %s); cedar.validation: %s, %s",
		c.Tools, len(c.Problems), c.Problems[0], snap.Config.Cedar.Validation, effect)
}
