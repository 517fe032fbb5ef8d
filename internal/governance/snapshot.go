// Package governance turns a loaded configuration into an immutable snapshot — compiled rules,
// Cedar policies, workflows — and holds the current one for lock-free reads. A reload builds a
// whole new snapshot and swaps it in, or keeps the old one (docs/contract.md §5.3).
package governance

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/identity"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/logcap"
	"github.com/tollgate-mcp/tollgate/internal/policy"
	"github.com/tollgate-mcp/tollgate/internal/policyschema"
	"github.com/tollgate-mcp/tollgate/internal/rules"
)

// Snapshot is one immutable view of the configuration.
type Snapshot struct {
	Config *config.Config
	Rules  *rules.Engine
	Policy *policy.Engine // nil when no Cedar policies are configured
	// People maps every name of the configured approvers to its person (identity.Directory).
	People   *identity.Directory
	Built    time.Time
	Revision uint64

	// check is the last validation of Policy against the upstream's tools (cedar.validation;
	// nil until the tools are known). The snapshot's rules and policies never change; this
	// result does, when the upstream's tools do.
	check atomic.Pointer[PolicyCheck]
}

// PolicyCheck is the outcome of validating a snapshot's Cedar policies against a schema built
// from the upstream's tools/list (package policyschema).
type PolicyCheck struct {
	Digest   string    // policyschema.Digest of the tools checked against
	Tools    int       // how many tools
	Problems []string  // one per mistake, each starting "policy: file:line:column:"
	Warnings []string  // arguments the schema could not type
	At       time.Time // when it was checked
}

// Err joins the problems into one error (nil when there are none).
func (c *PolicyCheck) Err() error {
	if c == nil || len(c.Problems) == 0 {
		return nil
	}
	return fmt.Errorf("cedar policies do not match the upstream's %d tools (cedar.validation):\n  %s", c.Tools, strings.Join(c.Problems, "\n  "))
}

// CheckPolicies validates the snapshot's policies against tools (digest is
// policyschema.Digest(tools)) and keeps the result; nil when there are no policies or
// cedar.validation is off. Callers serialise it per snapshot.
func (s *Snapshot) CheckPolicies(tools []policyschema.Tool, digest string) *PolicyCheck {
	if s.Policy == nil || s.Config.Cedar.Validation == config.ValidationOff {
		s.check.Store(nil)
		return nil
	}
	problems, warns := policyschema.Validate(s.Policy, tools)
	c := &PolicyCheck{Digest: digest, Tools: len(tools), Warnings: warns, At: time.Now()}
	for _, p := range problems {
		c.Problems = append(c.Problems, strings.ReplaceAll(p.Error(), "\n", "; "))
	}
	s.check.Store(c)
	return c
}

// PolicyCheck is the snapshot's last policy validation (nil: not checked yet, no policies, or
// cedar.validation off).
func (s *Snapshot) PolicyCheck() *PolicyCheck { return s.check.Load() }

// policiesRefused reports whether Cedar must not decide: cedar.validation is strict and the
// policies do not match the upstream's tools as last listed.
func (s *Snapshot) policiesRefused() bool {
	c := s.check.Load()
	return c != nil && len(c.Problems) > 0 && s.Config.Cedar.Validation == config.ValidationStrict
}

// ReasonToolsMismatch is the Cedar decision's reason while strict validation fails.
const ReasonToolsMismatch = "policies do not match the upstream's tools"

// Build compiles everything a snapshot needs; any error leaves no partial snapshot.
func Build(cfg *config.Config, forceRequired []string) (*Snapshot, error) {
	force := append(append([]string(nil), cfg.TaskAnnotationOverrides.ForceRequired...), forceRequired...)
	re, err := rules.Compile(cfg.Governance, force)
	if err != nil {
		return nil, fmt.Errorf("compiling rules: %w", err)
	}
	s := &Snapshot{Config: cfg, Rules: re, Built: time.Now(), People: cfg.Directory()}
	if len(cfg.Cedar.Policies) > 0 {
		files := make([]string, len(cfg.Cedar.Policies))
		for i, p := range cfg.Cedar.Policies {
			files[i] = cfg.ResolvePath(p)
		}
		schema := ""
		if cfg.Cedar.Schema != "" {
			schema = cfg.ResolvePath(cfg.Cedar.Schema)
		}
		pe, err := policy.Load(files, schema)
		if err != nil {
			return nil, fmt.Errorf("loading cedar policies: %w", err)
		}
		s.Policy = pe
	}
	return s, nil
}

