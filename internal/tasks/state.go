package tasks

import ()

// State is a Tollgate task's internal state (docs/contract.md §3). The wire status is derived by Wire.
type State string

const (
	AwaitingApproval State = "awaiting_approval"
	Approved         State = "approved"
	Executing        State = "executing"
	Completed        State = "completed"
	Failed           State = "failed"
	Rejected         State = "rejected"
	Expired          State = "expired"
	TimedOut         State = "timed_out"
	Cancelled        State = "cancelled"
)

// States lists every state in lifecycle order.
func States() []State {
	return []State{AwaitingApproval, Approved, Executing, Completed, Failed, Rejected, Expired, TimedOut, Cancelled}
}

// Terminal reports whether no transition leaves s; terminal tasks are immutable.
func (s State) Terminal() bool {
	switch s {
	case Completed, Failed, Rejected, Expired, TimedOut, Cancelled:
		return true
	}
	return false
}

// Wire is the spec 2025-11-25 task status: non-terminal states are "working" (a human decision
// pending is still working, docs/contract.md §2); Rejected, Expired and TimedOut are "failed".
func (s State) Wire() string {
	switch s {
	case Completed:
		return "completed"
	case Cancelled:
		return "cancelled"
	case Failed, Rejected, Expired, TimedOut:
		return "failed"
	}
	return "working"
}

// Edge is one allowed transition of the state machine.
type Edge struct {
	From, To State
	Trigger  string // human-readable, used for diagrams
}

// transitions is the one table every change is validated against.
var transitions = []Edge{
	{AwaitingApproval, Approved, "approver approves, or approval times out with on_timeout: approve"},
	{AwaitingApproval, Rejected, "approver rejects"},
	{AwaitingApproval, TimedOut, "approval times out with on_timeout: deny"},
	{AwaitingApproval, Cancelled, "requester cancels"},
	{AwaitingApproval, Expired, "task TTL ends"},
	{Approved, Executing, "execution starts"},
	{Approved, Cancelled, "requester cancels"},
	{Approved, Expired, "task TTL ends"},
	{Approved, Failed, "re-check at execution denies the call"},
	{Executing, Completed, "upstream returns a result"},
	{Executing, Failed, "upstream returns an error or isError, or Tollgate restarted mid-call"},
	{Executing, Cancelled, "requester cancels"},
	{Executing, Expired, "task TTL ends"},
}

type edge struct{ from, to State }

var allowed = func() map[edge]bool {
	m := make(map[edge]bool, len(transitions))
	for _, t := range transitions {
		m[edge{t.From, t.To}] = true
	}
	return m
}()

// Transitions returns a copy of the transition table.
func Transitions() []Edge { return append([]Edge(nil), transitions...) }

// CanTransition reports whether from → to is in the table.
func CanTransition(from, to State) bool { return allowed[edge{from, to}] }
