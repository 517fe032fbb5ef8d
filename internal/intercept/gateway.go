package intercept

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-mcp/tollgate/internal/audit"
	"github.com/tollgate-mcp/tollgate/internal/execution"
	"github.com/tollgate-mcp/tollgate/internal/governance"
	"github.com/tollgate-mcp/tollgate/internal/gwtools"
	"github.com/tollgate-mcp/tollgate/internal/identity"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/logcap"
	"github.com/tollgate-mcp/tollgate/internal/rules"
	"github.com/tollgate-mcp/tollgate/internal/session"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

// Deps are what the governance handlers need.
type Deps struct {
	Snapshots *governance.Holder
	Upstream  *upstream.Client
	Sessions  *session.Registry
	Tasks     *tasks.Manager
	Tools     *gwtools.Tools // nil = no tollgate_* tools
	// Annotations is the annotation cache the task manager's re-check reads too; Bridge is
	// the upstream's era and the bridge session the execution.Runner runs modern tasks
	// through. Both are built first and shared; nil = the Gateway's own.
	Annotations *Annotations
	Bridge      *Bridge
	// UpstreamTasks, with a store several replicas share, keeps upstream task ids bound to
	// their creators there too, so another replica serves them (nil = this process only).
	UpstreamTasks UpstreamTaskStore
	// Promotions registers slow calls handed over to tasks (tasks.promote_after); the
	// execution.Runner awaits their answers.
	Promotions *execution.Promotions
	Logger     *slog.Logger
	Registerer prometheus.Registerer // nil = no metrics
	// OwnerKey keys the hash of a modern caller's Authorization credential that owns its
	// tasks (TOLLGATE_OWNER_HASH_KEY; "" = a random key per process).
	OwnerKey string
	// ConsoleURL is the approvals console, named in the answer to a held call ("" = none).
	ConsoleURL string
	// ParkSlots is the connection budget bridged calls parked between MRTR rounds take a
	// place in (the MCP listener; nil = not counted).
	ParkSlots Slots
	// Audit gets a line for every governance decision on a tools/call (nil = none).
	Audit *audit.Logger
	// StoppedWaiting, if set, is told a task whose last waiting plain call ended without its
	// outcome (settled undecided, client gone, timed out): its approvers' messages may say so.
	// Called on the request's goroutine; it must not block.
	StoppedWaiting func(taskID string)
}

// Gateway implements the intercepted methods (REQ-CORE-007).
type Gateway struct {
	d   Deps
	log *slog.Logger
	m   *gatewayMetrics

	ann *Annotations // the annotation cache (Deps.Annotations)
	br  *Bridge      // the upstream's era and Tollgate's bridge session (Deps.Bridge)

	mu     sync.Mutex
	listed map[string]rules.TaskSupport // last computed annotation per tool (for list_changed)
	// viewRules are the rules of the last Recompute when listings depended on the caller
	// (rules' callers, per-caller tool views), nil otherwise: listed holds view 0 only, so any
	// other change of such rules tells clients to list again.
	viewRules *rules.Engine

	lists    listCache         // rewritten tools/list pages
	listMemo jsonrpc.ReplyMemo // whole tools/list replies as sent (Forward.Memo)
	rates    limiters          // server.rate_limit per caller

	questions questions // approval questions asked of requesters (elicitation)

	// Warnings any client can trigger at will are sampled (logcap).
	warnOnDemand, warnTTL *logcap.Sampler

	modern modernState // protocol 2026-07-28: upstream task owners, listen streams, MRTR state

	waiting waiters // plain calls waiting for their task's outcome now (waiting.go)
}

// NewGateway returns the handlers; call Register to mount them.
func NewGateway(d Deps) *Gateway {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Bridge == nil {
		d.Bridge = NewBridge(d.Upstream, d.Logger)
	}
	if d.Annotations == nil {
		d.Annotations = NewAnnotations(d.Snapshots, d.Upstream, d.Bridge, d.Logger)
	}
	g := &Gateway{d: d, log: d.Logger, ann: d.Annotations, br: d.Bridge,
		listed:       map[string]rules.TaskSupport{},
		warnOnDemand: logcap.NewSampler(warnEvery, warnBurst), warnTTL: logcap.NewSampler(warnEvery, warnBurst)}
	g.m = newGatewayMetrics(d.Registerer, g.toolLabel)
	g.initUpstreamTasks()
	g.initParking()
	return g
}