// Holder holds the current snapshot.
type Holder struct {
	p   atomic.Pointer[Snapshot]
	rev atomic.Uint64
}

// Load returns the current snapshot (never nil once stored).
func (h *Holder) Load() *Snapshot { return h.p.Load() }

// Store swaps in s and stamps its revision.
func (h *Holder) Store(s *Snapshot) {
	s.Revision = h.rev.Add(1)
	h.p.Store(s)
}

// Workflow returns a workflow of the current snapshot.
func (h *Holder) Workflow(name string) (config.Workflow, bool) {
	s := h.Load()
	if s == nil {
		return config.Workflow{}, false
	}
	return s.Config.WorkflowFor(name)
}

// People returns the current snapshot's directory of approvers (nil before the first store).
func (h *Holder) People() *identity.Directory {
	if s := h.Load(); s != nil {
		return s.People
	}
	return nil
}

// Caller identifies who makes a call, for Cedar's principal.
type Caller struct {
	Subject   string
	SessionID string
	// Verified is the verified caller (server.caller_auth), nil without one: its groups are
	// the Cedar principal's parents, its claims and scopes part of the request.
	Verified *identity.Caller
	// Groups are the caller's groups when there is no Verified caller (policy tests).
	Groups []string
}

// Who is what rules' callers lists read of c.
func (c Caller) Who() rules.Who {
	w := rules.Who{Subject: c.Subject, Groups: c.Groups}
	if c.Verified != nil {
		w.Groups = c.Verified.Groups
	}
	return w
}

// Effective is the action that applies to one concrete call.
type Effective struct {
	Decision rules.Decision
	Action   config.Action // forward | approve | deny (policy resolved)
	Policy   *policy.Decision
	// Would is the action enforce mode would have taken (deny or approve) when the rule is in
	// audit mode (Decision.Audit); Action is then forward. Empty otherwise.
	Would config.Action
}

// audit applies audit mode: a deny or approve of an audit-mode rule is recorded in Would and
// the call forwarded.
func (e Effective) audit() Effective {
	if e.Decision.Audit && (e.Action == config.ActionDeny || e.Action == config.ActionApprove) {
		e.Would, e.Action = e.Action, config.ActionForward
	}
	return e
}

// AuditMode says what audit mode covers in this snapshot, "" when every rule is enforced:
// the start-up and reload log, /readyz and the console show it, so it is never silent.
func (s *Snapshot) AuditMode() string {
	g := s.Config.Governance
	var audit, enforce []string
	for i, r := range g.Rules {
		name := fmt.Sprintf("governance.rules[%d] %q", i, r.Match)
		switch r.Mode {
		case config.ModeAudit:
			audit = append(audit, name)
		case config.ModeEnforce:
			enforce = append(enforce, name)
		}
	}
	if g.Mode == config.ModeAudit {
		msg := "audit mode: governance.mode is audit, decisions are recorded and calls forwarded"
		if len(enforce) > 0 {
			msg += fmt.Sprintf(" (enforced: %s)", strings.Join(enforce, ", "))
		}
		return msg
	}
	if len(audit) > 0 {
		return fmt.Sprintf("audit mode: %s recorded, not enforced", strings.Join(audit, ", "))
	}
	return ""
}

// cedarWarn samples the evaluation-failure warning: any client can trigger it with arguments a
// policy cannot compare (10.5 against a Long), so it is one process-wide sampler, not one per
// snapshot.
var cedarWarn = logcap.NewSampler(time.Second, 10)

// Evaluate resolves the action for tool, with the annotations the upstream lists for it and
// the call's arguments: the rule's action, or Cedar's outcome for action: policy. Cedar errors
// fail closed (deny) and are logged with policy ids, never with arguments.
func (s *Snapshot) Evaluate(ctx context.Context, log *slog.Logger, c Caller, tool string, hints rules.Hints, args json.RawMessage) Effective {
	return s.EvaluateAt(ctx, log, c, tool, hints, args, time.Now())
}

