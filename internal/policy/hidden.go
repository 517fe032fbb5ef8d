package policy

import (
	"slices"

	"github.com/cedar-policy/cedar-go"
	"github.com/cedar-policy/cedar-go/types"
	xast "github.com/cedar-policy/cedar-go/x/exp/ast"
	"github.com/cedar-policy/cedar-go/x/exp/batch"
	xeval "github.com/cedar-policy/cedar-go/x/exp/eval"
)

// HasForbid reports whether the set has a forbid policy: only a forbid can make a tool one a
// caller may never call (ForbiddenRegardless).
func (e *Engine) HasForbid() bool {
	return slices.ContainsFunc(e.policies, func(en entry) bool { return en.policy.Effect() == cedar.Forbid })
}

// ForbiddenRegardless returns the ids of the forbid policies that deny req whatever its
// arguments and whenever it is made: req.Arguments and req.Time are not read. It uses
// cedar-go's partial evaluation with resource.arguments and context.time unknown (ignored):
// a forbid whose evaluation reaches either of them is dropped, so only a forbid whose scope
// holds and whose every condition evaluates to its effect without them counts. An
// evaluation error counts as not satisfied here (the call itself is denied on the error all
// the same). Empty when nothing forbids req that way: the tool may still be denied for some
// arguments, which only the call's own evaluation decides.
//
// This is what tools/list reads to leave a tool out of a caller's listing
// (server.caller_auth.tool_view: caller); the call path never relies on it.
func (e *Engine) ForbiddenRegardless(req Request) []string {
	var env *xeval.Env // built for the first forbid that may concern the tool
	var ids []string
	for _, en := range e.policies {
		if en.policy.Effect() != cedar.Forbid {
			continue
		}
		ast := (*xast.Policy)(en.policy.AST())
		if eq, ok := ast.Resource.(xast.ScopeTypeEq); ok && eq.Entity != types.NewEntityUID(EntityToolCall, types.String(req.Tool)) {
			continue // a forbid of another tool (most are): no request to build
		}
		if env == nil {
			entities, r := request(req, batch.Ignore(), batch.Ignore())
			env = &xeval.Env{Entities: entities, Principal: r.Principal, Action: r.Action, Resource: r.Resource, Context: r.Context}
		}
		p, keep := xeval.PartialPolicy(*env, ast)
		if keep && settled(p) {
			ids = append(ids, string(en.id))
		}
	}
	slices.Sort(ids)
	return ids
}

// settled reports whether a partially evaluated policy holds outright: every scope clause
// matched (PartialPolicy turns a matched one into "all") and no condition is left (a
// condition that held is removed; one left is an error or still depends on something).
func settled(p *xast.Policy) bool {
	_, pa := p.Principal.(xast.ScopeTypeAll)
	_, aa := p.Action.(xast.ScopeTypeAll)
	_, ra := p.Resource.(xast.ScopeTypeAll)
	return pa && aa && ra && len(p.Conditions) == 0
}
