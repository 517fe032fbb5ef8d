// Package tasks is Tollgate's approval task manager (docs/contract.md §2, §3): it creates tasks for
// held tool calls, validates every state change against one transition table, applies
// decisions with compare-and-swap in a store.Store, executes approved calls at most once,
// enforces approval timeouts and TTLs with one sweeper, and wakes tasks/result waiters.
package tasks

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/google/uuid"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/identity"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
)

// Executor runs an approved task's call against the upstream (implemented by the proxy).
type Executor interface {
	Execute(ctx context.Context, t *Task) (result json.RawMessage, rpcErr *jsonrpc.Error)
}

// Recheck re-evaluates the rule/policy right before execution; non-nil fails the task
// with that error (e.g. -32011 PolicyChanged, -32003 PolicyDenied). May be nil.
type Recheck func(ctx context.Context, t *Task) *jsonrpc.Error

// Options configure a Manager; zero durations take the config defaults.
type Options struct {
	DefaultTTL, MaxTTL, PollInterval, Retention time.Duration
	// ExecutionTimeout bounds one execution's upstream call (tasks.execution_timeout);
	// 0 = only the task's TTL bounds it.
	ExecutionTimeout time.Duration
	// InputTimeout bounds the wait for the owner's answer to a question of the upstream's
	// during the call (tasks.input_timeout); 0 = DefaultInputTimeout.
	InputTimeout time.Duration
	Quotas       config.Quotas
	Workflow     func(name string) (config.Workflow, bool) // current snapshot's workflows (reload-safe)
	// People is the current snapshot's directory of approvers (every name each carries): who
	// is the same person as a task's requester or as an earlier vote. nil = names alone.
	People     func() *identity.Directory
	Now        func() time.Time // nil = time.Now
	Logger     *slog.Logger
	Registerer prometheus.Registerer // nil = no metrics
	// Replica names this instance among several sharing a store ("" = a random id).
	Replica string
	// ArgumentHashKey keys each task's arguments hash (CanonicalHash). Empty means a random
	// key for this process, which suits only a memory store: tasks in a file or shared store
	// outlive the process, so the server passes a persistent key for those.
	ArgumentHashKey []byte
	// SessionLive, if set, reports whether an MCP session is one Tollgate knows and has not
	// seen end; Create refuses tasks for any other (a made-up or ended session must not own
	// pending tasks or hold quota).
	SessionLive func(sessionID string) bool
	// ExecutionLease is how long a task stays executing in a shared store without this
	// replica renewing it (tasks.execution_lease; lease.go); 0 = config.DefaultExecutionLease.
	ExecutionLease time.Duration
	// ConsoleURL is the approvals console; a task awaiting a human names it in its
	// statusMessage, so a task-aware client can tell its user where to approve ("" = not named).
	ConsoleURL string
	// Unfollowed, if set, gets each notification of the upstream's during a task's call that
	// no stream of this process follows (notes.go); it must not block.
	Unfollowed func(t *Task, n Note)
}

// Defaults (docs/contract.md §4 tasks.*; seed 001 THOUGHTGATE_TASK_DEFAULT_TTL_MS / MAX_TTL_MS).
const (
	DefaultTTL          = 10 * time.Minute
	DefaultMaxTTL       = 24 * time.Hour
	DefaultPollInterval = 2 * time.Second
)

// CreateRequest describes a held (or accelerated) tool call.
type CreateRequest struct {
	// Owner is the caller's owner (Anonymous for an anonymous 2026-07-28 caller: the task
	// then gets an owner of its own); Source is who sent the call (package source), counted
	// by tasks.quotas.max_pending_per_source.
	Owner, Source, SessionID, RequestedBy, Tool string
	// Caller is the request's verified caller (nil without one): kept with the task so the
	// self-approval check and the re-check before execution know every name and group it had.
	Caller       *identity.Caller
	Arguments    json.RawMessage
	Headers      http.Header
	TTL          time.Duration // 0 = default; above max = clamped (caller logs the WARN)
	Workflow     string
	Accelerated  bool
	Promoted     bool // see Task.Promoted; set with Accelerated
	AskRequester bool // the approval is asked of the requester (elicitation)
	// DeferStart leaves an accelerated task Approved until Start is called (the caller first
	// hands the task id to the client).
	DeferStart bool
	// Era and Meta: see Task.
	Era  string
	Meta json.RawMessage
	// ToolDigest: see Task.ToolDigest.
	ToolDigest string
	// ProgressToken: see Task.ProgressToken.
	ProgressToken json.RawMessage
}

// Filter selects tasks for List and ListAll. Without States only pending (non-terminal) tasks
// are listed unless IncludeFinished; with States exactly those states are listed.
type Filter struct {
	States          []State
	IncludeFinished bool
	Limit           int
}

