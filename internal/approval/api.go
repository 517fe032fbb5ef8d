// Package approval is the human side of Tollgate's approval workflow: the admin approvals HTTP
// API (docs/contract.md §4) and the `tollgate approvals` CLI client that talks to it. What it
// shows of a task's arguments and owner is decided by package disclose.
package approval

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/disclose"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// Tasks is what the approvals API needs from the task manager (*tasks.Manager).
type Tasks interface {
	Lookup(ctx context.Context, id string) (*tasks.Task, error)
	ListAll(ctx context.Context, f tasks.Filter) ([]*tasks.Task, error)
	PageAwaiting(ctx context.Context, after *tasks.Position, newest bool, n int) ([]*tasks.Task, *tasks.Position, error)
	Approve(ctx context.Context, id, approver, reason string) (*tasks.Task, error)
	Reject(ctx context.Context, id, approver, reason string) (*tasks.Task, error)
}

var _ Tasks = (*tasks.Manager)(nil)

// Options configures the approvals API.
type Options struct {
	// Workflow looks up an approval workflow in the current config snapshot (for
	// redact_fields). Nil, or a workflow that no longer exists, redacts the whole arguments.
	Workflow func(name string) (config.Workflow, bool)
	Logger   *slog.Logger // nil = slog.Default()
	// Config returns the current configuration snapshot: who may decide what (approver_groups,
	// approval.<name>.approvers; authorize.go). Nil lets every approver decide everything.
	Config func() *config.Config
	// Decisions returns up to limit of the last governance decisions that were not plain
	// forwards, newest first (only audit mode's would-be ones with would); nil = the
	// decisions view answers an empty list. AuditMode says what audit mode covers ("" = off),
	// shown by the summary (and so the console).
	// visible reports whether the asking approver may see a decision of a workflow ("" = a
	// decision that holds nothing: every approver).
	Decisions func(would bool, limit int, visible func(workflow string) bool) any
	AuditMode func() string
	// Explain explains how the configuration loaded now decides a task's call (rule, Cedar
	// policies, outcome, what would change it; no argument values), for
	// GET /api/v1/approvals/{taskId}/explain. Nil = 404 there.
	Explain func(ctx context.Context, t *tasks.Task) ExplainResponse
	// CannotRun tells why a pending task's call could no longer run if approved now (nil =
	// nothing known against it), shown as cannotRun in every view. It must be cheap: the list
	// asks it for each row of the page only. Nil = never shown.
	CannotRun func(t *tasks.Task) *tasks.Unrunnable
	// NotWaiting tells that nobody waits for a pending held call any more (nil = someone
	// may), shown as requesterNotWaiting. Cheap, as CannotRun. Nil = never shown.
	NotWaiting func(t *tasks.Task) *tasks.NotWaiting
}

const (
	// MaxBodyBytes bounds a decision request body.
	MaxBodyBytes = 64 << 10
	// MaxReasonBytes bounds a decision reason; it ends up in the audit log and notifications.
	MaxReasonBytes = 4 << 10
	// DefaultListLimit and MaxListLimit bound one page of GET /api/v1/approvals (?limit=N);
	// ?cursor= reaches the rest.
	DefaultListLimit = 100
	MaxListLimit     = 1000
	// MaxListArgumentsBytes bounds the arguments one row of GET /api/v1/approvals carries: a
	// task whose redacted arguments exceed it as JSON, or twice it as indented text, is
	// summarised in the list (argumentsTruncated, argumentsBytes, argumentsSha256,
	// argumentsPreview) and shown in full only by GET /api/v1/approvals/{taskId}.
	MaxListArgumentsBytes = 4 << 10
	// ArgumentsPreviewBytes bounds argumentsPreview of a summarised row.
	ArgumentsPreviewBytes = 1 << 10
	// MaxListPageBytes bounds the encoded approvals of one page of GET /api/v1/approvals: the
	// page ends early (with nextCursor) rather than exceed it. A page holds at least one
	// approval, so the cursor always moves on.
	MaxListPageBytes = 2 << 20
	// MaxListScan bounds the pending approvals one page of GET /api/v1/approvals reads from
	// the store's ordered index (status=pending, sort=oldest or newest): a page whose filters
	// or the caller's authorisation skip more ends early, with nextCursor where it stopped.
	MaxListScan = 5 * MaxListLimit
)

