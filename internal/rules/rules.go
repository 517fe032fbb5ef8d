// Package rules maps tool names to governance actions (docs/contract.md §3) and computes the
// taskSupport annotation Tollgate advertises for each tool (docs/contract.md §2, REQ-CORE-007 §5.3).
//
// An Engine is built once per config snapshot and is immutable apart from its internal
// per-tool decision cache, which is safe for concurrent use.
package rules

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

// TaskSupport is the value of tool.execution.taskSupport (spec 2025-11-25 tasks).
type TaskSupport string

const (
	Forbidden TaskSupport = "forbidden"
	Optional  TaskSupport = "optional"
	Required  TaskSupport = "required"
)

// MaxCachedTools bounds the per-tool decision cache. Tool names come from clients
// (tools/call params.name), so an unbounded cache would let a client grow memory at will;
// beyond the cap decisions are still correct, just computed each time.
const MaxCachedTools = 16384

// MaxCachedNameBytes bounds the names the cache keeps, so it holds at most MaxCachedTools ×
// this many bytes of names; a longer name (MCP recommends at most 128 characters) is decided
// each time. Without it, 100 calls with 1 MB names kept 100 MB alive.
const MaxCachedNameBytes = 256

// Decision is the governance outcome for one tool name.
type Decision struct {
	Action        config.Action // forward|approve|deny|policy
	Rule          int           // index into governance.rules, -1 = defaults
	Match         string        // the matching glob ("" for defaults)
	Workflow      string        // approval workflow name (rule.approval, default "default")
	PolicyID      string        // rule.policy_id, for action: policy
	ForceRequired bool          // tool is in force_required
	// Audit: the rule (or the defaults) is in audit mode (governance.mode, rules[].mode):
	// the decision is recorded as it would have been and the call is forwarded.
	Audit bool
}

type compiledRule struct {
	hints    []hintCond // match_annotations; all must hold
	callers  View       // bits of the caller conditions of which one must hold; 0 = every caller
	pattern  *Glob
	prefixes []string // every match starts with one of these ({a,b} expanded); [""] = unknown
	match    string
	action   config.Action
	workflow string
	policyID string
	audit    bool
}

// Engine decides actions for tool names. Build it with Compile.
type Engine struct {
	rules []compiledRule
	// byFirst[b] lists, in rule order, the rules a tool starting with byte b can match:
	// those whose literal prefix starts with b plus those without a prefix. It lets a
	// 1000-rule config skip most globs without calling them (NF-001.4).
	byFirst       [256][]int32
	anyFirst      []int32 // rules without a literal prefix (also used for "")
	defaults      Decision
	forceRequired map[string]struct{}

	// callerConds are the distinct governance.rules[].callers entries, bit i of a View
	// standing for callerConds[i].
	callerConds []string

	cache  sync.Map // cacheKey → Decision
	cached atomic.Int64
	// usesHints: some rule has match_annotations. Otherwise hints are left out of the cache
	// key, so a tool's decision is cached once whatever its annotations.
	usesHints bool
}

type cacheKey struct {
	tool  string
	hints Hints
	view  View
}

// MaxCallerConditions bounds the distinct callers entries of all rules (bits of a View).
const MaxCallerConditions = 64

// Who is what rules' callers lists read of a caller.
type Who struct {
	Subject string   // verified subject or server.identity_header value; "" = unidentified
	Groups  []string // a verified caller's groups
}

// View is which of the rules' caller conditions a caller meets (bit i: callerConds[i]).
// Callers with one view get the same decisions; listings are memoised per view.
type View uint64

// ViewOf returns w's view. Entries match exactly (they grant).
func (e *Engine) ViewOf(w Who) View {
	var v View
	for i, c := range e.callerConds {
		if u, ok := strings.CutPrefix(c, config.CallerUserPrefix); ok {
			if w.Subject != "" && u == w.Subject {
				v |= 1 << i
			}
		} else if g, ok := strings.CutPrefix(c, config.CallerGroupPrefix); ok {
			for _, have := range w.Groups {
				if have == g {
					v |= 1 << i
					break
				}
			}
		}
	}
	return v
}

// UsesCallers reports whether any rule has a callers list (decisions depend on the caller).
func (e *Engine) UsesCallers() bool { return len(e.callerConds) > 0 }