// Manager owns Tollgate's tasks. All methods are safe for concurrent use.
type Manager struct {
	st      store.Store
	exec    Executor
	recheck Recheck
	opts    Options
	now     func() time.Time
	log     *slog.Logger
	met     *metrics
	shared  bool
	adopted map[string]struct{} // with a shared store: other instances' tasks already scheduled

	// ctx bounds execution goroutines; cancelled by Close or when Run's ctx ends.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// execs counts running executions (launch), for Drain.
	execs sync.WaitGroup

	mu       sync.Mutex
	closed   bool
	draining bool // Drain began: no new execution starts
	waiters  map[string]*waiter
	running  map[string]context.CancelFunc // in-flight executions, to stop them on cancel/expiry
	// notifiers are the in-flight executions' note publishers (notes.go, Note)
	notifiers map[string]noteTarget
	subs      map[int]func(Transition)
	loaded    chan struct{} // closed when Run has loaded the stored tasks
	nextSub   int

	sweep   sweeper
	relays  relays        // streams of this process relaying a task's questions now (Follow)
	notes   noteHub       // streams of this process taking a task's notes now (Follow)
	runDone chan struct{} // closed when Run returns; nil until Run starts

	// awaiting counts the tasks awaiting approval by workflow, kept where the tollgate_tasks
	// gauge is (load, create, every committed change), so AwaitingByWorkflow does not list and
	// decode every pending task at each /metrics scrape. Exact for a store only this process
	// uses; a shared store is listed.
	awaitingMu sync.Mutex
	awaiting   map[string]int
}

// waiter is a per-task broadcast: closed (and dropped) on the task's next change.
type waiter struct {
	ch   chan struct{}
	refs int
	last *Task // set before ch is closed: the task as that change committed it
}

