package approval

import (
	"fmt"
	"net/http"
	"strconv"
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
		resp.Decisions = h.opts.Decisions(would, limit)
	}
	writeJSON(w, http.StatusOK, resp)
}
