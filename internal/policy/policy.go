// Package policy evaluates Cedar policies for rules with `action: policy` (REQ-POL-001,
// docs/contract.md §3). One policy set yields three outcomes: a matching forbid denies, a matching
// permit annotated @decision("approve") asks for approval, any other matching permit
// forwards, and no match denies. Everything fails closed.
//
// An Engine is immutable after Load and safe for concurrent use.
package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/cedar-policy/cedar-go"
	"github.com/cedar-policy/cedar-go/types"
	xast "github.com/cedar-policy/cedar-go/x/exp/ast"
	"github.com/cedar-policy/cedar-go/x/exp/schema"
	"github.com/cedar-policy/cedar-go/x/exp/schema/validate"

	"github.com/tollgate-mcp/tollgate/internal/rules"
)

// Outcome is what a policy decision asks Tollgate to do with the call.
type Outcome string

const (
	Forward Outcome = "forward"
	Approve Outcome = "approve"
	Deny    Outcome = "deny"
)

// Names of the Cedar request parts (docs/contract.md §3). Policies and schemas use these.
const (
	EntityUser     = "User"
	EntityGroup    = "Group"
	EntitySession  = "Session"
	EntityAction   = "Action"
	EntityToolCall = "ToolCall"
	ActionToolCall = "tools/call"

	// DecisionAnnotation marks a permit whose match means "ask a human".
	DecisionAnnotation = "decision"
	// IDAnnotation names a policy; without it the id is "<file>#<index>".
	IDAnnotation = "id"
)

// Request is one tools/call as Cedar sees it.
type Request struct {
	Principal string          // authenticated subject ("" if none)
	SessionID string          // used for the principal when Principal == ""
	Tool      string          // tool name
	Arguments json.RawMessage // may be empty/null
	PolicyID  string          // the rule's policy_id
	SourceID  string          // sources[].id
	Time      time.Time       // zero means now
	// Annotations are the tool's MCP annotation hints (context.annotations), as rules.Hints
	// reads them. Zero = the tool declared none (the spec's defaults apply).
	Annotations rules.Hints
	// A verified caller (server.caller_auth): its groups are the principal's parents
	// Group::"…", Email and Name its attributes, Scopes context.scopes.
	Groups      []string
	Email, Name string
	Scopes      []string
}

// Decision is the outcome and why. It never carries argument values, so it may be logged
// and audited as is.
type Decision struct {
	Outcome   Outcome
	PolicyIDs []string // policies that determined it, sorted
	Reason    string   // short, e.g. "forbid matched", "no policy matched"
}

// Reasons given in Decision.Reason.
const (
	ReasonForbid       = "forbid matched"
	ReasonApprove      = "approval permit matched"
	ReasonPermit       = "permit matched"
	ReasonNoMatch      = "no policy matched"
	ReasonEvalError    = "policy evaluation error"
	ReasonBadArguments = "arguments not convertible"
	ReasonNotAnObject  = "arguments not an object"
)

type entry struct {
	id      cedar.PolicyID
	policy  *cedar.Policy
	approve bool
}

// policyList is a cedar.PolicyIterator over a slice: a deterministic, allocation-free walk
// (cedar.PolicySet iterates a map).
type policyList []entry

func (l policyList) All() iter.Seq2[cedar.PolicyID, *cedar.Policy] {
	return func(yield func(cedar.PolicyID, *cedar.Policy) bool) {
		for i := range l {
			if !yield(l[i].id, l[i].policy) {
				return
			}
		}
	}
}

// Engine holds a loaded, validated policy set.
type Engine struct {
	policies policyList
	approve  map[cedar.PolicyID]bool
	files    []File // the sources read, in load order (policyschema checks their text)
}

// File is one policy file as loaded.
type File struct {
	Name string
	Src  []byte
}

// Files are the policy files the engine was loaded from, in order.
func (e *Engine) Files() []File { return e.files }