// NewManager builds a Manager over st. It has no side effects: the tasks st already holds
// are loaded when Run starts (after the caller attached its subscribers), so their recovery
// transitions are published like any other.
func NewManager(st store.Store, exec Executor, recheck Recheck, opts Options) *Manager {
	if opts.DefaultTTL <= 0 {
		opts.DefaultTTL = DefaultTTL
	}
	if opts.MaxTTL <= 0 {
		opts.MaxTTL = DefaultMaxTTL
	}
	opts.DefaultTTL = min(opts.DefaultTTL, opts.MaxTTL)
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.Retention < 0 {
		opts.Retention = 0
	}
	if opts.ExecutionLease <= 0 {
		opts.ExecutionLease = config.DefaultExecutionLease
	}
	if len(opts.ArgumentHashKey) == 0 {
		opts.ArgumentHashKey = make([]byte, 32)
		_, _ = rand.Read(opts.ArgumentHashKey) // crypto/rand.Read never fails (Go 1.24)
	}
	m := &Manager{
		st: st, exec: exec, recheck: recheck, opts: opts,
		now: opts.Now, log: opts.Logger, met: newMetrics(opts.Registerer), shared: store.IsShared(st),
		waiters:   make(map[string]*waiter),
		running:   make(map[string]context.CancelFunc),
		notifiers: make(map[string]noteTarget),
		subs:      make(map[int]func(Transition)),
		loaded:    make(chan struct{}),
	}
	if m.now == nil {
		m.now = time.Now
	}
	if m.opts.Replica == "" {
		m.opts.Replica = uuid.NewString()[:13] // 48 random bits name this process among replicas
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.sweep.init()
	return m
}

// load schedules the deadlines of stored tasks and resumes or fails interrupted work: tasks
// that were executing when Tollgate stopped are failed (at most once must hold), approved ones
// execute. Run calls it first. Tasks are read and decoded one at a time (the list comes
// without their data), so a store full of large arguments is never held whole.
func (m *Manager) load(ctx context.Context) {
	recs, err := m.st.List(ctx, store.Filter{NoData: true})
	if err != nil {
		m.log.Error("task store: loading tasks failed", "error", err)
		return
	}
	for i, r := range recs {
		recs[i] = store.Record{} // not held past its turn
		if r.Data == nil {
			id := r.ID
			if r, err = m.st.Get(ctx, id); errors.Is(err, store.ErrNotFound) {
				continue // deleted meanwhile
			} else if err != nil {
				m.log.Error("task store: loading a task failed", "task_id", id, "error", err)
				continue
			}
		}
		t, err := decodeTask(r)
		if err != nil {
			m.log.Error("task store: undecodable task skipped", "task_id", r.ID, "error", err)
			continue
		}
		m.met.moved("", t.State)
		m.countAwaiting(t.Workflow, "", t.State)
		m.sweep.schedule(t, m.opts.Retention, m.now())
		switch {
		case t.State == Executing && !m.shared:
			// The process that ran it is gone; running it again could run it twice.
			_, err := m.update(ctx, t.ID, func(t *Task) error {
				if t.State != Executing {
					return errNoop
				}
				t.State, t.Error = Failed, interruptedError(t)
				t.StatusMessage = "Failed: interrupted by restart"
				return nil
			})
			if err != nil && !errors.Is(err, errNoop) {
				m.log.Error("task: marking interrupted execution failed", "task_id", t.ID, "error", err)
			}
		case t.State == Approved && m.executesHere(t):
			m.launch(t.ID)
		}
	}
}

// Create stores a new task. A quota violation returns a *jsonrpc.Error -32013
// "CapacityExceeded" and stores nothing. An accelerated task is created Approved and starts
// executing at once (docs/contract.md §2 decision matrix, F-005.6).
func (m *Manager) Create(ctx context.Context, req CreateRequest) (*Task, error) {
	t, _, err := m.create(ctx, req, false)
	return t, err
}

// CreateOrAttach is Create for a plain call a client may send again (tasks.sync_approval): when
// the same owner already made the same call (same tool, same canonical arguments) and that
// task is still pending or within its TTL, and its outcome has not been delivered to the owner
// yet (Delivered), it returns that task with attached=true instead of creating a second
// approval. The lookup and the insert are atomic in the store, also across replicas, so
// parallel retries yield one task. An attached task may be finished already. A call made after
// the outcome was delivered is a new call; when the earlier one was rejected, the new task
// names that rejection (Task.PreviousRejection) for its approvers.
func (m *Manager) CreateOrAttach(ctx context.Context, req CreateRequest) (t *Task, attached bool, err error) {
	return m.create(ctx, req, true)
}

func (m *Manager) create(ctx context.Context, req CreateRequest, keyed bool) (*Task, bool, error) {
	if req.Tool == "" || req.Owner == "" {
		// an empty owner would make the task visible to every caller without one
		return nil, false, errors.New("create task: empty tool name or owner")
	}
	if m.isClosed() {
		return nil, false, ErrClosed
	}
	if req.SessionID != "" && m.opts.SessionLive != nil && !m.opts.SessionLive(req.SessionID) {
		return nil, false, jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "SessionNotFound",
			"The MCP session is unknown or has ended; initialize a new session and call again")
	}
	now := m.now()
	ttl := req.TTL
	if ttl <= 0 {
		ttl = m.opts.DefaultTTL
	}
	ttl = min(ttl, m.opts.MaxTTL)
	t := &Task{
		ID: NewID(), Source: req.Source, SessionID: req.SessionID, RequestedBy: req.RequestedBy, Requester: req.Caller.Clone(),
		Tool: req.Tool, Arguments: req.Arguments, ArgsHash: m.argsHash(req.Tool, req.Arguments),
		Headers: req.Headers.Clone(), Workflow: req.Workflow, Accelerated: req.Accelerated, Promoted: req.Promoted,
		AskRequester: req.AskRequester && !req.Accelerated,
		CreatedAt:    now, UpdatedAt: now, TTL: ttl, PollInterval: m.opts.PollInterval,
		Replica: m.opts.Replica, Era: req.Era, Meta: req.Meta, ToolDigest: req.ToolDigest, ProgressToken: req.ProgressToken,
	}
	t.Owner = ownerOf(req.Owner, t.ID)
	if keyed && req.Owner != Anonymous { // an anonymous call has no one to retry as
		t.IdemKey = IdempotencyKey(t.Owner, t.ArgsHash)
		t.PreviousRejection = m.previousRejection(ctx, t)
	}
	if req.Accelerated {
		t.State = Approved
		t.StatusMessage = "Approved (forwarded by rule)"
		t.Decision = &Decision{Approved: true, By: ByAccelerated, Reason: "rule forwards the call; Tollgate runs it as a task", At: now}
		m.awaitStart(t) // the creator starts it; if it dies first, the lease says so
	} else {
		if t.Workflow == "" {
			t.Workflow = config.DefaultWorkflow
		}
		t.State = AwaitingApproval
		wf, ok := m.workflow(t.Workflow)
		t.RequiredApprovals = 1
		if ok {
			t.RequiredApprovals = max(wf.MinApprovals, 1)
		}
		t.StatusMessage = AwaitingMessage(t.Workflow, t.ID, m.opts.ConsoleURL, 0, t.RequiredApprovals)
		if t.AskRequester {
			// spec 2025-11-25 tasks: input_required tells the requestor to call tasks/result,
			// where the approval question is asked with elicitation/create.
			t.StatusMessage = fmt.Sprintf("Awaiting your approval (%s): call tasks/result to answer", t.Workflow)
			if req.Era == EraModern { // tasks extension: the question is in tasks/get inputRequests
				t.StatusMessage = fmt.Sprintf("Awaiting your approval (%s): answer inputRequests with tasks/update", t.Workflow)
			}
		}
		if ok && wf.Timeout.D() > 0 {
			t.ApprovalDeadline = now.Add(wf.Timeout.D())
		}
	}
	rec, err := encodeTask(t)
	if err != nil {
		return nil, false, fmt.Errorf("create task for tool %q: %w", req.Tool, err)
	}
	q := m.opts.Quotas
	stored, attached, err := m.st.CreateOrAttach(ctx, rec, store.Limits{
		MaxPendingPerOwner: q.MaxPendingPerOwner, MaxPendingPerSource: q.MaxPendingPerSource, MaxPendingTotal: q.MaxPendingTotal,
		MaxArgBytes: q.MaxArgumentBytes, MaxStoredBytes: q.MaxStoredBytes, MaxStoredBytesPerSource: q.MaxStoredBytesPerSource,
	}, now)
	if err != nil {
		var qe *store.QuotaError
		if errors.As(err, &qe) {
			return nil, false, capacityError(qe)
		}
		return nil, false, fmt.Errorf("create task for tool %q: %w", req.Tool, err)
	}
	if attached {
		prev, err := decodeTask(stored)
		if err != nil {
			return nil, false, fmt.Errorf("create task for tool %q: attached task %s: %w", req.Tool, stored.ID, err)
		}
		if prev.Owner != req.Owner || prev.ArgsHash != t.ArgsHash {
			// The key hashes both; a mismatch would be a collision or a bug. Never hand
			// another caller's task over.
			return nil, false, fmt.Errorf("create task for tool %q: idempotency key collision with task %s", req.Tool, prev.ID)
		}
		m.log.Info("retry attached to task", "task_id", prev.ID, "tool", prev.Tool, "state", prev.State)
		return m.settle(ctx, prev), true, nil
	}
	t.Version = stored.Version
	m.met.moved("", t.State)
	m.countAwaiting(t.Workflow, "", t.State)
	m.sweep.schedule(t, m.opts.Retention, m.now())
	m.log.Info("task created", "task_id", t.ID, "tool", t.Tool, "state", t.State, "workflow", t.Workflow)
	m.publish("", t)
	if t.State == Approved && !req.DeferStart {
		m.launch(t.ID)
	}
	return t.Clone(), false, nil
}

