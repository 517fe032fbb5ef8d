package policy

import (
	"slices"

	"github.com/cedar-policy/cedar-go"
	"github.com/cedar-policy/cedar-go/types"
	xast "github.com/cedar-policy/cedar-go/x/exp/ast"
	"github.com/cedar-policy/cedar-go/x/exp/batch"
	xeval "github.com/cedar-policy/cedar-go/x/exp/eval"

	"github.com/tollgate-mcp/tollgate/internal/rules"
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
	return e.Prober(req).Forbidden(req.Tool, req.PolicyID, req.Annotations)
}

// Prober is ForbiddenRegardless for one principal over many tools (one listing): the
// principal's part of the request (entity, groups, scopes) is built once, when first needed.
// Not safe for concurrent use.
type Prober struct {
	e         *Engine
	req       Request // the principal's part
	built     bool
	entities  types.EntityMap // the principal and its groups
	principal types.EntityUID
	scopes    types.Value
	ann       map[rules.Hints]types.Value
}

// Prober returns a Prober for req's principal (req.Tool, PolicyID and Annotations are given
// per tool to Forbidden).
func (e *Engine) Prober(req Request) *Prober { return &Prober{e: e, req: req} }

// Forbidden is ForbiddenRegardless for the prober's principal calling tool under policyID with
// the annotation hints.
func (p *Prober) Forbidden(tool, policyID string, hints rules.Hints) []string {
	var env *xeval.Env // built for the first forbid that may concern the tool
	var ids []string
	uid := types.NewEntityUID(EntityToolCall, types.String(tool))
	for _, en := range p.e.policies {
		if en.policy.Effect() != cedar.Forbid {
			continue
		}
		ast := (*xast.Policy)(en.policy.AST())
		if eq, ok := ast.Resource.(xast.ScopeTypeEq); ok && eq.Entity != uid {
			continue // a forbid of another tool (most are): no request to build
		}
		if env == nil {
			env = p.env(uid, tool, policyID, hints)
		}
		pp, keep := xeval.PartialPolicy(*env, ast)
		if keep && settled(pp) {
			ids = append(ids, string(en.id))
		}
	}
	slices.Sort(ids)
	return ids
}

// env is the request of request() with arguments and time ignored, its principal part built
// once per Prober.
func (p *Prober) env(uid types.EntityUID, tool, policyID string, hints rules.Hints) *xeval.Env {
	if !p.built {
		p.built = true
		full, r := request(p.req, batch.Ignore(), batch.Ignore())
		p.entities = make(types.EntityMap, len(full))
		for k, v := range full {
			if k.Type != EntityToolCall {
				p.entities[k] = v
			}
		}
		p.principal = r.Principal
		p.scopes, _ = r.Context.Get("scopes")
		p.ann = map[rules.Hints]types.Value{}
	}
	ann, ok := p.ann[hints]
	if !ok {
		m := make(types.RecordMap, 4)
		for k, v := range hints.Values() {
			m[types.String(k)] = types.Boolean(v)
		}
		ann = types.NewRecord(m)
		p.ann[hints] = ann
	}
	res := types.Entity{UID: uid, Attributes: types.NewRecord(types.RecordMap{
		"arguments": batch.Ignore(),
		"name":      types.String(tool),
	})}
	return &xeval.Env{
		Entities:  withResource{p.entities, res},
		Principal: p.principal,
		Action:    types.NewEntityUID(EntityAction, ActionToolCall),
		Resource:  uid,
		Context: types.NewRecord(types.RecordMap{
			"policy_id":   types.String(policyID),
			"source_id":   types.String(p.req.SourceID),
			"annotations": ann,
			"scopes":      p.scopes,
			"time":        batch.Ignore(),
		}),
	}
}

// withResource is the principal's entities and one tool call's.
type withResource struct {
	m   types.EntityMap
	res types.Entity
}

func (w withResource) Get(uid types.EntityUID) (types.Entity, bool) {
	if uid == w.res.UID {
		return w.res, true
	}
	return w.m.Get(uid)
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