// View is the JSON form of an approval request. It never carries the owner id (an MCP session
// id is capability-like), only its short hash, and arguments are redacted per workflow.
type View struct {
	TaskID        string          `json:"taskId"`
	Tool          string          `json:"tool"`
	Arguments     json.RawMessage `json:"arguments,omitempty"`
	ArgumentsText string          `json:"argumentsText,omitempty"` // the same, indented, numbers as written (disclose.Pretty)
	// ArgumentsTruncated: this list row leaves Arguments and ArgumentsText out because they
	// exceed MaxListArgumentsBytes; ArgumentsBytes and ArgumentsSha256 are the length and
	// SHA-256 (hex) of the redacted arguments as JSON, ArgumentsPreview their first bytes
	// (at most ArgumentsPreviewBytes, whole UTF-8 characters). The detail view
	// (GET /api/v1/approvals/{taskId}) always carries them in full.
	ArgumentsTruncated bool          `json:"argumentsTruncated,omitempty"`
	ArgumentsBytes     int           `json:"argumentsBytes,omitempty"`
	ArgumentsSha256    string        `json:"argumentsSha256,omitempty"`
	ArgumentsPreview   string        `json:"argumentsPreview,omitempty"`
	ArgsHash           string        `json:"argsHash"`
	Workflow           string        `json:"workflow,omitempty"`
	Accelerated        bool          `json:"accelerated,omitempty"`
	State              string        `json:"state"`
	Status             string        `json:"status"`
	StatusMessage      string        `json:"statusMessage,omitempty"`
	RequestedBy        string        `json:"requestedBy,omitempty"`
	Owner              string        `json:"owner,omitempty"`
	CreatedAt          time.Time     `json:"createdAt"`
	UpdatedAt          time.Time     `json:"updatedAt"`
	ApprovalDeadline   *time.Time    `json:"approvalDeadline,omitempty"`
	ExpiresAt          *time.Time    `json:"expiresAt,omitempty"`
	Decision           *DecisionView `json:"decision,omitempty"`
	Failure            *FailureView  `json:"failure,omitempty"`
	// Approvals are the votes given so far and RequiredApprovals how many distinct ones the
	// call needs now (approval.<name>.min_approvals): "k of N".
	Approvals         []VoteView `json:"approvals,omitempty"`
	RequiredApprovals int        `json:"requiredApprovals,omitempty"`
	// PreviousRejection: the same call (same requester, tool and arguments) was rejected
	// before, and the requester was told; this is its request again (docs/contract.md §3).
	PreviousRejection *PreviousRejectionView `json:"previousRejection,omitempty"`
	// DeliveredAt is when the finished call's outcome was written to its requester; from then
	// on the same call is a new call (docs/contract.md §3, replay only until delivered).
	DeliveredAt *time.Time `json:"deliveredAt,omitempty"`
	// CannotRun: this pending call can no longer run as things stand (its session ended, its
	// stdio process exited, its tool is quarantined or no longer listed); approving it fails
	// the task as execution would (docs/contract.md §4). Only on pending approvals.
	CannotRun *CannotRunView `json:"cannotRun,omitempty"`
	// RequesterNotWaiting: the requester's held call no longer waits (settled undecided,
	// timed out, disconnected); approved, the outcome is kept until resultKeptUntil for the
	// same call made again (docs/contract.md §4). Only on pending approvals.
	RequesterNotWaiting *NotWaitingView `json:"requesterNotWaiting,omitempty"`
}

// NotWaitingView says nobody waits for a pending held call: until when its outcome would be
// kept, and a sentence for people.
type NotWaitingView struct {
	ResultKeptUntil time.Time `json:"resultKeptUntil"`
	Message         string    `json:"message"`
}