// Load reads Cedar policy files from disk and, when schemaFile is not "", validates them
// against that schema. Errors name file:line:column.
func Load(files []string, schemaFile string) (*Engine, error) {
	return load(os.ReadFile, files, schemaFile)
}

// LoadFS is Load reading from fsys (e.g. the embedded example policies).
func LoadFS(fsys fs.FS, files []string, schemaFile string) (*Engine, error) {
	return load(func(name string) ([]byte, error) { return fs.ReadFile(fsys, name) }, files, schemaFile)
}

func load(read func(string) ([]byte, error), files []string, schemaFile string) (*Engine, error) {
	e := &Engine{approve: make(map[cedar.PolicyID]bool)}
	where := make(map[cedar.PolicyID]string)
	var errs []error
	for _, file := range files {
		src, err := read(file)
		if err != nil {
			errs = append(errs, fmt.Errorf("policy: %w", err))
			continue
		}
		e.files = append(e.files, File{Name: file, Src: src})
		list, err := cedar.NewPolicyListFromBytes(file, src)
		if err != nil {
			errs = append(errs, parseError(file, err))
			continue
		}
		for i, p := range list {
			pos := position(p.Position())
			id := cedar.PolicyID(fmt.Sprintf("%s#%d", filepath.Base(file), i))
			ann := p.Annotations()
			if v, ok := ann[IDAnnotation]; ok {
				id = cedar.PolicyID(v)
			}
			if prev, dup := where[id]; dup {
				errs = append(errs, fmt.Errorf("policy: %s: duplicate policy id %q (first at %s)", pos, id, prev))
				continue
			}
			where[id] = pos
			approve := false
			if v, ok := ann[DecisionAnnotation]; ok {
				switch {
				case p.Effect() == cedar.Forbid:
					errs = append(errs, fmt.Errorf("policy: %s: @decision is only meaningful on permit", pos))
					continue
				case v == "approve":
					approve = true
				case v == "forward":
				default:
					// A typo such as "aprove" must not silently forward.
					errs = append(errs, fmt.Errorf("policy: %s: @decision(%q): want \"approve\" or \"forward\"", pos, string(v)))
					continue
				}
			}
			e.policies = append(e.policies, entry{id: id, policy: p, approve: approve})
			if approve {
				e.approve[id] = true
			}
		}
	}
	if len(errs) == 0 && schemaFile != "" {
		errs = append(errs, e.validate(read, schemaFile)...)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return e, nil
}

// validate checks every policy against the schema with cedar-go's validator. It lives in
// cedar-go's x/exp tree in v1.9.0 (experimental API), so a cedar-go upgrade may need this
// function adapted; the policies themselves do not depend on it.
func (e *Engine) validate(read func(string) ([]byte, error), schemaFile string) []error {
	src, err := read(schemaFile)
	if err != nil {
		return []error{fmt.Errorf("policy: schema: %w", err)}
	}
	return e.ValidateSchema(schemaFile, src)
}

// ValidateSchema checks every policy against the schema src (Cedar's schema syntax, or JSON
// when name ends in .json) and returns one error per policy that does not match, each
// "policy: file:line:column: does not match schema NAME: …".
func (e *Engine) ValidateSchema(name string, src []byte) []error {
	schemaFile := name
	var err error
	var s schema.Schema
	s.SetFilename(schemaFile)
	if strings.EqualFold(filepath.Ext(schemaFile), ".json") {
		err = s.UnmarshalJSON(src)
	} else {
		err = s.UnmarshalCedar(src)
	}
	if err != nil {
		return []error{fmt.Errorf("policy: schema %s: %w", schemaFile, err)}
	}
	resolved, err := s.Resolve()
	if err != nil {
		return []error{fmt.Errorf("policy: schema %s: %w", schemaFile, err)}
	}
	v := validate.New(resolved)
	var errs []error
	for _, en := range e.policies {
		if err := v.Policy(string(en.id), (*xast.Policy)(en.policy.AST())); err != nil {
			msg := strings.ReplaceAll(err.Error(), "\n", "; ")
			errs = append(errs, fmt.Errorf("policy: %s: does not match schema %s: %s", position(en.policy.Position()), schemaFile, msg))
		}
	}
	return errs
}

var inputPos = regexp.MustCompile(`<input>:(\d+):(\d+)`)

// parseError rewrites cedar-go's "<input>:L:C" to "file:L:C" so the error names the file.
func parseError(file string, err error) error {
	msg := err.Error()
	if m := inputPos.FindStringSubmatch(msg); m != nil {
		msg = strings.Replace(msg, m[0], "", 1)
		return fmt.Errorf("policy: %s:%s:%s: %s", file, m[1], m[2], tidyParseMessage(msg))
	}
	return fmt.Errorf("policy: %s:1:1: %s", file, tidyParseMessage(msg))
}

// tidyParseMessage drops cedar-go's nested "parser error: parse error at" prefixes.
func tidyParseMessage(msg string) string {
	for _, p := range []string{"parser error:", "parse error at", ":"} {
		msg = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(msg), p))
	}
	return strings.Join(strings.Fields(msg), " ")
}