// EvaluateAt is Evaluate with Cedar's context.time at now (policy tests pin it).
func (s *Snapshot) EvaluateAt(ctx context.Context, log *slog.Logger, c Caller, tool string, hints rules.Hints, args json.RawMessage, now time.Time) Effective {
	d := s.Rules.DecideFor(tool, hints, s.Rules.ViewOf(c.Who()))
	eff := Effective{Decision: d, Action: d.Action}
	if d.Action != config.ActionPolicy {
		return eff.audit()
	}
	if s.Policy == nil {
		eff.Action = config.ActionDeny
		return eff.audit()
	}
	if s.policiesRefused() {
		// Strict validation: policies that no longer type-check against the tools may never
		// match (a forbid guarding a renamed argument fails open), so Cedar decides nothing:
		// fail closed until the policies or the tools are fixed.
		eff.Policy = &policy.Decision{Outcome: policy.Deny, Reason: ReasonToolsMismatch}
		eff.Action = config.ActionDeny
		return eff.audit()
	}
	pd, err := s.Policy.Decide(s.policyRequest(c, tool, hints, d, args, now))
	if err != nil {
		if ok, held := cedarWarn.Allow(); ok {
			log.Warn("cedar evaluation failed; denying", "tool", tool, "policy_id", d.PolicyID,
				"policies", pd.PolicyIDs, "error", err.Error(), "suppressed", held)
		}
		pd = policy.Decision{Outcome: policy.Deny, PolicyIDs: pd.PolicyIDs, Reason: "evaluation error"}
	}
	eff.Policy = &pd
	switch pd.Outcome {
	case policy.Forward:
		eff.Action = config.ActionForward
	case policy.Approve:
		eff.Action = config.ActionApprove
	default:
		eff.Action = config.ActionDeny
	}
	return eff.audit()
}

// Forbidder returns, for one listing of c's, whether c may never call a tool: its rule d asks
// Cedar (and is enforced, not in audit mode) and a forbid denies c whatever the arguments and
// whenever (policy.Engine.ForbiddenRegardless; c's part of the request is built once).
// Listings leave such a tool out; calls never rely on it. Not safe for concurrent use.
func (s *Snapshot) Forbidder(c Caller) func(tool string, hints rules.Hints, d rules.Decision) bool {
	var p *policy.Prober
	return func(tool string, hints rules.Hints, d rules.Decision) bool {
		if d.Action != config.ActionPolicy || d.Audit || s.Policy == nil {
			return false
		}
		if p == nil {
			p = s.Policy.Prober(s.policyRequest(c, tool, hints, d, nil, time.Time{}))
		}
		return len(p.Forbidden(tool, d.PolicyID, hints)) > 0
	}
}

// policyRequest is Cedar's request for c calling tool under rule d.
func (s *Snapshot) policyRequest(c Caller, tool string, hints rules.Hints, d rules.Decision, args json.RawMessage, now time.Time) policy.Request {
	req := policy.Request{
		Principal: c.Subject, SessionID: c.SessionID, Tool: tool, Arguments: args,
		PolicyID: d.PolicyID, SourceID: s.Config.Sources[0].ID, Time: now,
		Annotations: hints,
	}
	if v := c.Verified; v != nil {
		req.Groups, req.Email, req.Name, req.Scopes = v.Groups, v.Email, v.Name, v.Scopes
	} else {
		req.Groups = c.Groups
	}
	return req
}

// RuleName names the rule of a decision as the API and the audit log do: its glob, or
// "defaults" when no rule matched.
func RuleName(d rules.Decision) string {
	if d.Rule >= 0 {
		return d.Match
	}
	return "defaults"
}

// DeniedError is the -32003 answer for a denied call (docs/contract.md §2).
func DeniedError(tool string, e Effective) *jsonrpc.Error {
	rule := RuleName(e.Decision)
	msg := fmt.Sprintf("PolicyDenied: tool %q is denied by rule %q", tool, rule)
	kv := []any{"tool", tool, "rule", rule}
	if e.Policy != nil {
		msg = fmt.Sprintf("PolicyDenied: tool %q is denied by Cedar policy (%s)", tool, e.Policy.Reason)
		kv = append(kv, "policies", e.Policy.PolicyIDs)
	}
	return jsonrpc.NewError(jsonrpc.CodePolicyDenied, "PolicyDenied", msg, kv...)
}

// Recheck re-evaluates an approved call right before it executes (docs/contract.md §3): when
// the rule or Cedar policy denies it now, the task fails with -32011 PolicyChanged and the
// call is not sent. The caller has checked the keyed arguments hash already.
func (s *Snapshot) Recheck(ctx context.Context, log *slog.Logger, c Caller, tool string, hints rules.Hints, args json.RawMessage, taskID string) *jsonrpc.Error {
	if s.Evaluate(ctx, log, c, tool, hints, args).Action != config.ActionDeny {
		return nil
	}
	return jsonrpc.NewError(jsonrpc.CodePolicyChanged, "PolicyChanged",
		fmt.Sprintf("Policy changed since approval: tool %q is now denied", tool), "taskId", taskID, "tool", tool)
}
