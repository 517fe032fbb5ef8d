package notify

import (
	"net/url"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// moved is the transition the task manager publishes when t enters its state: creation for a
// waiting (or accelerated) task, from awaiting_approval for a decision or an end before one,
// and along an approved task's execution otherwise.
func moved(t *tasks.Task) tasks.Transition {
	if t == nil {
		return tasks.Transition{}
	}
	var from tasks.State
	switch t.State {
	case tasks.Approved:
		if !t.Accelerated {
			from = tasks.AwaitingApproval
		}
	case tasks.Rejected, tasks.TimedOut:
		from = tasks.AwaitingApproval
	case tasks.Cancelled, tasks.Expired:
		from = tasks.AwaitingApproval
		if t.Decision != nil {
			from = tasks.Approved
		}
	case tasks.Executing:
		from = tasks.Approved
	case tasks.Completed, tasks.Failed:
		from = tasks.Executing
	}
	return tasks.Transition{From: from, To: t.State, Task: t}
}