func position(p cedar.Position) string {
	return fmt.Sprintf("%s:%d:%d", p.Filename, p.Line, p.Column)
}

// Len is the number of policies loaded.
func (e *Engine) Len() int { return len(e.policies) }

// Decide evaluates the policy set once for req. Any error (bad arguments, a policy that
// fails to evaluate) yields a Deny decision together with the error: fail closed
// (docs/contract.md §3). Policies should guard optional attributes with `has`.
func (e *Engine) Decide(req Request) (Decision, error) {
	d, _, err := e.decide(req)
	return d, err
}

// decide is Decide that also returns Cedar's diagnostic (empty when the request could not be
// built).
func (e *Engine) decide(req Request) (Decision, types.Diagnostic, error) {
	return e.decideWith(e.policies, req)
}

// decideWith is decide over the policies of set (a part of the engine's).
func (e *Engine) decideWith(set policyList, req Request) (Decision, types.Diagnostic, error) {
	var none types.Diagnostic
	args, err := FromJSON(req.Arguments)
	if err != nil {
		return Decision{Outcome: Deny, Reason: ReasonBadArguments}, none, fmt.Errorf("policy: tool %q: %w", req.Tool, err)
	}
	rec, ok := args.(types.Record)
	if !ok {
		return Decision{Outcome: Deny, Reason: ReasonNotAnObject}, none,
			fmt.Errorf("policy: tool %q: %w: arguments must be a JSON object", req.Tool, ErrArguments)
	}

	entities, cedarReq := request(req, rec, nil)

	decision, diag := cedar.Authorize(set, entities, cedarReq)
	if len(diag.Errors) > 0 {
		// Cedar itself would skip an erroring policy; Tollgate denies instead, because a
		// skipped forbid would turn into a forward.
		ids := make([]string, 0, len(diag.Errors))
		msgs := make([]string, 0, len(diag.Errors))
		for _, de := range diag.Errors {
			ids = append(ids, string(de.PolicyID))
			msgs = append(msgs, fmt.Sprintf("%s at %s: %s", de.PolicyID, position(de.Position), errorClass(de.Message)))
		}
		slices.Sort(ids)
		slices.Sort(msgs)
		return Decision{Outcome: Deny, PolicyIDs: ids, Reason: ReasonEvalError}, diag,
			fmt.Errorf("policy: tool %q: evaluation failed: %s", req.Tool, strings.Join(msgs, "; "))
	}
	if len(diag.Reasons) == 0 {
		return Decision{Outcome: Deny, Reason: ReasonNoMatch}, diag, nil
	}
	if decision == cedar.Deny {
		return Decision{Outcome: Deny, PolicyIDs: reasonIDs(diag.Reasons, nil), Reason: ReasonForbid}, diag, nil
	}
	if ids := reasonIDs(diag.Reasons, e.approve); len(ids) > 0 {
		return Decision{Outcome: Approve, PolicyIDs: ids, Reason: ReasonApprove}, diag, nil
	}
	return Decision{Outcome: Forward, PolicyIDs: reasonIDs(diag.Reasons, nil), Reason: ReasonPermit}, diag, nil
}