// CannotRunView says why a pending call can no longer run: reason is one of session_ended,
// stdio_process_exited, tool_quarantined, tool_removed; message says it for people.
type CannotRunView struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// PreviousRejectionView names the earlier rejection of the same call: its task, who rejected
// it ("system:on_timeout" for a workflow timeout), why and when.
type PreviousRejectionView struct {
	TaskID string    `json:"taskId"`
	By     string    `json:"by"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// VoteView is one approver's approval of a call that needs several.
type VoteView struct {
	By     string    `json:"by"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// DecisionView is the standing decision on an approval.
type DecisionView struct {
	Approved bool      `json:"approved"`
	By       string    `json:"by"`
	Reason   string    `json:"reason,omitempty"`
	At       time.Time `json:"at"`
}

// FailureView names why a task failed. The message is left out: an upstream error message may
// quote the (unredacted) arguments.
type FailureView struct {
	Code int    `json:"code"`
	Name string `json:"name,omitempty"`
}

// ListResponse is the body of GET /api/v1/approvals. NextCursor, when set, fetches the next
// page (?cursor=); Truncated says the same for clients that predate cursors.
type ListResponse struct {
	Approvals  []View `json:"approvals"`
	Truncated  bool   `json:"truncated,omitempty"`
	NextCursor string `json:"nextCursor,omitempty"`
}

// ErrorResponse is the body of every error reply. Approval is the standing state on 409.
type ErrorResponse struct {
	Error    string `json:"error"`
	Message  string `json:"message"`
	Approval *View  `json:"approval,omitempty"`
}

type handler struct {
	tasks Tasks
	auth  Authenticator
	authz Authorizer
	opts  Options
	log   *slog.Logger
	mux   *http.ServeMux
	guard http.Handler // RequireApprover around mux
}

// NewHandler returns the approvals API. Mount it on the admin mux for
// "/api/v1/approvals", "/api/v1/approvals/" and "/api/v1/decisions"; it matches full paths
// itself.
func NewHandler(t Tasks, auth Authenticator, opts Options) http.Handler {
	h := &handler{tasks: t, auth: auth, opts: opts, log: opts.Logger, mux: http.NewServeMux(),
		authz: Authorizer{Config: opts.Config}}
	if h.log == nil {
		h.log = slog.Default()
	}
	h.guard = RequireApprover(auth, h.log, h.mux)
	h.mux.HandleFunc("GET /api/v1/approvals", h.list)
	h.mux.HandleFunc("GET /api/v1/approvals/summary", h.summary)
	h.mux.HandleFunc("GET /api/v1/approvals/whoami", h.whoami)
	h.mux.HandleFunc("GET /api/v1/approvals/{taskId}", h.show)
	h.mux.HandleFunc("POST /api/v1/approvals/{taskId}/approve", h.decide(true))
	h.mux.HandleFunc("POST /api/v1/approvals/{taskId}/reject", h.decide(false))
	h.mux.HandleFunc("GET /api/v1/decisions", h.decisions)
	h.mux.HandleFunc("GET /api/v1/approvals/{taskId}/explain", h.explain)
	return h
}

// ServeHTTP lets only an approver through to the API (RequireApprover: the login proxy's
// sign-in or an admin bearer token), as every other admin API.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.guard.ServeHTTP(w, r) }

func bearerToken(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", r.Header.Get("Authorization") != ""
	}
	tok = strings.TrimSpace(tok)
	return tok, true
}

// statusGroups maps ?status= keywords to the task states they cover. "approved" additionally
// requires an approving decision (accelerated tasks never had one). Internal state names are
// accepted as well.
var statusGroups = map[string][]tasks.State{
	"pending":  {tasks.AwaitingApproval},
	"approved": {tasks.Approved, tasks.Executing, tasks.Completed, tasks.Failed},
	"rejected": {tasks.Rejected},
}

var allStates = []tasks.State{tasks.AwaitingApproval, tasks.Approved, tasks.Executing, tasks.Completed, tasks.Failed, tasks.Rejected, tasks.Expired, tasks.TimedOut, tasks.Cancelled}

type statusFilter struct {
	all      bool
	states   map[tasks.State]bool // states accepted unconditionally
	approved map[tasks.State]bool // states accepted only with an approving decision
}

func parseStatus(values []string) (statusFilter, error) {
	f := statusFilter{states: map[tasks.State]bool{}, approved: map[tasks.State]bool{}}
	n := 0
	for _, v := range values {
		for _, s := range strings.Split(v, ",") {
			s = strings.ToLower(strings.TrimSpace(s))
			if s == "" {
				continue
			}
			n++
			switch {
			case s == "all":
				f.all = true
			case s == "approved":
				for _, st := range statusGroups[s] {
					f.approved[st] = true
				}
			case statusGroups[s] != nil:
				for _, st := range statusGroups[s] {
					f.states[st] = true
				}
			case slices.Contains(allStates, tasks.State(s)):
				f.states[tasks.State(s)] = true
			default:
				return f, fmt.Errorf("unknown status %q; use pending, approved, rejected, all or a task state (%s)", s, joinStates())
			}
		}
	}
	if n == 0 {
		f.states[tasks.AwaitingApproval] = true
	}
	return f, nil
}