// Compile compiles every rule glob once. Globs use gobwas/glob syntax without separators
// (docs/contract.md §3): `*`, `?`, `[a-z]`, `[!x]`, `{a,b}`; they are matched by Glob, in time
// linear in the tool name. forceRequired lists exact tool names
// (task_annotation_overrides.force_required / TOLLGATE_TASK_FORCE_REQUIRED).
func Compile(gov config.Governance, forceRequired []string) (*Engine, error) {
	e := &Engine{
		rules:         make([]compiledRule, 0, len(gov.Rules)),
		forceRequired: make(map[string]struct{}, len(forceRequired)),
	}
	var errs []string
	for i, r := range gov.Rules {
		p, err := CompileGlob(r.Match)
		if err != nil {
			errs = append(errs, fmt.Sprintf("governance.rules[%d].match %q: %v", i, r.Match, err))
			continue
		}
		if !validAction(r.Action) {
			errs = append(errs, fmt.Sprintf("governance.rules[%d].action: unknown action %q", i, r.Action))
			continue
		}
		conds, err := compileHints(r.MatchAnnotations)
		if err != nil {
			errs = append(errs, fmt.Sprintf("governance.rules[%d].match_annotations: %v", i, err))
			continue
		}
		e.usesHints = e.usesHints || len(conds) > 0
		var callers View
		for _, c := range r.Callers {
			j := slices.Index(e.callerConds, c)
			if j < 0 {
				if len(e.callerConds) == MaxCallerConditions {
					errs = append(errs, fmt.Sprintf("governance.rules[%d].callers: more than %d distinct callers entries in all rules", i, MaxCallerConditions))
					break
				}
				j = len(e.callerConds)
				e.callerConds = append(e.callerConds, c)
			}
			callers |= 1 << j
		}
		e.rules = append(e.rules, compiledRule{
			callers:  callers,
			hints:    conds,
			pattern:  p,
			prefixes: literalPrefixes(r.Match, 0),
			match:    r.Match,
			action:   r.Action,
			workflow: orDefault(r.Approval, config.DefaultWorkflow),
			policyID: r.PolicyID,
			audit:    r.Mode == config.ModeAudit || (r.Mode == "" && gov.Mode == config.ModeAudit),
		})
	}
	// An empty default action means the config layer did not set one; forward is the
	// documented default (docs/contract.md §4 example, config.Defaults).
	defAction := gov.Defaults.Action
	if defAction == "" {
		defAction = config.ActionForward
	}
	if !validAction(defAction) {
		errs = append(errs, fmt.Sprintf("governance.defaults.action: unknown action %q", defAction))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("rules: %s", strings.Join(errs, "; "))
	}
	e.index()
	e.defaults = Decision{
		Action:   defAction,
		Rule:     -1,
		Workflow: orDefault(gov.Defaults.Approval, config.DefaultWorkflow),
		Audit:    gov.Mode == config.ModeAudit,
	}
	for _, name := range forceRequired {
		if name = strings.TrimSpace(name); name != "" {
			e.forceRequired[name] = struct{}{}
		}
	}
	return e, nil
}

// Len is the number of compiled rules.
func (e *Engine) Len() int { return len(e.rules) }

// Decide returns the decision for a tool whose annotations are unknown (counted with the
// spec's defaults, see Hints): the first matching rule wins, else the defaults.
func (e *Engine) Decide(tool string) Decision { return e.DecideHints(tool, 0) }

// DecideHints returns the decision for tool with the annotations h the upstream listed for it,
// for a caller no callers list names (rules with callers do not apply).
func (e *Engine) DecideHints(tool string, h Hints) Decision { return e.DecideFor(tool, h, 0) }

// DecideFor returns the decision for tool with annotations h for a caller of view v.
func (e *Engine) DecideFor(tool string, h Hints, v View) Decision {
	if !e.usesHints {
		h = 0 // no rule reads them: one cache entry per tool
	}
	key := cacheKey{tool, h, v}
	if c, ok := e.cache.Load(key); ok {
		return c.(Decision)
	}
	d := e.decide(tool, h, v)
	// Stop caching at the cap: the counter may overshoot by the number of racing
	// goroutines, which is harmless.
	if len(tool) <= MaxCachedNameBytes && e.cached.Load() < MaxCachedTools {
		if _, loaded := e.cache.LoadOrStore(key, d); !loaded {
			e.cached.Add(1)
		}
	}
	return d
}

// UsesHints reports whether any rule has match_annotations.
func (e *Engine) UsesHints() bool { return e.usesHints }

func (e *Engine) decide(tool string, h Hints, v View) Decision {
	var d Decision
	matched := false
	candidates := e.anyFirst
	if tool != "" {
		candidates = e.byFirst[tool[0]]
	}
	for _, i := range candidates {
		r := &e.rules[i]
		if (r.callers == 0 || r.callers&v != 0) && hasAnyPrefix(tool, r.prefixes) && r.pattern.Match(tool) && h.satisfies(r.hints) {
			d = Decision{Action: r.action, Rule: int(i), Match: r.match, Workflow: r.workflow, PolicyID: r.policyID, Audit: r.audit}
			matched = true
			break
		}
	}
	if !matched {
		d = e.defaults
	}
	_, d.ForceRequired = e.forceRequired[tool]
	return d
}