// previousRejection is the rejection of the call t repeats, read from the task its key names
// now: shown to t's approvers if t is created (when the store attaches instead, t is dropped).
// Best effort: a store that cannot answer leaves it out.
func (m *Manager) previousRejection(ctx context.Context, t *Task) *PreviousRejection {
	rec, err := m.st.Keyed(ctx, t.IdemKey)
	if err != nil {
		return nil
	}
	prev, err := decodeTask(rec)
	if err != nil || prev.Owner != t.Owner || prev.ArgsHash != t.ArgsHash || prev.Decision == nil || prev.Decision.Approved ||
		(prev.State != Rejected && prev.State != TimedOut) {
		return nil
	}
	return &PreviousRejection{TaskID: prev.ID, By: prev.Decision.By, Reason: prev.Decision.Reason, At: prev.Decision.At}
}

// Delivered records that the outcome of the owner's task id has been written to the owner (a
// held call's answer, a retry's, tasks/result, a 2026-07-28 tasks/get with the result inlined,
// tollgate_get_task_result). Replay exists only so a call that settled before its decision
// can collect its one outcome: from now on the same call is a new call, governed afresh
// (docs/contract.md §3). Only a terminal task with an IdemKey is written (no other task can be
// attached to); the first delivery counts, later ones change nothing.
func (m *Manager) Delivered(ctx context.Context, owner, id string) error {
	_, err := m.write(ctx, id, func(t *Task) error {
		if !MayAccess(owner, t.Owner) {
			return ErrNotFound
		}
		if t.IdemKey == "" || !t.State.Terminal() || !t.DeliveredAt.IsZero() {
			return errNoop
		}
		t.DeliveredAt = m.now()
		return nil
	}, true)
	if errors.Is(err, errNoop) {
		return nil
	}
	return err
}

// Start executes an accelerated task created with DeferStart (no-op for any other state).
func (m *Manager) Start(id string) { m.launch(id) }

// Get returns the owner's task; ErrNotFound for unknown, foreign or expired ids alike.
func (m *Manager) Get(ctx context.Context, owner, id string) (*Task, error) {
	return m.getOwned(ctx, owner, id, true)
}

// List returns the owner's tasks, oldest first; expired ones are gone.
func (m *Manager) List(ctx context.Context, owner string, f Filter) ([]*Task, error) {
	return m.list(ctx, owner, true, f)
}

// Lookup is the approvers' view of a task: no owner check, kept until deleted.
func (m *Manager) Lookup(ctx context.Context, id string) (*Task, error) {
	t, err := m.load1(ctx, id)
	if err != nil {
		return nil, err
	}
	return m.settle(ctx, t), nil
}

// ListAll is the approvers' view of all tasks, oldest first.
func (m *Manager) ListAll(ctx context.Context, f Filter) ([]*Task, error) {
	return m.list(ctx, "", false, f)
}

// Position is a place in the order of tasks awaiting approval (PageAwaiting): created time,
// then id.
type Position = store.Position

// PageAwaiting reads up to n tasks awaiting approval after the position after (exclusive; nil
// = from the oldest, or with newest from the newest), from the store's ordered index: n index
// entries read and n tasks decoded however many are pending. last is the position of the last
// entry read, nil at the end of the order. A task whose deadline passed is settled first and
// returned as it now stands, so callers still filter by state.
func (m *Manager) PageAwaiting(ctx context.Context, after *Position, newest bool, n int) (ts []*Task, last *Position, err error) {
	res, err := m.st.Page(ctx, store.PageQuery{State: string(AwaitingApproval), After: after, Newest: newest, Limit: n})
	if err != nil {
		return nil, nil, fmt.Errorf("list tasks awaiting approval: %w", err)
	}
	ts = make([]*Task, 0, len(res.Records))
	for _, r := range res.Records {
		t, err := decodeTask(r)
		if err != nil {
			m.log.Error("task store: undecodable task skipped", "task_id", r.ID, "error", err)
			continue
		}
		ts = append(ts, m.settle(ctx, t))
	}
	return ts, res.Last, nil
}

