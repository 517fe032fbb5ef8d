package approval

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// Bounds of GET /api/v1/decisions (?limit=N).
const (
	DefaultDecisionsLimit = 100
	MaxDecisionsLimit     = 512
)

// DecisionsResponse is the body of GET /api/v1/decisions: the last governance decisions this
// replica made that were not plain forwards (denials, holds, and audit mode's "would deny" /
// "would hold"), newest first, as the audit log writes them — never arguments.
type DecisionsResponse struct {
	Decisions any `json:"decisions"`
}

// decisions serves GET /api/v1/decisions[?would=true][&limit=N].
func (h *handler) decisions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, would := DefaultDecisionsLimit, false
	s, err := single(q, "limit")
	if err == nil && s != "" {
		n, cerr := strconv.Atoi(s)
		if cerr != nil || n < 1 || n > MaxDecisionsLimit {
			err = fmt.Errorf("limit must be an integer from 1 to %d", MaxDecisionsLimit)
		}
		limit = n
	}
	if err == nil {
		if s, err = single(q, "would"); err == nil && s != "" {
			if would, err = strconv.ParseBool(s); err != nil {
				err = fmt.Errorf("would must be true or false")
			}
		}
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error(), nil)
		return
	}
	resp := DecisionsResponse{Decisions: []any{}}
	if h.opts.Decisions != nil {
		// A hold names its workflow: shown only to approvers who may decide that workflow's
		// calls, as the approvals list is (Policy.For).
		may := h.authz.of(r).Policy().For(approverOf(r))
		resp.Decisions = h.opts.Decisions(would, limit, func(workflow string) bool {
			return workflow == "" || may(&tasks.Task{Workflow: workflow})
		})
	}
	writeJSON(w, http.StatusOK, resp)
}

// ExplainResponse is the body of GET /api/v1/approvals/{taskId}/explain: why the task's call
// is decided as it is, re-evaluated with the configuration loaded now (Revision) and the
// task's creation time as Cedar's context.time.
type ExplainResponse struct {
	TaskID      string    `json:"taskId"`
	Tool        string    `json:"tool"`
	State       string    `json:"state"`
	Revision    uint64    `json:"revision"`
	EvaluatedAt time.Time `json:"evaluatedAt"`
	// Explanation is governance's: rule, policies (satisfied or failing, with file:line),
	// outcome, what_would_change_it.
	Explanation any `json:"explanation"`
}

// explain serves GET /api/v1/approvals/{taskId}/explain to approvers who may see the task.
func (h *handler) explain(w http.ResponseWriter, r *http.Request) {
	if h.opts.Explain == nil {
		http.NotFound(w, r)
		return
	}
	t, ok := h.authorized(w, r, "explain")
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, h.opts.Explain(r.Context(), t))
}