// Sampling of client-triggered warnings: 10 at once, then one a second.
const (
	warnEvery = time.Second
	warnBurst = 10
)

// toolLabel is the tollgate_tool_calls_total label of a called tool: its name only when the
// upstream listed it (or it is Tollgate's own), else "other" — a client cannot add label
// values, and a label is never longer than logcap.NameBytes.
func (g *Gateway) toolLabel(tool string) string {
	if len(tool) <= logcap.NameBytes && (g.isOwnTool(tool) || g.ann.knowsTool(tool)) {
		return tool
	}
	return "other"
}

// Register mounts the handlers on r.
func (g *Gateway) Register(r *Router) {
	for method, h := range map[string]Handler{
		"initialize": g.initialize, "tools/list": g.toolsList, "tools/call": g.toolsCall,
		"tasks/get": g.tasksGet, "tasks/result": g.tasksResult, "tasks/cancel": g.tasksCancel, "tasks/list": g.tasksList,
		"resources/list": g.resourcesList, "resources/read": g.resourcesRead,
	} {
		r.Handle(method, g.identified(h))
	}
	r.HandleResponses(ElicitIDPrefix, g.identified(g.elicitResponse))
	g.registerModern(r)
	r.FilterLegacy(g.reverseBridge)
}

// maxSubjectLen bounds an asserted identity.
const maxSubjectLen = 256

// identified sets Exchange.Subject before h runs: the verified caller the proxy put in the
// request's context (server.caller_auth; package callerauth decided it), else the
// server.identity_header value.
func (g *Gateway) identified(h Handler) Handler {
	return func(ctx context.Context, x *Exchange) Result {
		if c := identity.FromContext(x.HTTP.Context()); c != nil {
			x.Subject, x.Caller = c.Subject, c
		} else if name := g.d.Snapshots.Load().Config.Server.IdentityHeader; name != "" {
			if v := strings.TrimSpace(x.HTTP.Header.Get(name)); v != "" && len(v) <= maxSubjectLen && utf8.ValidString(v) {
				// Invisible code points would let one person request as "alice\u200b" and
				// approve as "alice": refused, not stripped (the proxy should not send them).
				if err := identity.Check(v); err != nil {
					return Result{Status: http.StatusBadRequest, Reply: jsonrpc.ErrorResponse(x.Msg.ID, jsonrpc.NewError(jsonrpc.CodeInvalidRequest,
						"InvalidIdentity", "The identity in "+name+" is refused: "+err.Error(), "correlation_id", x.CorrID))}
				}
				x.Subject = v
			}
		}
		if x.Modern != nil {
			x.Owner = g.modernOwner(x)
		}
		return h(ctx, x)
	}
}

// owner is the task owner of an exchange (docs/contract.md §3): the identity from
// server.identity_header when there is one, else the MCP session.
func owner(x *Exchange) string {
	switch {
	case x.Modern != nil:
		return x.Owner // set by identified (modernOwner)
	case x.Subject != "":
		return "user:" + x.Subject
	case x.Session == nil:
		return ""
	}
	return x.Session.Owner()
}

func caller(x *Exchange) governance.Caller {
	c := governance.Caller{Subject: x.Subject, Verified: x.Caller}
	if x.Session != nil {
		c.SessionID = x.Session.ID
	}
	return c
}

// annotation computes one tool's execution.taskSupport from the current snapshot, for a
// caller of view v.
func (g *Gateway) annotation(s *governance.Snapshot, tool string, v rules.View) (rules.Decision, rules.TaskSupport) {
	ti := g.ann.tool(tool)
	d := s.Rules.DecideFor(tool, ti.hints, v)
	return d, rules.Annotation(d, g.ann.upstreamTasks.Load(), ti.own, s.Config.Tasks.SyncApproval)
}

// rawString quotes s as JSON (without HTML escaping, like everything Tollgate writes).
func rawString(s string) json.RawMessage {
	b, _ := jsonrpc.Marshal(s)
	return b
}