// Cancel cancels the owner's task. A terminal task yields ErrTerminal together with the
// task as it stands (spec 2025-11-25 tasks: cancel of a terminal task is -32602).
func (m *Manager) Cancel(ctx context.Context, owner, id string) (*Task, error) {
	if _, err := m.getOwned(ctx, owner, id, true); err != nil {
		return nil, err
	}
	t, err := m.update(ctx, id, func(t *Task) error {
		if t.State.Terminal() {
			return ErrTerminal
		}
		t.State, t.Error = Cancelled, cancelledError(t)
		t.StatusMessage = "Cancelled by requester"
		return nil
	})
	if errors.Is(err, ErrTerminal) {
		return t, ErrTerminal
	}
	return t, err
}

// Result blocks until the task is terminal or ctx ends, then returns the stored result or
// JSON-RPC error (spec 2025-11-25 tasks: tasks/result MUST block). ctx ending returns
// ctx.Err() and leaves the task running.
func (m *Manager) Result(ctx context.Context, owner, id string) (json.RawMessage, *jsonrpc.Error, error) {
	ev, err := m.await(ctx, owner, id, "", false, nil, nil)
	return ev.Result, ev.Error, err
}

// AwaitingMessage is the statusMessage of a task waiting for a human: what it waits for and
// where to decide, since a task-aware client shows statusMessage and nothing else (both eras:
// tasks/get, notifications, a 2026-07-28 requester's every poll).
// With several approvals needed it counts them: "(workflow ops, 1 of 2 approvals)".
func AwaitingMessage(workflow, id, consoleURL string, given, need int) string {
	where := "in the approvals console"
	if consoleURL != "" {
		where = "in the console at " + consoleURL
	}
	wf := "workflow " + workflow
	if need > 1 {
		wf = fmt.Sprintf("workflow %s, %d of %d approvals", workflow, given, need)
	}
	return fmt.Sprintf("Awaiting approval by a human (%s): approve %s or with `tollgate approvals approve %s`",
		wf, where, id)
}

// outcome is what tasks/result answers for a terminal task: exactly what the call returned.
func outcome(t *Task) (json.RawMessage, *jsonrpc.Error) {
	if t.Result != nil {
		return slices.Clone(t.Result), nil
	}
	if t.Error != nil {
		return nil, t.Clone().Error
	}
	return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "TaskFailed",
		fmt.Sprintf("task %s ended %s without a result", t.ID, t.State), "taskId", t.ID)
}

// Approve records an approval and starts execution at once (docs/contract.md §3). Errors:
// ErrNotFound, ErrSelfApproval, *ConflictError when the task is no longer awaiting approval.
func (m *Manager) Approve(ctx context.Context, id, approver, reason string) (*Task, error) {
	return m.decide(ctx, id, approver, reason, true)
}

// Reject records a rejection; tasks/result then answers -32007 ApprovalRejected.
func (m *Manager) Reject(ctx context.Context, id, approver, reason string) (*Task, error) {
	return m.decide(ctx, id, approver, reason, false)
}

func (m *Manager) decide(ctx context.Context, id, approver, reason string, approve bool) (*Task, error) {
	cur, err := m.Lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := identity.Check(approver); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidApprover, err)
	}
	people := m.people()
	if requester := cur.RequesterPerson(); len(requester.Names()) > 0 && people.Same(requester, identity.Person{Name: approver}) {
		return nil, ErrSelfApproval // the requester never counts, also toward min_approvals
	}
	now := m.now()
	t, err := m.update(ctx, id, func(t *Task) error {
		if t.State != AwaitingApproval {
			return &ConflictError{Task: t.Clone()}
		}
		if !approve {
			// one reject rejects at once, whatever approvals were given (two-person rule)
			t.Decision = &Decision{Approved: false, By: approver, Reason: reason, At: now}
			t.State, t.StatusMessage = Rejected, "Rejected by "+approver
			t.Error = rejectedError(t, approver, reason)
			return nil
		}
		for _, v := range t.Approvals {
			if people.SameName(v.By, approver) {
				// a second vote by one approver never counts twice (read again on every CAS retry)
				return &DuplicateVoteError{Task: t.Clone(), Approver: approver, Required: m.required(t)}
			}
		}
		t.Approvals = append(t.Approvals, Vote{By: approver, Reason: reason, At: now})
		need := m.required(t)
		t.RequiredApprovals = need // only ever raised: subscribers read "k of N" off the task
		if len(t.Approvals) < need {
			t.StatusMessage = AwaitingMessage(t.Workflow, t.ID, m.opts.ConsoleURL, len(t.Approvals), need)
			return nil // AwaitingApproval → AwaitingApproval: a vote
		}
		t.Decision = &Decision{Approved: true, By: approver, Reason: reason, At: now}
		t.State, t.StatusMessage = Approved, "Approved by "+approver
		m.awaitStart(t)
		if need > 1 {
			t.StatusMessage = fmt.Sprintf("Approved by %s (%d of %d approvals)", voters(t.Approvals), len(t.Approvals), need)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if t.State == Approved && m.executesHere(t) {
		m.launch(id)
	}
	return t, nil
}

// required is how many distinct approvals t needs now: what its workflow asked when it was
// created, raised — never lowered — by the workflow's current min_approvals, so a reload
// applies to pending tasks in the safe direction only (docs/configuration.md).
func (m *Manager) required(t *Task) int {
	return RequiredApprovals(t, m.opts.Workflow)
}

// RequiredApprovals is how many distinct approvals t needs at this moment:
// max(t.RequiredApprovals, the current min_approvals of its workflow, 1). workflow may be nil.
func RequiredApprovals(t *Task, workflow func(string) (config.Workflow, bool)) int {
	n := max(t.RequiredApprovals, 1)
	if workflow != nil {
		if wf, ok := workflow(t.Workflow); ok {
			n = max(n, wf.MinApprovals)
		}
	}
	return n
}

// voters names the approvers of votes, in order.
func voters(vs []Vote) string {
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = v.By
	}
	return strings.Join(names, ", ")
}

// executesHere reports whether this instance runs t: always with a private store; with a
// shared one only the instance that created it (the others leave it Approved and that
// instance's poll picks it up), because the caller's upstream session lives there.
func (m *Manager) executesHere(t *Task) bool {
	// A modern task has no upstream session tying it to its creator: any replica may run it
	// (the Approved→Executing compare-and-swap still lets only one).
	return !m.shared || t.Replica == "" || t.Replica == m.opts.Replica || t.Era == EraModern
}

// launchApproved starts the Approved tasks this instance created; with a shared store an
// approval may have been recorded by another instance.
func (m *Manager) launchApproved(ctx context.Context) {
	recs, err := m.st.List(ctx, store.Filter{States: []string{string(Approved)}})
	if err != nil {
		m.log.Warn("task store: polling approved tasks failed", "error", err)
		return
	}
	for _, r := range recs {
		if t, err := decodeTask(r); err == nil && t.Replica == m.opts.Replica {
			m.launch(t.ID)
		}
	}
}

// Transition is one committed change of a task as subscribers see it: the state it left
// (From, "" when the task was just created), the state it entered (To) and a copy of the task
// after the change. The copy is made once per transition and shared by every subscriber:
// subscribers read it (and may keep it) but never change it. Subscribers tell creation from a
// later change by From, never by guessing from the task's fields.
type Transition struct {
	From, To State
	Task     *Task
}

// Created reports whether the transition is the task's creation.
func (tr Transition) Created() bool { return tr.From == "" }

// Subscribe calls fn after every committed transition of a task made by this Manager,
// creation included. fn runs on the goroutine that made the change and must not block.
func (m *Manager) Subscribe(fn func(Transition)) (unsubscribe func()) {
	m.mu.Lock()
	id := m.nextSub
	m.nextSub++
	m.subs[id] = fn
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		delete(m.subs, id)
		m.mu.Unlock()
	}
}

