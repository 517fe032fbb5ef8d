package audit

import "github.com/tollgate-mcp/tollgate/internal/tasks"

// The task manager's types, under short local names.
type (
	Task     = tasks.Task
	State    = tasks.State
	Decision = tasks.Decision
)

const (
	AwaitingApproval = tasks.AwaitingApproval
	Approved         = tasks.Approved
	Executing        = tasks.Executing
	Completed        = tasks.Completed
	Failed           = tasks.Failed
	Rejected         = tasks.Rejected
	Expired          = tasks.Expired
	TimedOut         = tasks.TimedOut
	Cancelled        = tasks.Cancelled
)