func joinStates() string {
	s := make([]string, len(allStates))
	for i, st := range allStates {
		s[i] = string(st)
	}
	return strings.Join(s, ", ")
}

func (f statusFilter) match(t *tasks.Task) bool {
	if t.Accelerated {
		return false // never awaited a human; not an approval request
	}
	if f.all || f.states[t.State] {
		return true
	}
	return f.approved[t.State] && t.Decision != nil && t.Decision.Approved
}

// query is the manager filter covering f (match filters further).
func (f statusFilter) query() tasks.Filter {
	if f.all {
		return tasks.Filter{IncludeFinished: true}
	}
	var q tasks.Filter
	for _, st := range allStates {
		if f.states[st] || f.approved[st] {
			q.States = append(q.States, st)
			q.IncludeFinished = q.IncludeFinished || st.Terminal()
		}
	}
	return q
}

func (h *handler) list(w http.ResponseWriter, r *http.Request) {
	lq, err := parseListQuery(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error(), nil)
		return
	}
	may := h.authz.of(r).Policy().For(approverOf(r))
	if lq.indexed() {
		h.listIndexed(w, r, lq, may)
		return
	}
	// Other statuses and sort=expiry: every match is read and sorted, then the page is cut
	// after the cursor (the store orders only pending tasks by creation; pending tasks are
	// bounded by the quotas, tasks.quotas.max_pending_total).
	q := lq.status.query()
	ts, err := h.tasks.ListAll(r.Context(), q)
	if err != nil {
		h.internalError(w, "list approvals", err)
		return
	}
	// Only what the caller may decide, before the page is cut (authorize.go).
	ts = slices.DeleteFunc(ts, func(t *tasks.Task) bool { return t == nil || !lq.match(t) || !may(t) })
	keys := make(map[*tasks.Task]int64, len(ts))
	for _, t := range ts {
		keys[t] = lq.sort.key(t)
	}
	slices.SortFunc(ts, func(a, b *tasks.Task) int { return lq.sort.compare(keys[a], a.ID, keys[b], b.ID) })
	if c := lq.cursor; c != nil {
		// the first task after the cursor's position; tasks added or decided since do not shift it
		i, _ := slices.BinarySearchFunc(ts, c, func(t *tasks.Task, c *cursor) int {
			return lq.sort.compare(keys[t], t.ID, c.Key, c.ID)
		})
		for i < len(ts) && ts[i].ID == c.ID {
			i++
		}
		ts = ts[i:]
	}
	// The page ends at ?limit= rows or before its encoded rows exceed MaxListPageBytes,
	// whichever comes first; rows with large arguments are summarised (listView). Each row is
	// encoded once, as it is added, so serving a page never holds more than the page.
	p := newPageBuilder(h, lq)
	for _, t := range ts {
		added, err := p.add(t)
		if err != nil {
			h.internalError(w, "encode approval "+t.ID, err)
			return
		}
		if !added {
			break
		}
	}
	if n := len(p.resp.Approvals); n < len(ts) {
		last := ts[n-1]
		p.resp.Truncated = true
		p.resp.NextCursor = cursor{Sort: lq.sort, Key: keys[last], ID: last.ID}.encode()
	}
	writeJSON(w, http.StatusOK, p.resp)
}

// pageBuilder encodes the rows of one page as they are added, so serving a page never holds
// more than the page.
type pageBuilder struct {
	h     *handler
	limit int
	size  int
	resp  encodedPage
}

func newPageBuilder(h *handler, lq listQuery) *pageBuilder {
	return &pageBuilder{h: h, limit: lq.limit, resp: encodedPage{Approvals: make([]json.RawMessage, 0, min(lq.limit, 128))}}
}