// Drain is the first step of a graceful stop: no execution starts any more (an approved task
// stays approved: its start lease lets another replica run it, or the next start does), and
// the running ones are given until ctx ends to finish and store their results. Close then
// cuts off what still runs. docs/operations.md "Shutdown".
func (m *Manager) Drain(ctx context.Context) {
	m.mu.Lock()
	m.draining = true
	m.mu.Unlock()
	done := make(chan struct{})
	go func() { m.execs.Wait(); close(done) }() // ends at the latest when Close stops them
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// Replica names this process among replicas sharing the store (Task.Replica of the tasks it
// creates, and the only one that executes them).
func (m *Manager) Replica() string { return m.opts.Replica }

// Close stops the sweeper and running executions (their tasks fail: at most once) and waits
// for them. It does not close the store.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	done := m.runDone
	m.mu.Unlock()
	m.cancel()
	if done != nil {
		<-done
	}
	m.wg.Wait()
	return nil
}

func (m *Manager) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

// workflow returns the named approval workflow from the current config snapshot.
func (m *Manager) workflow(name string) (config.Workflow, bool) {
	if m.opts.Workflow == nil {
		return config.Workflow{}, false
	}
	return m.opts.Workflow(name)
}

// load1 reads and decodes one task.
func (m *Manager) load1(ctx context.Context, id string) (*Task, error) {
	r, err := m.st.Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, storeErr(id, err)
	}
	t, err := decodeTask(r)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", id, err)
	}
	return t, nil
}

// getOwned is the owner's view: a foreign owner and (when hideExpired) a task past its TTL
// look exactly like an unknown id (docs/contract.md §3 owner isolation; spec: -32602 for all).
func (m *Manager) getOwned(ctx context.Context, owner, id string, hideExpired bool) (*Task, error) {
	t, err := m.load1(ctx, id)
	if err != nil {
		return nil, err
	}
	if !MayAccess(owner, t.Owner) {
		return nil, ErrNotFound
	}
	t = m.settle(ctx, t)
	if hideExpired && !m.now().Before(t.ExpiresAt()) {
		return nil, ErrNotFound
	}
	return t, nil
}

func (m *Manager) list(ctx context.Context, owner string, ownerView bool, f Filter) ([]*Task, error) {
	sf := store.Filter{Owner: owner, PendingOnly: len(f.States) == 0 && !f.IncludeFinished}
	for _, s := range f.States {
		sf.States = append(sf.States, string(s))
	}
	if ownerView && (owner == "" || owner == Anonymous) {
		return nil, nil // anonymous tasks are reachable by id only, never listed
	}
	recs, err := m.st.List(ctx, sf)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	now := m.now()
	out := make([]*Task, 0, len(recs))
	for _, r := range recs {
		t, err := decodeTask(r)
		if err != nil {
			m.log.Error("task store: undecodable task skipped", "task_id", r.ID, "error", err)
			continue
		}
		t = m.settle(ctx, t)
		switch {
		case ownerView && !now.Before(t.ExpiresAt()):
			continue
		case len(f.States) > 0 && !slices.Contains(f.States, t.State):
			continue
		case len(f.States) == 0 && !f.IncludeFinished && t.State.Terminal():
			continue
		}
		out = append(out, t)
		if f.Limit > 0 && len(out) == f.Limit {
			break
		}
	}
	return out, nil
}

