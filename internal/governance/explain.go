package governance

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/policy"
	"github.com/tollgate-mcp/tollgate/internal/rules"
)

// RuleExplanation is the rule that matched a call (index -1: the defaults).
type RuleExplanation struct {
	Index    int           `json:"index"`
	Match    string        `json:"match"` // the glob, or "defaults"
	Action   config.Action `json:"action"`
	Workflow string        `json:"workflow,omitempty"`
	PolicyID string        `json:"policy_id,omitempty"`
	Mode     string        `json:"mode"` // enforce or audit
}

// Explanation says why a call is decided as it is: the rule, each Cedar policy that was
// satisfied or failed, the outcome, and what would change it. It carries no argument values.
type Explanation struct {
	Tool       string                `json:"tool"`
	Rule       RuleExplanation       `json:"rule"`
	Policies   []policy.PolicyResult `json:"policies,omitempty"`
	NotMatched int                   `json:"policies_not_matched,omitempty"`
	Cedar      string                `json:"cedar,omitempty"` // Cedar's reason, e.g. "forbid matched"
	Outcome    config.Action         `json:"outcome"`         // forward, approve or deny
	Would      config.Action         `json:"would,omitempty"` // audit mode: what enforce would do
	Workflow   string                `json:"workflow,omitempty"`
	Changes    []string              `json:"what_would_change_it"`
}

// discard takes Evaluate's warnings during an explanation: the caller reads them in it.
var discard = slog.New(slog.DiscardHandler)

// Explain decides a call as Evaluate does (at now) and explains the decision.
func (s *Snapshot) Explain(ctx context.Context, c Caller, tool string, hints rules.Hints, args json.RawMessage, now time.Time) Explanation {
	eff := s.EvaluateAt(ctx, discard, c, tool, hints, args, now)
	d := eff.Decision
	x := Explanation{Tool: tool, Outcome: eff.Action, Would: eff.Would,
		Rule: RuleExplanation{Index: d.Rule, Match: RuleName(d), Action: d.Action, PolicyID: d.PolicyID, Mode: config.ModeEnforce}}
	if d.Audit {
		x.Rule.Mode = config.ModeAudit
	}
	if d.Action == config.ActionApprove || d.Action == config.ActionPolicy {
		x.Rule.Workflow = d.Workflow
	}
	if eff.Action == config.ActionApprove || eff.Would == config.ActionApprove {
		x.Workflow = d.Workflow
	}
	where := "governance.defaults"
	if d.Rule >= 0 {
		where = fmt.Sprintf("governance.rules[%d] (%q)", d.Rule, d.Match)
	}
	if d.Rule >= 0 {
		x.Changes = append(x.Changes, fmt.Sprintf("%s is the first rule matching %q: an earlier rule matching it, or another action on this one, would decide instead", where, tool))
	} else {
		x.Changes = append(x.Changes, fmt.Sprintf("no rule matches %q, so governance.defaults.action (%s) applies: a rule matching it would decide instead", tool, d.Action))
	}
	if d.Action == config.ActionPolicy {
		x.Changes = append(x.Changes, s.explainCedar(&x, c, tool, hints, args, now, d)...)
	}
	if eff.Would != "" {
		x.Changes = append(x.Changes, fmt.Sprintf("%s is in audit mode: enforced, the call would be %s; it is forwarded (mode: enforce on the rule, or governance.mode: enforce, enforces it)", where, verb(eff.Would)))
	}
	if d.ForceRequired {
		x.Changes = append(x.Changes, fmt.Sprintf("%q is in task_annotation_overrides.force_required: it runs only as a task", tool))
	}
	return x
}

func (s *Snapshot) explainCedar(x *Explanation, c Caller, tool string, hints rules.Hints, args json.RawMessage, now time.Time, d rules.Decision) []string {
	if s.Policy == nil {
		x.Cedar = "no Cedar policies loaded"
		return []string{"the rule's action is policy but no Cedar policies are configured, so the call is denied"}
	}
	if s.policiesRefused() {
		x.Cedar = ReasonToolsMismatch
		return []string{"cedar.validation is strict and the policies do not match the upstream's tools (see /readyz and the log for file:line): every call Cedar would decide is denied until the policies or the tools are fixed"}
	}
	px := s.Policy.Explain(policy.Request{
		Principal: c.Subject, SessionID: c.SessionID, Tool: tool, Arguments: args,
		PolicyID: d.PolicyID, SourceID: s.Config.Sources[0].ID, Time: now, Annotations: hints,
	})
	x.Policies, x.NotMatched, x.Cedar = px.Policies, px.NotMatched, px.Decision.Reason
	var forbids, approves, permits, errs []string
	for _, p := range px.Policies {
		switch {
		case p.Outcome == "error":
			errs = append(errs, p.ID+" ("+p.Error+")")
		case p.Effect == "forbid":
			forbids = append(forbids, p.ID)
		case p.Decision == "approve":
			approves = append(approves, p.ID)
		default:
			permits = append(permits, p.ID)
		}
	}
	var out []string
	switch px.Decision.Reason {
	case policy.ReasonBadArguments, policy.ReasonNotAnObject:
		out = append(out, "the arguments cannot be given to Cedar ("+px.Decision.Reason+"), so the call is denied whatever the policies say")
	case policy.ReasonEvalError:
		out = append(out, fmt.Sprintf("evaluating %s failed, and Tollgate denies on an error (a skipped forbid would fail open): guard optional attributes with `has`, or fix the types the policy compares", strings.Join(errs, ", ")))
	case policy.ReasonForbid:
		alt := "no permit matches either, so it would still be denied"
		switch {
		case len(approves) > 0:
			alt = "without them, permit " + strings.Join(approves, ", ") + " would hold it for approval"
		case len(permits) > 0:
			alt = "without them, permit " + strings.Join(permits, ", ") + " would forward it"
		}
		out = append(out, fmt.Sprintf("forbid %s matched: the call is denied while any of them matches; %s", strings.Join(forbids, ", "), alt))
	case policy.ReasonNoMatch:
		out = append(out, fmt.Sprintf("no policy matched (policy_id %q): a permit whose conditions hold for this call would forward it, or hold it with @decision(\"approve\")", d.PolicyID))
	case policy.ReasonApprove:
		alt := "no other permit matches, so without them it would be denied"
		if len(permits) > 0 {
			alt = "without them, permit " + strings.Join(permits, ", ") + " would forward it"
		}
		out = append(out, fmt.Sprintf("permit %s with @decision(\"approve\") matched: %s; a matching forbid would deny it", strings.Join(approves, ", "), alt))
	case policy.ReasonPermit:
		out = append(out, fmt.Sprintf("permit %s matched: a matching forbid would deny the call, a matching @decision(\"approve\") permit would hold it", strings.Join(permits, ", ")))
	}
	return out
}

func verb(a config.Action) string {
	switch a {
	case config.ActionDeny:
		return "denied"
	case config.ActionApprove:
		return "held for approval"
	}
	return "forwarded"
}
