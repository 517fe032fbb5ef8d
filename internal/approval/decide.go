package approval

import (
	"context"

	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// Decide is the one way a decision enters Tollgate, whatever the channel: the approvals API's
// POST …/approve and …/reject, and Slack's buttons (package slack) call it, so the audit, the
// self-approval refusal (tasks.ErrSelfApproval), the re-check and exactly-once execution stay
// in the task manager behind it. A check of who may decide what belongs here too, so every
// channel applies it. Errors are the manager's: tasks.ErrNotFound, tasks.ErrSelfApproval,
// *tasks.ConflictError (already decided or ended).
func Decide(ctx context.Context, t Tasks, id, approver string, approve bool, reason string) (*tasks.Task, error) {
	if approve {
		return t.Approve(ctx, id, approver, reason)
	}
	return t.Reject(ctx, id, approver, reason)
}