// errNoop aborts an update whose precondition no longer holds; nothing is written.
var errNoop = errors.New("no change")

// update applies mutate to a fresh copy of the stored task and commits it with
// compare-and-swap, retrying on version conflicts, so concurrent changes resolve to exactly
// one outcome. mutate returns an error to abort; update then returns the task as it stands
// together with that error. Every change must be an edge of the transition table.
func (m *Manager) update(ctx context.Context, id string, mutate func(t *Task) error) (*Task, error) {
	return m.write(ctx, id, mutate, false)
}

// write is update; quiet leaves UpdatedAt alone and runs no side effects (no transition is
// published, no waiter woken): for bookkeeping that is no change of the task's status, such
// as renewing an execution lease.
func (m *Manager) write(ctx context.Context, id string, mutate func(t *Task) error, quiet bool) (*Task, error) {
	for {
		t, err := m.load1(ctx, id)
		if err != nil {
			return nil, err
		}
		version := t.Version
		before := t.Clone()
		from := t.State
		if err := mutate(t); err != nil {
			return before, err
		}
		if (!quiet || from != t.State) && !CanTransition(from, t.State) {
			return before, fmt.Errorf("task %s: %w: %s → %s", id, ErrInvalidTransition, from, t.State)
		}
		if !quiet {
			t.UpdatedAt = m.now()
		}
		rec, err := encodeTask(t)
		if err != nil {
			return before, fmt.Errorf("task %s: %w", id, err)
		}
		stored, err := m.st.Update(ctx, rec, version)
		if errors.Is(err, store.ErrVersionConflict) {
			if ctx.Err() != nil {
				return before, ctx.Err()
			}
			continue // someone else changed it first: decide again on the new state
		}
		if errors.Is(err, store.ErrNotFound) {
			return nil, ErrNotFound
		}
		if err != nil {
			return before, storeErr(id, err)
		}
		t.Version = stored.Version
		if !quiet {
			m.committed(from, t)
		}
		return t.Clone(), nil
	}
}

// countAwaiting follows a task of workflow wf from state from to state to ("" = none).
func (m *Manager) countAwaiting(wf string, from, to State) {
	if (from == AwaitingApproval) == (to == AwaitingApproval) {
		return
	}
	m.awaitingMu.Lock()
	defer m.awaitingMu.Unlock()
	if m.awaiting == nil {
		m.awaiting = map[string]int{}
	}
	if to == AwaitingApproval {
		m.awaiting[wf]++
	} else if m.awaiting[wf]--; m.awaiting[wf] <= 0 {
		delete(m.awaiting, wf)
	}
}

// AwaitingByWorkflow counts the tasks awaiting an approval decision by workflow (the
// tollgate_pending_tasks gauge). With a store only this process uses it is the manager's own
// count, updated on every change; with a shared store the tasks are listed, as other replicas
// decide them.
func (m *Manager) AwaitingByWorkflow(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	if m.shared {
		ts, err := m.ListAll(ctx, Filter{States: []State{AwaitingApproval}})
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			out[t.Workflow]++
		}
		return out, nil
	}
	m.awaitingMu.Lock()
	defer m.awaitingMu.Unlock()
	maps.Copy(out, m.awaiting)
	return out, nil
}

// committed runs the side effects of a transition that is now in the store.
func (m *Manager) committed(from State, t *Task) {
	m.met.moved(from, t.State)
	m.countAwaiting(t.Workflow, from, t.State)
	if from == AwaitingApproval && t.State != AwaitingApproval { // a vote decides nothing yet
		m.met.decided(string(t.State), t.UpdatedAt.Sub(t.CreatedAt).Seconds())
	}
	if t.State == Cancelled || t.State == Expired || (t.State == Failed && t.StatusMessage == leaseLostStatus) {
		m.mu.Lock()
		stop := m.running[t.ID]
		m.mu.Unlock()
		if stop != nil {
			stop() // spec: on cancel the receiver SHOULD attempt to stop the execution
		}
	}
	m.log.Info("task transition", "task_id", t.ID, "tool", t.Tool, "from", from, "to", t.State)
	m.publish(from, t) // before waking waiters: once tasks/result answers, the notification is out
	m.notify(t.ID, t)
}

func (m *Manager) publish(from State, t *Task) {
	m.mu.Lock()
	fns := make([]func(Transition), 0, len(m.subs))
	for _, fn := range m.subs {
		fns = append(fns, fn)
	}
	m.mu.Unlock()
	if len(fns) == 0 {
		return
	}
	// One copy for all subscribers (they only read it): a copy each cost every create
	// ≈ 7 KB of garbage with the server's eight subscribers, the captured headers cloned each
	// time (docs/PERFORMANCE.md, memory per pending approval).
	tr := Transition{From: from, To: t.State, Task: t.Clone()}
	for _, fn := range fns {
		fn(tr)
	}
}