// add encodes t as the next row and reports whether it was added: the page ends at ?limit=
// rows or before its encoded rows exceed MaxListPageBytes, whichever comes first (a page holds
// at least one row); rows with large arguments are summarised (listView).
func (p *pageBuilder) add(t *tasks.Task) (bool, error) {
	if len(p.resp.Approvals) == p.limit {
		return false, nil
	}
	b, err := json.Marshal(p.h.listView(t))
	if err != nil {
		return false, err
	}
	if len(p.resp.Approvals) > 0 && p.size+len(b) > MaxListPageBytes {
		return false, nil
	}
	p.size += len(b)
	p.resp.Approvals = append(p.resp.Approvals, b)
	return true, nil
}

// listBatch is how many tasks listIndexed reads from the store at a time: decoded tasks are
// held until their rows are encoded, and each may carry up to tasks.quotas.max_argument_bytes.
const listBatch = 16

// listIndexed serves pending approvals oldest or newest first from the store's ordered index
// (tasks.Manager.PageAwaiting): a page reads the rows it shows, the rows its filters and the
// caller's authorisation skip, and one more to know whether there is a next page; never more
// than MaxListScan entries. A page that reaches MaxListScan ends there, with fewer rows (even
// none) and nextCursor at the last entry read, so the next page goes on from it.
func (h *handler) listIndexed(w http.ResponseWriter, r *http.Request, lq listQuery, may func(*tasks.Task) bool) {
	var pos *tasks.Position
	if c := lq.cursor; c != nil {
		pos = &tasks.Position{CreatedAt: time.Unix(0, c.Key), ID: c.ID}
	}
	p := newPageBuilder(h, lq)
	var lastRow *tasks.Task
	scanned, full, end := 0, false, false
	for !full && !end && scanned < MaxListScan {
		n := min(listBatch, lq.limit-len(p.resp.Approvals)+1, MaxListScan-scanned)
		ts, last, err := h.tasks.PageAwaiting(r.Context(), pos, lq.sort == SortNewest, n)
		if err != nil {
			h.internalError(w, "list approvals", err)
			return
		}
		if last == nil {
			end = true
			break
		}
		scanned += n
		for i, t := range ts {
			ts[i] = nil // encoded or skipped: no longer held by the batch
			if t == nil || !lq.match(t) || !may(t) {
				continue
			}
			added, err := p.add(t)
			if err != nil {
				h.internalError(w, "encode approval "+t.ID, err)
				return
			}
			if !added {
				full = true // a further row exists: the page has a next one
				break
			}
			lastRow = t
		}
		pos = last
	}
	switch {
	case full && lastRow != nil:
		p.resp.Truncated = true
		p.resp.NextCursor = cursor{Sort: lq.sort, Key: lastRow.CreatedAt.UnixNano(), ID: lastRow.ID}.encode()
	case !end && !full && pos != nil:
		// the scan bound was reached: go on from the last entry read
		p.resp.Truncated = true
		p.resp.NextCursor = cursor{Sort: lq.sort, Key: pos.CreatedAt.UnixNano(), ID: pos.ID}.encode()
	}
	writeJSON(w, http.StatusOK, p.resp)
}

// encodedPage is ListResponse with each row already encoded (list).
type encodedPage struct {
	Approvals  []json.RawMessage `json:"approvals"`
	Truncated  bool              `json:"truncated,omitempty"`
	NextCursor string            `json:"nextCursor,omitempty"`
}

func (h *handler) show(w http.ResponseWriter, r *http.Request) {
	t, ok := h.authorized(w, r, "look up")
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, h.view(t))
}

func (h *handler) decide(approve bool) http.HandlerFunc {
	verb := "reject"
	if approve {
		verb = "approve"
	}
	return func(w http.ResponseWriter, r *http.Request) {
		// A malformed body is refused before anything is looked up; Decide then checks that
		// the task exists and that this approver may decide it (403 not_authorized).
		id := r.PathValue("taskId")
		approver := approverOf(r)
		reason, status, err := readReason(w, r)
		if err != nil {
			writeError(w, status, http.StatusText(status), err.Error(), nil)
			return
		}
		t, err := Decide(r.Context(), h.tasks, h.authz.of(r), id, approver, approve, reason)
		if err != nil {
			h.taskError(w, id, verb, err)
			return
		}
		h.log.Info("approval decided", "task", id, "tool", t.Tool, "approver", approver, "approved", approve)
		writeJSON(w, http.StatusOK, h.view(t))
	}
}

