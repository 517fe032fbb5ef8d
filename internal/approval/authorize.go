package approval

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// Who may decide (docs/configuration.md approval.<name>.approvers): a workflow with an
// approvers list is seen and decided only by the approvers it names, directly or through
// approver_groups; a workflow without one by every approver. The lists are read from the live
// configuration snapshot at each request, so a reload that narrows a list applies to pending
// tasks at once. Every channel that shows or decides a task (API, console through the API,
// Slack) goes through Authorizer.Authorize.

// Policy is who may decide what under one configuration snapshot.
type Policy struct {
	cfg *config.Config
	// groups are the request's own groups, from a trusted login proxy (server.admin_auth
	// groups_header): "group:<name>" also admits an approver whose proxy says it is in <name>.
	groups []string
}

// WithGroups is p for an approver the login proxy says is in groups (exact names).
func (p Policy) WithGroups(groups []string) Policy {
	p.groups = groups
	return p
}

// PolicyOf returns the policy of cfg. A nil cfg lets every approver decide everything (today's
// behaviour without lists).
func PolicyOf(cfg *config.Config) Policy { return Policy{cfg: cfg} }

// MayDecide reports whether approver may see and decide the calls of workflow wf. A list
// grants, so names match exactly (configuration validation makes lists name approvers
// exactly; identity: look-alike folding only ever refuses).
func (p Policy) MayDecide(approver string, wf config.Workflow) bool {
	if wf.Approvers == nil {
		return true // no list: every approver
	}
	if strings.TrimSpace(approver) == "" {
		return false
	}
	same := func(name string) bool { return name == approver }
	for _, e := range wf.Approvers {
		if g, ok := strings.CutPrefix(e, config.GroupPrefix); ok {
			if p.cfg != nil && slices.ContainsFunc(p.cfg.ApproverGroups[g], same) || slices.Contains(p.groups, g) {
				return true
			}
			continue
		}
		if same(e) {
			return true
		}
	}
	return false
}

// Authorize returns nil when approver may see and decide t, else a *NotAuthorizedError. A
// task that never awaited a human (accelerated or promoted, no workflow) is not an approval
// request and is checked by nobody's list. A task whose workflow the configuration no longer
// has is refused to everyone (fail closed: the list it had is unknown); it ends at its
// approval deadline with the default on_timeout, deny.
func (p Policy) Authorize(approver string, t *tasks.Task) error {
	if p.cfg == nil || t == nil || t.Accelerated || t.Promoted || t.Workflow == "" {
		return nil
	}
	wf, ok := p.cfg.WorkflowFor(t.Workflow)
	if !ok {
		return &NotAuthorizedError{Approver: approver, Workflow: t.Workflow, Removed: true}
	}
	if !p.MayDecide(approver, wf) {
		return &NotAuthorizedError{Approver: approver, Workflow: t.Workflow}
	}
	return nil
}

// AuthorizePins returns nil when approver may see and decide pinned tool definitions (the
// approvers of governance.pins.workflow, as MayDecide), else a *NotAuthorizedError. A
// workflow the configuration no longer has admits nobody (fail closed, as Authorize).
func (p Policy) AuthorizePins(approver string) error {
	if p.cfg == nil {
		return nil
	}
	name := p.cfg.Governance.Pins.Workflow
	if name == "" {
		name = config.DefaultWorkflow
	}
	wf, ok := p.cfg.Approval[name]
	if !ok {
		return &NotAuthorizedError{Approver: approver, Workflow: name, Removed: true, Pins: true}
	}
	if !p.MayDecide(approver, wf) {
		return &NotAuthorizedError{Approver: approver, Workflow: name, Pins: true}
	}
	return nil
}

// For returns Authorize for one approver, remembering the answer per workflow: a list of
// every pending task compares names once per workflow, not once per task.
func (p Policy) For(approver string) func(t *tasks.Task) bool {
	seen := map[string]bool{}
	return func(t *tasks.Task) bool {
		if t == nil || t.Accelerated || t.Promoted || t.Workflow == "" {
			return true // not an approval request (Authorize)
		}
		ok, found := seen[t.Workflow]
		if !found {
			ok = p.Authorize(approver, t) == nil
			seen[t.Workflow] = ok
		}
		return ok
	}
}

// NotAuthorizedError says an approver may not see or decide a task (HTTP 403 not_authorized).
type NotAuthorizedError struct {
	Approver string
	Workflow string
	Removed  bool // the workflow is no longer configured
	Pins     bool // deciding pinned tool definitions (governance.pins.workflow)
}

func (e *NotAuthorizedError) Error() string {
	if e.Pins {
		if e.Removed {
			return fmt.Sprintf("governance.pins.workflow names %s, which is no longer configured: no approver may decide pinned tool definitions", e.Workflow)
		}
		return fmt.Sprintf("approver %s is not in approval.%s.approvers (governance.pins.workflow): it may not decide pinned tool definitions", e.Approver, e.Workflow)
	}
	if e.Removed {
		return fmt.Sprintf("approval workflow %s is no longer configured: no approver may decide its calls", e.Workflow)
	}
	return fmt.Sprintf("approver %s is not in approval.%s.approvers", e.Approver, e.Workflow)
}

// Authorizer checks approvers against the live configuration. Other channels that decide
// tasks (Slack interactions) call Authorize before deciding, as the approvals API does.
type Authorizer struct {
	// Config returns the current configuration snapshot; nil (or a nil result) lets every
	// approver decide everything.
	Config func() *config.Config
	// Groups are the deciding request's groups from a trusted login proxy (see Policy).
	Groups []string
}

// Policy is the policy of the current snapshot; take it once per request so one answer uses
// one snapshot.
func (a Authorizer) Policy() Policy {
	if a.Config == nil {
		return Policy{}
	}
	return PolicyOf(a.Config()).WithGroups(a.Groups)
}

// of is the authorizer for one request: the login proxy's groups of its approver, if any.
func (a Authorizer) of(r *http.Request) Authorizer {
	if id, ok := SignedIn(r.Context()); ok {
		a.Groups = id.Groups
	}
	return a
}

// AuthorizePins is Policy.AuthorizePins for the request r (its login proxy's groups) under
// the current configuration.
func (a Authorizer) AuthorizePins(r *http.Request, approver string) error {
	return a.of(r).Policy().AuthorizePins(approver)
}

// Authorize returns nil when approver may see and decide t under the current configuration,
// else a *NotAuthorizedError.
func (a Authorizer) Authorize(approver string, t *tasks.Task) error {
	return a.Policy().Authorize(approver, t)
}

// authorized looks up the task of the request and checks that its approver may see and decide
// it, writing the error reply (404, 403) when not. It is the first step of show, approve and
// reject.
func (h *handler) authorized(w http.ResponseWriter, r *http.Request, op string) (*tasks.Task, bool) {
	id := r.PathValue("taskId")
	t, err := h.tasks.Lookup(r.Context(), id)
	if err != nil {
		h.taskError(w, id, op, err)
		return nil, false
	}
	if err := h.authz.of(r).Authorize(approverOf(r), t); err != nil {
		h.taskError(w, id, op, err)
		return nil, false
	}
	return t, true
}

// approverOf is the authenticated approver's name (set by RequireApprover).
func approverOf(r *http.Request) string { return ApproverName(r.Context()) }
