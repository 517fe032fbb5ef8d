package tasks

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
	Event    Event  // what the change announces outward (Transition.Event)
}

// transitions is the one table every change is validated against.
var transitions = []Edge{
	{AwaitingApproval, AwaitingApproval, "an approver approves, fewer than min_approvals so far", EventVoted},
	{AwaitingApproval, Approved, "the last approver needed approves, or approval times out with on_timeout: approve", EventApproved},
	{AwaitingApproval, Rejected, "approver rejects", EventRejected},
	{AwaitingApproval, TimedOut, "approval times out with on_timeout: deny", EventTimedOut},
	{AwaitingApproval, Cancelled, "requester cancels", EventCancelled},
	{AwaitingApproval, Expired, "task TTL ends", EventExpired},
	{Approved, Executing, "execution starts", EventStarted},
	{Approved, Cancelled, "requester cancels", EventCancelled},
	{Approved, Expired, "task TTL ends", EventExpired},
	{Approved, Failed, "re-check at execution denies the call, or the replica that must start it stopped answering", EventFailed},
	{Executing, Executing, "the upstream asks the owner a question, or the answer is taken", EventInput},
	{Executing, Completed, "upstream returns a result", EventCompleted},
	{Executing, Failed, "upstream returns an error or isError, or Tollgate restarted mid-call", EventFailed},
	{Executing, Cancelled, "requester cancels", EventCancelled},
	{Executing, Expired, "task TTL ends", EventExpired},
}

// creations are the two ways a task comes to be: From is "" (Transition.Created).
var creations = []Edge{
	{"", AwaitingApproval, "call held for approval", EventRequested},
	{"", Approved, "forwarded task call run by Tollgate (accelerated)", EventAccelerated},
}

type edge struct{ from, to State }

var allowed = func() map[edge]bool {
	m := make(map[edge]bool, len(transitions))
	for _, t := range transitions {
		m[edge{t.From, t.To}] = true
	}
	return m
}()

// eventKey is what decides an event: whether the task was created, and the state it entered.
// Every edge into a state announces the same event (TestTransitionEvent), so a subscriber fed a
// shortcut its tests take (Approved → Completed) still gets the event of the state entered.
type eventKey struct {
	created bool
	to      State
}

var eventOf = func() map[eventKey]Event {
	m := make(map[eventKey]Event, len(transitions)+len(creations))
	// An edge that stays in its state (a vote, a question) names that state's event only when
	// no edge enters the state from elsewhere; stayEvent names it for the stay itself.
	for _, stay := range []bool{true, false} {
		for _, t := range append(Creations(), transitions...) {
			if (t.From == t.To) == stay {
				m[eventKey{t.From == "", t.To}] = t.Event
			}
		}
	}
	return m
}()

// stayEvent is the event of an edge from a state to itself.
var stayEvent = func() map[State]Event {
	m := map[State]Event{}
	for _, t := range transitions {
		if t.From == t.To {
			m[t.To] = t.Event
		}
	}
	return m
}()

// Transitions returns a copy of the transition table.
func Transitions() []Edge { return append([]Edge(nil), transitions...) }

// Creations returns the creation edges (From ""), which are not in the transition table
// because nothing is validated against them.
func Creations() []Edge { return append([]Edge(nil), creations...) }

// CanTransition reports whether from → to is in the table.
func CanTransition(from, to State) bool { return allowed[edge{from, to}] }

// Event is what one committed change of a task announces outward. It is the one mapping from
// the state machine to the audit kinds, the gateway tools' events and the approval
// notifications; each consumer picks the events it reports.
type Event string

const (
	EventRequested   Event = "requested"   // created, waiting for a decision
	EventAccelerated Event = "accelerated" // created approved: a rule forwards the call, nobody is asked
	EventVoted       Event = "voted"       // one approval of several needed (min_approvals); still awaiting
	EventApproved    Event = "approved"    // by the last approver needed, or on_timeout: approve
	EventRejected    Event = "rejected"
	EventTimedOut    Event = "timed_out" // the approval wait ended with on_timeout: deny
	EventStarted     Event = "started"   // execution began right after the approval
	EventInput       Event = "input"     // the upstream asks the owner something during the call, or the answer is taken
	EventCompleted   Event = "completed"
	EventFailed      Event = "failed"
	EventCancelled   Event = "cancelled"
	EventExpired     Event = "expired"
)

// Event is what tr announces: Edge.Event of its edge. It is "" for a creation in a state no
// task is created in, which the Manager never commits. Staying in AwaitingApproval is a vote.
func (tr Transition) Event() Event {
	if tr.From != "" && tr.From == tr.To {
		if ev, ok := stayEvent[tr.To]; ok {
			return ev
		}
	}
	return eventOf[eventKey{tr.From == "", tr.To}]
}