// readReason reads the optional {"reason": "..."} body strictly: unknown fields, trailing data
// and oversized bodies are errors. An empty body means no reason.
func readReason(w http.ResponseWriter, r *http.Request) (string, int, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return "", http.StatusRequestEntityTooLarge, fmt.Errorf("request body exceeds %d bytes", MaxBodyBytes)
		}
		return "", http.StatusBadRequest, fmt.Errorf("reading request body: %w", err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return "", 0, nil
	}
	var body struct {
		Reason string `json:"reason"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		return "", http.StatusBadRequest, fmt.Errorf(`body must be JSON {"reason": "..."}: %w`, err)
	}
	if dec.More() {
		return "", http.StatusBadRequest, errors.New(`body must be a single JSON object {"reason": "..."}`)
	}
	reason := strings.TrimSpace(body.Reason)
	if len(reason) > MaxReasonBytes {
		return "", http.StatusBadRequest, fmt.Errorf("reason exceeds %d bytes", MaxReasonBytes)
	}
	return reason, 0, nil
}

func (h *handler) taskError(w http.ResponseWriter, id, op string, err error) {
	if ce, ok := errors.AsType[*tasks.ConflictError](err); ok {
		var v *View
		msg := fmt.Sprintf("task %s is no longer awaiting approval", id)
		if ce.Task != nil {
			vv := h.view(ce.Task)
			v = &vv
			if d := ce.Task.Decision; d != nil {
				msg = fmt.Sprintf("task %s was already %s by %s", id, decisionWord(d.Approved), d.By)
			} else {
				msg = fmt.Sprintf("task %s is no longer awaiting approval (state %s)", id, ce.Task.State)
			}
		}
		writeError(w, http.StatusConflict, "conflict", msg, v)
		return
	}
	if na, ok := errors.AsType[*NotAuthorizedError](err); ok {
		writeError(w, http.StatusForbidden, "not_authorized", na.Error(), nil)
		return
	}
	if dv, ok := errors.AsType[*tasks.DuplicateVoteError](err); ok {
		v := h.view(dv.Task) // an approver's second vote never counts twice (min_approvals)
		writeError(w, http.StatusConflict, "already_approved", dv.Error(), &v)
		return
	}
	switch {
	case errors.Is(err, tasks.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("task %s not found", id), nil)
	case errors.Is(err, tasks.ErrSelfApproval):
		writeError(w, http.StatusForbidden, "self_approval", "the requester of a call cannot decide on it", nil)
	default:
		h.internalError(w, op+" task "+id, err)
	}
}

func decisionWord(approved bool) string {
	if approved {
		return "approved"
	}
	return "rejected"
}

func (h *handler) internalError(w http.ResponseWriter, op string, err error) {
	h.log.Error("admin API: "+op+" failed", "err", err)
	writeError(w, http.StatusInternalServerError, "internal", "internal error; see the gateway log", nil)
}

// view is the full view of a task: its redacted arguments whole.
func (h *handler) view(t *tasks.Task) View { return h.viewOf(t, false) }

// listView is a task's row in GET /api/v1/approvals: arguments larger than
// MaxListArgumentsBytes (as JSON, or twice that as indented text) are summarised.
func (h *handler) listView(t *tasks.Task) View { return h.viewOf(t, true) }

func (h *handler) viewOf(t *tasks.Task, summarise bool) View {
	v := View{
		TaskID:        t.ID,
		Tool:          t.Tool,
		ArgsHash:      t.ArgsHash,
		Workflow:      t.Workflow,
		Accelerated:   t.Accelerated,
		State:         string(t.State),
		Status:        t.WireStatus(),
		StatusMessage: t.StatusMessage,
		RequestedBy:   t.RequestedBy,
		Owner:         ownerView(t.Owner),
		CreatedAt:     t.CreatedAt.UTC(),
		UpdatedAt:     t.UpdatedAt.UTC(),
	}
	if summarise {
		h.listArguments(&v, t)
	} else {
		args := h.redact(t)
		v.Arguments, v.ArgumentsText = args, disclose.Pretty(args)
	}
	if !t.ApprovalDeadline.IsZero() {
		d := t.ApprovalDeadline.UTC()
		v.ApprovalDeadline = &d
	}
	if t.TTL > 0 {
		e := t.CreatedAt.Add(t.TTL).UTC()
		v.ExpiresAt = &e
	}
	if d := t.Decision; d != nil {
		v.Decision = &DecisionView{Approved: d.Approved, By: d.By, Reason: d.Reason, At: d.At.UTC()}
	}
	if e := t.Error; e != nil {
		v.Failure = &FailureView{Code: e.Code, Name: e.Name()}
	}
	if !t.Accelerated {
		v.RequiredApprovals = tasks.RequiredApprovals(t, h.opts.Workflow)
	}
	for _, a := range t.Approvals {
		v.Approvals = append(v.Approvals, VoteView{By: a.By, Reason: a.Reason, At: a.At.UTC()})
	}
	if p := t.PreviousRejection; p != nil {
		v.PreviousRejection = &PreviousRejectionView{TaskID: p.TaskID, By: p.By, Reason: p.Reason, At: p.At.UTC()}
	}
	if !t.DeliveredAt.IsZero() {
		at := t.DeliveredAt.UTC()
		v.DeliveredAt = &at
	}
	if t.State == tasks.AwaitingApproval && h.opts.CannotRun != nil {
		if u := h.opts.CannotRun(t); u != nil {
			v.CannotRun = &CannotRunView{Reason: u.Reason, Message: u.Message}
		}
	}
	if t.State == tasks.AwaitingApproval && h.opts.NotWaiting != nil {
		if n := h.opts.NotWaiting(t); n != nil {
			v.RequesterNotWaiting = &NotWaitingView{ResultKeptUntil: n.ResultKeptUntil.UTC(), Message: n.Message}
		}
	}
	return v
}

// summariseArguments puts the summary of redacted arguments into a list row in their place.
// listArguments sets a list row's arguments: whole when the redacted arguments fit
// MaxListArgumentsBytes (and twice that indented), else summarised. They are redacted as a
// stream (disclose.WriteArguments) into argSummary, which keeps only their first bytes, so a
// large row costs its size, hash and preview, never a redacted copy of its arguments.
func (h *handler) listArguments(v *View, t *tasks.Task) {
	s := argSummary{hash: sha256.New()}
	_ = disclose.WriteArguments(&s, t.Arguments, t.Workflow, h.opts.Workflow) // argSummary never fails
	if s.n > MaxListArgumentsBytes {
		summariseArguments(v, s.n, s.hash.Sum(nil), s.head) // not indented: the text would only be thrown away
		return
	}
	args := json.RawMessage(s.head)
	if text := disclose.Pretty(args); len(text) > 2*MaxListArgumentsBytes {
		summariseArguments(v, s.n, s.hash.Sum(nil), s.head)
	} else {
		v.Arguments, v.ArgumentsText = args, text
	}
}

// argSummary is a writer that counts and hashes what it is given and keeps its first
// MaxListArgumentsBytes+1 bytes.
type argSummary struct {
	n    int
	hash hash.Hash
	head []byte
}

func (s *argSummary) Write(p []byte) (int, error) {
	s.n += len(p)
	s.hash.Write(p)
	if keep := MaxListArgumentsBytes + 1 - len(s.head); keep > 0 {
		s.head = append(s.head, p[:min(keep, len(p))]...)
	}
	return len(p), nil
}

func summariseArguments(v *View, n int, sum []byte, head []byte) {
	v.ArgumentsTruncated = true
	v.ArgumentsBytes = n
	v.ArgumentsSha256 = hex.EncodeToString(sum)
	v.ArgumentsPreview = utf8Prefix(head, ArgumentsPreviewBytes)
}

// utf8Prefix is at most n bytes of b, cut before a UTF-8 character that would not fit whole.
func utf8Prefix(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return string(b[:n])
}

// redact is what approvers see of the arguments (disclose.Arguments: fails closed).
func (h *handler) redact(t *tasks.Task) json.RawMessage {
	return disclose.Arguments(t.Arguments, t.Workflow, h.opts.Workflow)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":"internal","message":"encoding response failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, code, msg string, v *View) {
	code = strings.ReplaceAll(strings.ToLower(code), " ", "_")
	writeJSON(w, status, ErrorResponse{Error: code, Message: msg, Approval: v})
}
