package approval

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gobwas/glob"

	"github.com/tollgate-mcp/tollgate/internal/disclose"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// Paging and filtering of GET /api/v1/approvals, and the pending counts of
// GET /api/v1/approvals/summary. Without them the list was oldest-first with no way past its
// limit: one caller's 100 (console) or 1000 (API, CLI) requests hid every later one from
// approvers, and hidden requests timed out and were denied.

// Sort orders of the list (?sort=).
const (
	SortOldest = "oldest" // created first, first (the default of the API)
	SortNewest = "newest" // created last, first (the default of the console and the CLI)
	SortExpiry = "expiry" // soonest approval deadline first; tasks without one last
)

const (
	// MaxFilterBytes bounds ?tool=, ?owner=, ?workflow= and ?cursor=.
	MaxFilterBytes = 1024
	// DefaultSummaryTop and MaxSummaryTop bound each breakdown of GET /api/v1/approvals/summary.
	DefaultSummaryTop = 10
	MaxSummaryTop     = 100
)

// NoOwner is the owner key (?owner=, summary) of tasks without an owner: 2026-07-28 calls
// without a credential.
const NoOwner = "none"

// AnonymousOwner names every anonymous 2026-07-28 caller's tasks to approvers (each such task
// is its own owner, package tasks): one group in the summary and one filter value, instead of
// a hash per task.
const AnonymousOwner = "anonymous"

type sortOrder string

// key is the task's position in the order; ties are broken by task id.
func (s sortOrder) key(t *tasks.Task) int64 {
	if s == SortExpiry {
		if t.ApprovalDeadline.IsZero() {
			return math.MaxInt64
		}
		return t.ApprovalDeadline.UnixNano()
	}
	return t.CreatedAt.UnixNano()
}

func (s sortOrder) compare(ka int64, ida string, kb int64, idb string) int {
	c := cmp.Or(cmp.Compare(ka, kb), strings.Compare(ida, idb))
	if s == SortNewest {
		return -c
	}
	return c
}

// cursor is the position after the last task of a page: its sort key and id. It is not an
// offset, so tasks created or decided between two pages neither repeat nor skip the others.
type cursor struct {
	Sort sortOrder `json:"s"`
	Key  int64     `json:"k"`
	ID   string    `json:"i"`
}

func (c cursor) encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string, want sortOrder) (*cursor, error) {
	bad := errors.New("cursor is not valid: pass nextCursor of the previous page unchanged")
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, bad
	}
	var c cursor
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || dec.More() || c.ID == "" {
		return nil, bad
	}
	if c.Sort != want {
		return nil, fmt.Errorf("cursor belongs to sort=%s, not sort=%s: pass the same sort with it", c.Sort, want)
	}
	return &c, nil
}

// listQuery is a parsed GET /api/v1/approvals query.
type listQuery struct {
	status   statusFilter
	sort     sortOrder
	tool     *glob.Pattern
	owner    string // an owner key (ownerKey), "" = any
	workflow string
	limit    int
	cursor   *cursor
}

// single returns the one value of a query parameter; a repeated one is an error, and so is a
// value longer than MaxFilterBytes.
func single(qv url.Values, name string) (string, error) {
	vs := qv[name]
	switch {
	case len(vs) == 0:
		return "", nil
	case len(vs) > 1:
		return "", fmt.Errorf("%s may be given once", name)
	case len(vs[0]) > MaxFilterBytes:
		return "", fmt.Errorf("%s exceeds %d bytes", name, MaxFilterBytes)
	}
	return vs[0], nil
}

func parseListQuery(qv url.Values) (listQuery, error) {
	var lq listQuery
	var err error
	if lq.status, err = parseStatus(qv["status"]); err != nil {
		return lq, err
	}
	v := map[string]string{}
	for _, name := range []string{"sort", "tool", "owner", "workflow", "limit", "cursor"} {
		if v[name], err = single(qv, name); err != nil {
			return lq, err
		}
	}
	switch s := strings.ToLower(strings.TrimSpace(v["sort"])); s {
	case "", SortOldest:
		lq.sort = SortOldest
	case SortNewest, SortExpiry:
		lq.sort = sortOrder(s)
	default:
		return lq, fmt.Errorf("unknown sort %q; use %s, %s or %s", v["sort"], SortNewest, SortOldest, SortExpiry)
	}
	if v["tool"] != "" {
		if lq.tool, err = glob.Compile(v["tool"]); err != nil {
			return lq, fmt.Errorf("tool %q is not a valid glob (the syntax of rules' match): %v", v["tool"], err)
		}
	}
	if o := strings.ToLower(strings.TrimSpace(v["owner"])); o != "" {
		if !validOwnerKey(o) {
			return lq, fmt.Errorf("owner %q is not an owner hash as shown in approvals (12 hex digits) or %q", v["owner"], NoOwner)
		}
		lq.owner = o
	}
	lq.workflow = v["workflow"]
	lq.limit = DefaultListLimit
	if s := v["limit"]; s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxListLimit {
			return lq, fmt.Errorf("limit must be an integer from 1 to %d", MaxListLimit)
		}
		lq.limit = n
	}
	if s := v["cursor"]; s != "" {
		if lq.cursor, err = decodeCursor(s, lq.sort); err != nil {
			return lq, err
		}
	}
	return lq, nil
}