func (m *Manager) acquireWaiter(id string) *waiter {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := m.waiters[id]
	if w == nil {
		w = &waiter{ch: make(chan struct{})}
		m.waiters[id] = w
	}
	w.refs++
	return w
}

// waitChange blocks until w is woken by a committed change of task id, ctx ends, extra fires
// (nil: never) or — with a shared store, whose other replicas' changes may not be announced
// here — a second has passed, for the caller to read the task again; then it releases w.
func (m *Manager) waitChange(ctx context.Context, id string, w *waiter, extra <-chan time.Time, notes *noteFeed) (woken, fired bool) {
	var poll <-chan time.Time
	if m.shared {
		timer := time.NewTimer(sharedPollInterval)
		defer timer.Stop()
		poll = timer.C
	}
wait:
	for {
		select {
		case <-w.ch:
			woken = true
		case <-poll:
		case <-extra:
			fired = true
		case n := <-notes.ch():
			// written on this goroutine, without reading the task again
			notes.take(n)
			continue
		case <-ctx.Done():
		}
		break wait
	}
	m.releaseWaiter(id, w)
	return woken, fired
}

func (m *Manager) releaseWaiter(id string, w *waiter) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if w.refs--; w.refs == 0 && m.waiters[id] == w {
		delete(m.waiters, id)
	}
}

// notify wakes every Result waiting on id; t is the committed task (nil when deleted).
func (m *Manager) notify(id string, t *Task) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if w := m.waiters[id]; w != nil {
		if t != nil {
			w.last = t.Clone()
		}
		close(w.ch)
		delete(m.waiters, id)
	}
}

// settle applies deadlines that are due but not yet swept (approval timeout, TTL end), so
// every read sees the same outcome whether or not the sweeper has run yet.
func (m *Manager) settle(ctx context.Context, t *Task) *Task {
	now := m.now()
	if t.State == AwaitingApproval && !t.ApprovalDeadline.IsZero() && !now.Before(t.ApprovalDeadline) &&
		t.ApprovalDeadline.Before(t.ExpiresAt()) {
		if nt := m.approvalTimeout(ctx, t.ID); nt != nil {
			t = nt
		}
	}
	if leaseLapsed(t, now) {
		t = m.failLeaseLost(ctx, t)
	}
	if !t.State.Terminal() && !now.Before(t.ExpiresAt()) {
		nt, err := m.update(ctx, t.ID, func(t *Task) error {
			if t.State.Terminal() || m.now().Before(t.ExpiresAt()) {
				return errNoop
			}
			t.State, t.Error = Expired, expiredError(t)
			t.StatusMessage = "Expired: the task TTL ended"
			return nil
		})
		if nt != nil {
			t = nt
		}
		if err != nil && !errors.Is(err, errNoop) {
			m.log.Error("task: expiry failed", "task_id", t.ID, "error", err)
		}
	}
	return t
}

// approvalTimeout applies the workflow's on_timeout (read from the current snapshot, so a
// reload counts): deny → TimedOut (-32008); approve → Approved by system:on_timeout, executed.
func (m *Manager) approvalTimeout(ctx context.Context, id string) *Task {
	var approve bool
	t, err := m.update(ctx, id, func(t *Task) error {
		now := m.now()
		if t.State != AwaitingApproval || t.ApprovalDeadline.IsZero() || now.Before(t.ApprovalDeadline) {
			return errNoop
		}
		wf, _ := m.workflow(t.Workflow)
		approve = wf.OnTimeout == "approve"
		// With several approvals needed, the decision says how many were given: the timeout
		// decides as the workflow says and is recorded as system:on_timeout, never as a
		// missing approver's vote (docs/configuration.md, min_approvals).
		given := ""
		if need := m.required(t); need > 1 {
			t.RequiredApprovals = need
			given = fmt.Sprintf(" with %d of %d approvals given", len(t.Approvals), need)
		}
		if approve {
			t.State, t.StatusMessage = Approved, "Approved by "+ByTimeout+given
			m.awaitStart(t)
			t.Decision = &Decision{Approved: true, By: ByTimeout, Reason: "approval timed out (on_timeout: approve)" + given, At: now}
		} else {
			t.State, t.StatusMessage = TimedOut, "Approval timed out"+given
			t.Decision = &Decision{Approved: false, By: ByTimeout, Reason: "approval timed out (on_timeout: deny)" + given, At: now}
			t.Error = timedOutError(t, t.ApprovalDeadline.Sub(t.CreatedAt))
		}
		return nil
	})
	if err != nil && !errors.Is(err, errNoop) {
		m.log.Error("task: approval timeout failed", "task_id", id, "error", err)
	}
	if err == nil && approve {
		m.launch(id)
	}
	return t
}

// people is the current directory of approvers; without one, names are compared alone.
func (m *Manager) people() *identity.Directory {
	if m.opts.People != nil {
		if d := m.opts.People(); d != nil {
			return d
		}
	}
	return identity.NewDirectory(nil)
}

// argsHash is the keyed hash an approval is bound to.
func (m *Manager) argsHash(tool string, args json.RawMessage) string {
	return CanonicalHash(m.opts.ArgumentHashKey, tool, args)
}