// Annotation applies the decision matrix (docs/contract.md §2, REQ-CORE-007 §5.3 / §9.1):
//
//	force_required                  → required
//	audit mode (any action)         → as forward
//	deny                            → forbidden
//	approve, policy                 → required (optional under sync_approval hold|promote|block)
//	forward, upstream without tasks → forbidden
//	forward, upstream with tasks    → upstream's own value; absent/forbidden → optional
//
// The last row differs from the seed on purpose: Tollgate runs task-augmented calls for
// tools the upstream marks forbidden itself ("accelerated approve", REQ-CORE-007 F-005.6).
// upstreamValue is the upstream tool's execution.taskSupport ("" when absent).
func Annotation(d Decision, upstreamTasks bool, upstreamValue TaskSupport, syncApproval string) TaskSupport {
	if d.ForceRequired {
		return Required
	}
	action := d.Action
	if d.Audit {
		action = config.ActionForward // audit mode forwards whatever it would have decided
	}
	switch action {
	case config.ActionDeny:
		return Forbidden
	case config.ActionApprove, config.ActionPolicy:
		// hold/promote/block serve task-less clients too, so tasks must not be mandatory.
		switch syncApproval {
		case config.SyncApprovalHold, config.SyncApprovalPromote, config.SyncApprovalBlock:
			return Optional
		}
		return Required
	case config.ActionForward:
		if !upstreamTasks {
			// REQ-CORE-007 §5.4: the upstream cannot take task metadata.
			return Forbidden
		}
		if upstreamValue == Required {
			return Required
		}
		return Optional
	default:
		// Unknown actions cannot come out of Compile; fail closed anyway.
		return Forbidden
	}
}

// index fills byFirst/anyFirst; each list stays in rule order so first match still wins.
func (e *Engine) index() {
	var own [256][]int32
	for i, r := range e.rules {
		if slices.Contains(r.prefixes, "") {
			e.anyFirst = append(e.anyFirst, int32(i))
			for b := range own {
				if own[b] != nil {
					own[b] = append(own[b], int32(i))
				}
			}
			continue
		}
		for _, p := range r.prefixes {
			b := p[0]
			if n := len(own[b]); n > 0 && own[b][n-1] == int32(i) {
				continue // same byte twice, e.g. {get,gather}
			}
			if own[b] == nil {
				// Rules without a known first byte that came earlier still apply.
				own[b] = append(make([]int32, 0, len(e.anyFirst)+1), e.anyFirst...)
			}
			own[b] = append(own[b], int32(i))
		}
	}
	for b := range own {
		if own[b] != nil {
			e.byFirst[b] = own[b]
		} else {
			e.byFirst[b] = e.anyFirst
		}
	}
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// maxPrefixes caps brace expansion; past it the shared literal head is used alone.
const maxPrefixes = 32

// literalPrefixes returns literal texts such that every string the glob matches starts with
// at least one of them. {a,b} alternatives are expanded because gobwas/glob matches them by
// backtracking, which is slow to fail; anything not modelled ends the prefix (conservative).
func literalPrefixes(pattern string, depth int) []string {
	var lit strings.Builder
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; c {
		case '\\':
			if i+1 >= len(pattern) {
				return []string{lit.String()}
			}
			i++
			lit.WriteByte(pattern[i])
		case '{':
			alts, rest, ok := splitAlternatives(pattern[i:])
			if !ok || depth >= 4 {
				return []string{lit.String()}
			}
			var out []string
			for _, a := range alts {
				for _, p := range literalPrefixes(a+rest, depth+1) {
					out = append(out, lit.String()+p)
				}
				if len(out) > maxPrefixes {
					return []string{lit.String()}
				}
			}
			return out
		case '*', '?', '[', ']', '}', ',':
			return []string{lit.String()}
		default:
			lit.WriteByte(c)
		}
	}
	return []string{lit.String()}
}

// splitAlternatives splits "{a,b{c,d}}rest" into ["a", "b{c,d}"] and "rest".
func splitAlternatives(pattern string) (alts []string, rest string, ok bool) {
	depth, start := 0, 1
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '\\':
			i++
		case '[':
			// Skip the class: `,` `{` `}` are literal inside it, `\` escapes.
			for i++; i < len(pattern) && pattern[i] != ']'; i++ {
				if pattern[i] == '\\' {
					i++
				}
			}
			if i >= len(pattern) {
				return nil, "", false
			}
		case '{':
			depth++
		case ',':
			if depth == 1 {
				alts = append(alts, pattern[start:i])
				start = i + 1
			}
		case '}':
			depth--
			if depth == 0 {
				return append(alts, pattern[start:i]), pattern[i+1:], true
			}
		}
	}
	return nil, "", false
}

func validAction(a config.Action) bool {
	switch a {
	case config.ActionForward, config.ActionApprove, config.ActionDeny, config.ActionPolicy:
		return true
	}
	return false
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
