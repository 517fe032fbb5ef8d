package approval

import (
	"net/http"
	"slices"
	"sort"
)

// WhoAmI is the body of GET /api/v1/approvals/whoami: who the request is signed in as, so
// the console can name the approver instead of a bare "signed in" (issue 29).
type WhoAmI struct {
	Approver string `json:"approver"`
	// SignIn is how: "token" (an admin bearer token) or "login_proxy" (server.admin_auth).
	SignIn string `json:"signIn"`
	// Groups are the approver_groups that name the approver, and for a login-proxy sign-in the
	// groups its proxy sent; sorted, without duplicates.
	Groups []string `json:"groups"`
}

func (h *handler) whoami(w http.ResponseWriter, r *http.Request) {
	name := approverOf(r)
	out := WhoAmI{Approver: name, SignIn: "token", Groups: []string{}}
	if id, ok := SignedIn(r.Context()); ok {
		out.SignIn = id.Via
		out.Groups = append(out.Groups, id.Groups...)
	}
	if h.opts.Config != nil {
		if cfg := h.opts.Config(); cfg != nil {
			for g, members := range cfg.ApproverGroups {
				if slices.Contains(members, name) { // groups grant: exact names, as MayDecide
					out.Groups = append(out.Groups, g)
				}
			}
		}
	}
	sort.Strings(out.Groups)
	out.Groups = slices.Compact(out.Groups)
	writeJSON(w, http.StatusOK, out)
}
