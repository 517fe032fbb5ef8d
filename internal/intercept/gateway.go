package intercept

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-mcp/tollgate/internal/governance"
	"github.com/tollgate-mcp/tollgate/internal/gwtools"
	"github.com/tollgate-mcp/tollgate/internal/rules"
	"github.com/tollgate-mcp/tollgate/internal/session"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

// Deps are what the governance handlers need.
type Deps struct {
	Snapshots  *governance.Holder
	Upstream   *upstream.Client
	Sessions   *session.Registry
	Tasks      *tasks.Manager
	Tools      *gwtools.Tools // nil = no tollgate_* tools
	Logger     *slog.Logger
	Registerer prometheus.Registerer // nil = no metrics
}

// Gateway implements the intercepted methods (REQ-CORE-007).
type Gateway struct {
	d   Deps
	log *slog.Logger
	m   *gatewayMetrics

	// upstreamTasks caches whether the upstream declared tasks.requests.tools.call
	// (REQ-CORE-007 F-007.6), refreshed on every initialize.
	upstreamTasks atomic.Bool
	capsKnown     atomic.Bool

	mu        sync.RWMutex
	toolTasks map[string]rules.TaskSupport // upstream tool → its own execution.taskSupport
	listed    map[string]rules.TaskSupport // last computed annotation per tool (for list_changed)

	prom  *promotions
	lists listCache // rewritten tools/list pages
	rates limiters  // server.rate_limit per caller

	questions questions // approval questions asked of requesters (elicitation)
}

// NewGateway returns the handlers; call Register to mount them.
func NewGateway(d Deps) *Gateway {
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	return &Gateway{d: d, log: d.Logger, m: newGatewayMetrics(d.Registerer),
		toolTasks: map[string]rules.TaskSupport{}, listed: map[string]rules.TaskSupport{}, prom: newPromotions()}
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
}

// maxSubjectLen bounds an asserted identity.
const maxSubjectLen = 256

// identified sets Exchange.Subject from server.identity_header before h runs.
func (g *Gateway) identified(h Handler) Handler {
	return func(ctx context.Context, x *Exchange) Result {
		if name := g.d.Snapshots.Load().Config.Server.IdentityHeader; name != "" {
			if v := strings.TrimSpace(x.HTTP.Header.Get(name)); v != "" && len(v) <= maxSubjectLen && utf8.ValidString(v) {
				x.Subject = v
			}
		}
		return h(ctx, x)
	}
}

// UpstreamSupportsTasks is the cached capability.
func (g *Gateway) UpstreamSupportsTasks() bool { return g.upstreamTasks.Load() }

// owner is the task owner of an exchange (DESIGN.md §3): the MCP session until client
// authentication exists.
func owner(x *Exchange) string {
	switch {
	case x.Subject != "":
		return "user:" + x.Subject
	case x.Session == nil:
		return ""
	}
	return x.Session.Owner()
}

func caller(x *Exchange) governance.Caller {
	c := governance.Caller{Subject: x.Subject}
	if x.Session != nil {
		c.SessionID = x.Session.ID
	}
	return c
}

// replayHeaders are the end-to-end headers a held call is executed with later. The session id
// is not among them: the task keeps it as SessionID (and Execute puts it back).
var replayHeaders = []string{"Authorization", upstream.HeaderProtocolVersion, "Traceparent", "Tracestate"}

func captureHeaders(in http.Header) http.Header {
	var out http.Header
	for _, k := range replayHeaders {
		if v := in.Values(k); len(v) > 0 {
			if out == nil {
				out = make(http.Header, len(replayHeaders))
			}
			out[http.CanonicalHeaderKey(k)] = append([]string(nil), v...)
		}
	}
	return out
}

// executionHeaders rebuilds the headers an approved call is sent with: the captured ones plus
// the caller's upstream session (none for a session Tollgate minted itself).
func executionHeaders(t *tasks.Task) http.Header {
	hdr := make(http.Header, len(t.Headers)+2)
	for k, v := range t.Headers {
		hdr[k] = v
	}
	if t.SessionID != "" && !strings.HasPrefix(t.SessionID, session.LocalPrefix) {
		hdr.Set(upstream.HeaderSessionID, t.SessionID)
	}
	hdr.Set("Content-Type", "application/json")
	return hdr
}

// annotation computes one tool's execution.taskSupport from the current snapshot.
func (g *Gateway) annotation(s *governance.Snapshot, tool string) (rules.Decision, rules.TaskSupport) {
	d := s.Rules.Decide(tool)
	g.mu.RLock()
	up := g.toolTasks[tool]
	g.mu.RUnlock()
	return d, rules.Annotation(d, g.upstreamTasks.Load(), up, s.Config.Tasks.SyncApproval)
}

// wait is used by handlers that may block: it bounds nothing itself (the client's context
// does) but never outlives ctx.
func waitResult(fn func(ctx context.Context, emit func([]byte) bool) []byte) Result {
	return Result{Wait: fn}
}

// rawString quotes s as JSON.
func rawString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// Use completes construction: the task manager needs the gateway as its executor, so both are
// built first and joined here.
func (g *Gateway) Use(m *tasks.Manager, tools *gwtools.Tools) {
	g.d.Tasks = m
	g.d.Tools = tools
}

// outboundCopy is the caller's headers for a request Tollgate makes on its behalf (tasks/list
// merge): its replayable headers plus its upstream session.
func outboundCopy(in http.Header) http.Header {
	hdr := captureHeaders(in)
	if hdr == nil {
		hdr = http.Header{}
	}
	if sid := in.Get(upstream.HeaderSessionID); sid != "" && !strings.HasPrefix(sid, session.LocalPrefix) {
		hdr.Set(upstream.HeaderSessionID, sid)
	}
	hdr.Set("Content-Type", "application/json")
	return hdr
}
