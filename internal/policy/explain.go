package policy

import (
	"slices"

	"github.com/cedar-policy/cedar-go"
)

// PolicyResult is one Cedar policy that took part in a decision: it was satisfied (its scope
// and conditions held) or its evaluation failed. It names no argument values.
type PolicyResult struct {
	ID       string `json:"id"`
	Effect   string `json:"effect"`             // permit or forbid
	Decision string `json:"decision,omitempty"` // a permit's @decision: approve or forward
	Position string `json:"position"`           // file:line:column
	Outcome  string `json:"outcome"`            // satisfied, or error
	Error    string `json:"error,omitempty"`    // the class of the evaluation error
}

// Explanation is Decide's decision together with every policy that was satisfied or failed,
// and how many others did not apply.
type Explanation struct {
	Decision   Decision
	Policies   []PolicyResult
	NotMatched int // policies whose scope or conditions did not hold
	Err        error
}

// Explain decides req as Decide does and says which policies were satisfied or failed.
func (e *Engine) Explain(req Request) Explanation {
	d, diag, err := e.decide(req)
	x := Explanation{Decision: d, Err: err}
	seen := map[cedar.PolicyID]bool{}
	add := func(id cedar.PolicyID, outcome, msg string) {
		seen[id] = true
		i := slices.IndexFunc(e.policies, func(en entry) bool { return en.id == id })
		if i < 0 {
			return
		}
		en := e.policies[i]
		r := PolicyResult{ID: string(id), Effect: "permit", Position: position(en.policy.Position()), Outcome: outcome, Error: msg}
		if en.policy.Effect() == cedar.Forbid {
			r.Effect = "forbid"
		} else if en.approve {
			r.Decision = "approve"
		} else {
			r.Decision = "forward"
		}
		x.Policies = append(x.Policies, r)
	}
	for _, r := range diag.Reasons {
		add(r.PolicyID, "satisfied", "")
	}
	for _, de := range diag.Errors {
		add(de.PolicyID, "error", errorClass(de.Message))
	}
	if d.Reason == ReasonForbid {
		// Cedar reports only the forbids behind a deny; the permits that hold as well say
		// what the call would get without them.
		var permits policyList
		for _, en := range e.policies {
			if en.policy.Effect() == cedar.Permit {
				permits = append(permits, en)
			}
		}
		_, pdiag, _ := e.decideWith(permits, req)
		for _, r := range pdiag.Reasons {
			add(r.PolicyID, "satisfied", "")
		}
	}
	slices.SortFunc(x.Policies, func(a, b PolicyResult) int {
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	x.NotMatched = len(e.policies) - len(seen)
	return x
}
