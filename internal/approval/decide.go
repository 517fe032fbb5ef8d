package approval

import (
	"context"

	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// Decide is the one way a decision enters Tollgate, whatever the channel: the approvals API's
// POST …/approve and …/reject, and Slack's buttons (package slack) call it, so who may decide
// (authz: approval.<name>.approvers, checked against the live configuration), the audit, the
// self-approval refusal (tasks.ErrSelfApproval), the re-check and exactly-once execution are
// the same for every channel. Errors: *NotAuthorizedError, and the manager's tasks.ErrNotFound,
// tasks.ErrSelfApproval, *tasks.ConflictError (already decided or ended).
func Decide(ctx context.Context, t Tasks, authz Authorizer, id, approver string, approve bool, reason string) (*tasks.Task, error) {
	cur, err := t.Lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := authz.Authorize(approver, cur); err != nil {
		return nil, err
	}
	if approve {
		return t.Approve(ctx, id, approver, reason)
	}
	return t.Reject(ctx, id, approver, reason)
}