// indexed reports whether the store's ordered index of pending tasks serves the query
// (listIndexed): pending approvals only, oldest or newest first.
func (lq listQuery) indexed() bool {
	f := lq.status
	return lq.sort != SortExpiry && !f.all && len(f.approved) == 0 && len(f.states) == 1 && f.states[tasks.AwaitingApproval]
}

func (lq listQuery) match(t *tasks.Task) bool {
	switch {
	case !lq.status.match(t):
		return false
	case lq.tool != nil && !lq.tool.Match(t.Tool):
		return false
	case lq.owner != "" && ownerKey(t.Owner) != lq.owner:
		return false
	case lq.workflow != "" && t.Workflow != lq.workflow:
		return false
	}
	return true
}

// ownerKey is how an owner is named to approvers: its hash (disclose.OwnerHash), NoOwner or
// AnonymousOwner.
func ownerKey(owner string) string {
	if owner == "" {
		return NoOwner
	}
	return ownerView(owner)
}

// ownerView is the owner as a view shows it ("" for none).
func ownerView(owner string) string {
	if tasks.IsAnonymous(owner) {
		return AnonymousOwner
	}
	return disclose.OwnerHash(owner)
}

func validOwnerKey(s string) bool {
	if s == NoOwner || s == AnonymousOwner {
		return true
	}
	if len(s) != len(disclose.OwnerHash("x")) {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

// SummaryResponse is the body of GET /api/v1/approvals/summary: pending approval requests in
// all and broken down by owner, tool and workflow, so one caller's many requests cannot hide
// another's from approvers.
type SummaryResponse struct {
	// AuditMode says what audit mode covers (governance.mode, rules[].mode); absent when
	// every rule is enforced. The console shows it.
	AuditMode string    `json:"auditMode,omitempty"`
	Pending   int       `json:"pending"`
	Owners    Breakdown `json:"owners"`
	Tools     Breakdown `json:"tools"`
	Workflows Breakdown `json:"workflows"`
}

// Breakdown is the largest groups (at most ?top=, most pending first) and what the rest add up to.
type Breakdown struct {
	Top          []Count `json:"top"`
	OtherKeys    int     `json:"otherKeys"`
	OtherPending int     `json:"otherPending"`
}

// Count is one group: the owner key, tool or workflow, its pending requests and the soonest
// approval deadline among them.
type Count struct {
	Key          string     `json:"key"`
	Pending      int        `json:"pending"`
	NextDeadline *time.Time `json:"nextDeadline,omitempty"`
}

func (h *handler) summary(w http.ResponseWriter, r *http.Request) {
	top := DefaultSummaryTop
	s, err := single(r.URL.Query(), "top")
	if err == nil && s != "" {
		n, cerr := strconv.Atoi(s)
		if cerr != nil || n < 1 || n > MaxSummaryTop {
			err = fmt.Errorf("top must be an integer from 1 to %d", MaxSummaryTop)
		}
		top = n
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error(), nil)
		return
	}
	ts, err := h.tasks.ListAll(r.Context(), tasks.Filter{States: []tasks.State{tasks.AwaitingApproval}})
	if err != nil {
		h.internalError(w, "summarise approvals", err)
		return
	}
	owners, tools, workflows := counter{}, counter{}, counter{}
	var resp SummaryResponse
	if h.opts.AuditMode != nil {
		resp.AuditMode = h.opts.AuditMode()
	}
	may := h.authz.of(r).Policy().For(approverOf(r))
	for _, t := range ts {
		if t == nil || t.Accelerated || t.State != tasks.AwaitingApproval || !may(t) {
			continue
		}
		resp.Pending++
		owners.add(ownerKey(t.Owner), t.ApprovalDeadline)
		tools.add(t.Tool, t.ApprovalDeadline)
		workflows.add(t.Workflow, t.ApprovalDeadline)
	}
	resp.Owners, resp.Tools, resp.Workflows = owners.top(top), tools.top(top), workflows.top(top)
	writeJSON(w, http.StatusOK, resp)
}

type counter map[string]*Count

func (c counter) add(key string, deadline time.Time) {
	n := c[key]
	if n == nil {
		n = &Count{Key: key}
		c[key] = n
	}
	n.Pending++
	if !deadline.IsZero() && (n.NextDeadline == nil || deadline.Before(*n.NextDeadline)) {
		d := deadline.UTC()
		n.NextDeadline = &d
	}
}

func (c counter) top(n int) Breakdown {
	all := make([]*Count, 0, len(c))
	for _, v := range c {
		all = append(all, v)
	}
	slices.SortFunc(all, func(a, b *Count) int { return cmp.Or(cmp.Compare(b.Pending, a.Pending), strings.Compare(a.Key, b.Key)) })
	b := Breakdown{Top: make([]Count, 0, min(n, len(all)))}
	for i, v := range all {
		if i < n {
			b.Top = append(b.Top, *v)
			continue
		}
		b.OtherKeys++
		b.OtherPending += v.Pending
	}
	return b
}
