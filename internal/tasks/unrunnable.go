package tasks

import "time"

// Unrunnable says why a pending task's call can no longer run if it were approved now, as
// far as this process can tell cheaply (docs/contract.md §4 cannotRun). Approving it still
// fails the task the way execution does (SessionGone, ToolChanged); this only tells the
// approvers before they decide.
type Unrunnable struct {
	// Reason is one of the Unrunnable* codes.
	Reason string `json:"reason"`
	// Message says it in a sentence for people.
	Message string `json:"message"`
}

// Why a pending call can no longer run.
const (
	// UnrunnableSessionEnded: the caller ended its MCP session (DELETE); the call would run
	// on that session and fails SessionGone.
	UnrunnableSessionEnded = "session_ended"
	// UnrunnableStdioExited: the stdio server process the call's session ran on has exited
	// (crashed, killed, restarted); a new process does not have the session, so the call
	// fails SessionGone.
	UnrunnableStdioExited = "stdio_process_exited"
	// UnrunnableToolQuarantined: the tool's definition changed and is quarantined by pins;
	// the call fails ToolChanged unless the definition it was made under is accepted again.
	UnrunnableToolQuarantined = "tool_quarantined"
	// UnrunnableToolRemoved: the upstream's complete tools/list (Tollgate's own session) no
	// longer lists the tool an earlier one listed.
	UnrunnableToolRemoved = "tool_removed"
)

// NotWaiting says that nobody waits for a pending held call any more: its requester's call
// (a held or blocked tools/call) settled undecided, timed out or disconnected. Approved, the
// call runs and its outcome is kept until ResultKeptUntil (the task's TTL: the approval
// timeout plus tasks.replay_window) for the same call made again (docs/contract.md §4).
type NotWaiting struct {
	ResultKeptUntil time.Time `json:"result_kept_until"`
	Message         string    `json:"message"`
}