// request builds Cedar's entities and request for req with arguments args (a Record, or
// batch.Ignore when deciding without them). A non-nil clock replaces context.time (Ignore too).
func request(req Request, args types.Value, clock types.Value) (types.EntityMap, types.Request) {
	principal := types.NewEntityUID(EntitySession, types.String(req.SessionID))
	if req.Principal != "" {
		principal = types.NewEntityUID(EntityUser, types.String(req.Principal))
	}
	resource := types.NewEntityUID(EntityToolCall, types.String(req.Tool))
	entities := types.EntityMap{
		resource: {
			UID: resource,
			Attributes: types.NewRecord(types.RecordMap{
				"arguments": args,
				"name":      types.String(req.Tool),
			}),
		},
	}
	if req.Principal != "" {
		attrs := types.RecordMap{}
		if req.Email != "" {
			attrs["email"] = types.String(req.Email)
		}
		if req.Name != "" {
			attrs["name"] = types.String(req.Name)
		}
		parents := make([]types.EntityUID, 0, len(req.Groups))
		for _, g := range req.Groups {
			gid := types.NewEntityUID(EntityGroup, types.String(g))
			parents = append(parents, gid)
			entities[gid] = types.Entity{UID: gid}
		}
		entities[principal] = types.Entity{UID: principal, Attributes: types.NewRecord(attrs), Parents: types.NewEntityUIDSet(parents...)}
	}
	scopes := make([]types.Value, len(req.Scopes))
	for i, sc := range req.Scopes {
		scopes[i] = types.String(sc)
	}
	if clock == nil {
		now := req.Time
		if now.IsZero() {
			now = time.Now()
		}
		now = now.UTC()
		clock = types.NewRecord(types.RecordMap{
			"unix":    types.Long(now.Unix()),
			"hour":    types.Long(now.Hour()),
			"weekday": types.Long(now.Weekday()), // 0 = Sunday
		})
	}
	ann := make(types.RecordMap, 4)
	for k, v := range req.Annotations.Values() {
		ann[types.String(k)] = types.Boolean(v)
	}
	cedarReq := types.Request{
		Principal: principal,
		Action:    types.NewEntityUID(EntityAction, ActionToolCall),
		Resource:  resource,
		Context: types.NewRecord(types.RecordMap{
			"policy_id":   types.String(req.PolicyID),
			"source_id":   types.String(req.SourceID),
			"annotations": types.NewRecord(ann),
			"scopes":      types.NewSet(scopes...),
			"time":        clock,
		}),
	}

	return entities, cedarReq
}

// reasonIDs returns the sorted ids of reasons, only those in filter when filter is non-nil.
func reasonIDs(reasons []types.DiagnosticReason, filter map[cedar.PolicyID]bool) []string {
	ids := make([]string, 0, len(reasons))
	for _, r := range reasons {
		if filter == nil || filter[r.PolicyID] {
			ids = append(ids, string(r.PolicyID))
		}
	}
	slices.Sort(ids)
	return ids
}

// errorClass reduces a Cedar evaluation message to a fixed phrase: cedar-go's messages can
// embed runtime values (e.g. overflowing operands), which come from tool arguments and must
// not reach logs.
func errorClass(msg string) string {
	for _, c := range []struct{ needle, class string }{
		{"integer overflow", "integer overflow"},
		{"does not have the attribute", "missing attribute (guard it with `has`)"},
		{"does not have the tag", "missing tag"},
		{"does not exist", "unknown entity"},
		{"unspecified entity", "unspecified entity"},
		{"type error", "type error"},
		{"decimal", "decimal error"},
		{"datetime", "datetime error"},
		{"duration", "duration error"},
		{"IP", "ipaddr error"},
		{"extension function", "extension function error"},
	} {
		if strings.Contains(msg, c.needle) {
			return c.class
		}
	}
	return "evaluation error"
}
