package intercept

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/era"
	"github.com/tollgate-mcp/tollgate/internal/gwtools"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/logcap"
	"github.com/tollgate-mcp/tollgate/internal/source"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// This file serves protocol 2026-07-28 (the "modern" era) on the same endpoint as the legacy
// one: server/discover, the header checks' consequences, governance of tools/call, and the
// tasks extension (SEP-2663) for Tollgate's own tasks. Requests reach it after
// era.Classify accepted them.

// fallbackOwnerKey keys the credential hash of a Gateway built without Deps.OwnerKey (the
// server always sets one): random per process, never a public constant, with which owner
// hashes shown to approvers could be checked offline against guessed credentials.
var fallbackOwnerKey = func() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b)
}()

// registerModern mounts the modern-era handlers.
func (g *Gateway) registerModern(r *Router) {
	for method, h := range map[string]Handler{
		"server/discover": g.modernDiscover, "tools/list": g.modernToolsList, "tools/call": g.modernToolsCall,
		"tasks/get": g.modernTasksGet, "tasks/update": g.modernTasksUpdate, "tasks/cancel": g.modernTasksCancel,
		"tasks/result": g.modernNoMethod, "tasks/list": g.modernNoMethod,
		"resources/list": g.modernResourcesList, "resources/read": g.modernResourcesRead,
		"subscriptions/listen": g.modernListen,
		// Removed in 2026-07-28 (changelog): answered here, so a bridged legacy upstream never
		// sees them on Tollgate's own session.
		"initialize": g.modernNoMethod, "ping": g.modernNoMethod, "logging/setLevel": g.modernNoMethod,
		"resources/subscribe": g.modernNoMethod, "resources/unsubscribe": g.modernNoMethod,
	} {
		r.HandleModern(method, g.identified(h))
	}
	r.HandleModern("", g.identified(g.modernOther))
}

// modernOwner is the owner of a modern caller's tasks: the identity from
// server.identity_header, else a keyed hash of its Authorization credential (the credential
// itself is never stored or logged), else tasks.Anonymous: each task such a caller creates is
// then its own owner, reachable only through its unguessable id (package tasks, owner.go).
func (g *Gateway) modernOwner(x *Exchange) string {
	if x.Subject != "" {
		return "user:" + x.Subject
	}
	if cred := strings.TrimSpace(x.HTTP.Header.Get("Authorization")); cred != "" {
		return "auth:" + g.credentialHash(cred)
	}
	return tasks.Anonymous
}

func (g *Gateway) credentialHash(cred string) string {
	key := g.d.OwnerKey
	if key == "" {
		key = fallbackOwnerKey
	}
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(cred))
	return hex.EncodeToString(mac.Sum(nil)[:16])
}

// rateKey is who a modern call counts against for server.rate_limit: the owner, or for
// anonymous callers their source (address or IPv6 /64).
func rateKey(x *Exchange, owner string) string {
	if owner != tasks.Anonymous {
		return owner
	}
	return source.Of(x.HTTP, "")
}

// modernReply answers with a result Tollgate made, marked resultType "complete" (spec
// 2026-07-28 schema Result.resultType).
func modernReply(x *Exchange, result []byte) Result {
	return ReplyResult(x, withResultType(result))
}

// modernError answers with an error and the HTTP status the modern transport gives it.
func modernError(x *Exchange, e *jsonrpc.Error) Result {
	r := ReplyError(x, e)
	r.Status = era.HTTPStatus(e.Code)
	return r
}

// withResultType adds resultType "complete" to a result object that has none.
func withResultType(result []byte) []byte {
	if jsonrpc.Member(result, "resultType") != nil {
		return result
	}
	out, err := jsonrpc.Replace(result, "resultType", []byte(`"complete"`))
	if err != nil {
		return result
	}
	return out
}

// cacheable are the methods whose results are CacheableResult (spec 2026-07-28 schema:
// ttlMs and cacheScope required).
var cacheable = map[string]bool{"server/discover": true, "tools/list": true, "resources/list": true,
	"resources/templates/list": true, "resources/read": true, "prompts/list": true}

// withCacheHints adds ttlMs 0 (re-fetch at will) and cacheScope to a cacheable result that has
// none, as for a result bridged from a legacy upstream. scope is "private" unless the result
// cannot depend on who asked.
func withCacheHints(result []byte, scope string) []byte {
	out := result
	if jsonrpc.Member(out, "ttlMs") == nil {
		if b, err := jsonrpc.Replace(out, "ttlMs", []byte(`0`)); err == nil {
			out = b
		}
	}
	if jsonrpc.Member(out, "cacheScope") == nil {
		if b, err := jsonrpc.Replace(out, "cacheScope", rawString(scope)); err == nil {
			out = b
		}
	}
	return out
}

// modernNoMethod answers methods the modern era does not have: tasks/result and tasks/list
// (the tasks extension inlines results in tasks/get and has no list, so one caller cannot
// learn of another's tasks) and the methods 2026-07-28 removed (-32601, HTTP 404: transports
// "Protocol Version Header").
func (g *Gateway) modernNoMethod(_ context.Context, x *Exchange) Result {
	hint := ""
	if strings.HasPrefix(x.Msg.Method, "tasks/") {
		hint = " (use tasks/get)"
	}
	return modernError(x, jsonrpc.NewError(jsonrpc.CodeMethodNotFound, "MethodNotFound",
		"Method not found: "+x.Msg.Method+" is not part of protocol "+era.Modern+hint))
}

// modernOther forwards any other modern request to a modern upstream, or bridges it to a
// legacy one.
func (g *Gateway) modernOther(ctx context.Context, x *Exchange) Result {
	if g.br.upstreamModern(ctx) {
		return Passthrough
	}
	return g.bridge(x, nil)
}

// modernState is what the gateway keeps for protocol 2026-07-28: which caller created which
// upstream task, open listen streams and MRTR state (the upstream's era and the bridge
// session are the Bridge's).
type modernState struct {
	upTasks     *source.Shares[string] // upstream task id → owner (upstream_tasks.go)
	upTasksOnce sync.Once
	listen      listeners   // open subscriptions/listen streams
	parked      parking     // bridged calls waiting for a client's inputResponses (MRTR)
	sessCaps    sessionCaps // capabilities legacy clients of a modern-only upstream declared
	asks        legacyAsks  // MRTR requests sent to those clients, by request id

	upTasksWarn *logcap.Sampler // an upstream task binding gave way: one warning a minute
}

// eraRecheck is how long the upstream's era is trusted before it is probed again.
const eraRecheck = 30 * time.Second

func supportedVersions(discover []byte) []string {
	var r struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	_ = json.Unmarshal(discover, &r)
	return r.SupportedVersions
}

// modernHeaders are the headers of a modern request Tollgate sends on its own or a caller's
// behalf (transports "Standard Request Headers").
func modernHeaders(base http.Header, method, name string) http.Header {
	h := base.Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", "application/json")
	h.Set(era.HeaderProtocolVersion, era.Modern)
	h.Set(era.HeaderMethod, method)
	if name != "" {
		h.Set(era.HeaderName, era.EncodeHeaderValue(name))
	}
	return h
}

// ownMeta is the _meta of requests Tollgate makes itself.
var ownMeta = `{"` + era.MetaProtocolVersion + `":"` + era.Modern + `","` + era.MetaClientCapabilities +
	`":{},"` + era.MetaClientInfo + `":{"name":"tollgate","version":"gateway"}}`

// modernDiscover answers server/discover (spec 2026-07-28 server/discover): the upstream's
// own answer when it is modern, else one made from its initialize result; either way with
// every version Tollgate serves and the tasks extension, which Tollgate always offers.
func (g *Gateway) modernDiscover(ctx context.Context, x *Exchange) Result {
	if g.br.upstreamModern(ctx) {
		return Result{Forward: &Forward{Transform: func(_ *Exchange, resp *jsonrpc.Message) []byte {
			if resp.Result == nil {
				return nil
			}
			out, err := discoverResult(resp.Result)
			if err != nil {
				g.log.Warn("server/discover result not rewritten", "error", err.Error())
				return nil
			}
			return resp.WithResult(out)
		}}}
	}
	g.br.mu.Lock()
	init := g.br.init
	g.br.mu.Unlock()
	if init == nil {
		var err error
		if init, err = g.br.legacyInitialize(ctx); err != nil {
			return modernError(x, jsonrpc.NewError(jsonrpc.CodeUpstreamUnreachable, "UpstreamUnreachable",
				"Upstream MCP server did not answer initialize: "+err.Error()))
		}
	}
	out, err := synthesiseDiscover(init)
	if err != nil {
		return modernError(x, jsonrpc.NewError(jsonrpc.CodeInternalError, "UpstreamInvalid",
			"Upstream initialize result is not usable: "+err.Error()))
	}
	return modernReply(x, out)
}

// discoverResult rewrites a modern upstream's DiscoverResult.
func discoverResult(result []byte) ([]byte, error) {
	sv, _ := jsonrpc.Marshal(era.Supported)
	out, err := jsonrpc.Replace(result, "supportedVersions", sv)
	if err != nil {
		return nil, err
	}
	caps := jsonrpc.Member(out, "capabilities")
	nc, err := withTasksExtension(caps)
	if err != nil {
		return nil, err
	}
	if out, err = jsonrpc.Replace(out, "capabilities", nc); err != nil {
		return nil, err
	}
	return withResultType(out), nil
}

// withTasksExtension sets capabilities.extensions["io.modelcontextprotocol/tasks"] = {}
// (tasks extension "Capability Negotiation"), keeping everything else.
func withTasksExtension(caps []byte) ([]byte, error) {
	if len(caps) == 0 || string(caps) == "null" {
		caps = []byte(`{}`)
	}
	ext := jsonrpc.Member(caps, "extensions")
	if len(ext) == 0 || string(ext) == "null" {
		ext = []byte(`{}`)
	}
	ne, err := jsonrpc.Replace(ext, era.TasksExtension, []byte(`{}`))
	if err != nil {
		return nil, fmt.Errorf("capabilities.extensions: %w", err)
	}
	return jsonrpc.Replace(caps, "extensions", ne)
}

// synthesiseDiscover makes a DiscoverResult from a legacy InitializeResult: its capabilities
// (less the 2025-11-25 tasks capability, which the extension replaces), serverInfo in the
// result _meta, its instructions.
func synthesiseDiscover(init []byte) ([]byte, error) {
	var in struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
		ServerInfo   json.RawMessage            `json:"serverInfo"`
		Instructions *string                    `json:"instructions"`
	}
	if err := json.Unmarshal(init, &in); err != nil {
		return nil, err
	}
	delete(in.Capabilities, "tasks")
	if in.Capabilities == nil {
		in.Capabilities = map[string]json.RawMessage{}
	}
	caps, err := jsonrpc.Marshal(in.Capabilities)
	if err != nil {
		return nil, err
	}
	if caps, err = withTasksExtension(caps); err != nil {
		return nil, err
	}
	out := map[string]any{
		"resultType": "complete", "supportedVersions": era.Supported, "capabilities": json.RawMessage(caps),
		"ttlMs": 0, "cacheScope": "public", // the same for every caller
	}
	if len(in.ServerInfo) > 0 && string(in.ServerInfo) != "null" {
		out["_meta"] = map[string]any{era.MetaServerInfo: in.ServerInfo}
	}
	if in.Instructions != nil {
		out["instructions"] = *in.Instructions
	}
	return jsonrpc.Marshal(out)
}

// modernToolsList forwards tools/list and appends Tollgate's own tools to the last page. The
// list is the same for every caller unless per-caller tool views are on (listView): then the
// tools a caller can never call are left out and the result's cacheScope becomes "private"
// (spec 2026-07-28 caching); otherwise the upstream's ttlMs and cacheScope stay as they are.
func (g *Gateway) modernToolsList(ctx context.Context, x *Exchange) Result {
	lv := g.listView(x)
	transform := func(result []byte) []byte {
		out, err := g.appendOwnTools(result, lv)
		if err != nil {
			g.log.Warn("tools/list result not rewritten", "error", err.Error())
			return result
		}
		return out
	}
	if !g.br.upstreamModern(ctx) {
		return g.bridge(x, transform)
	}
	return Result{Forward: &Forward{Memo: g.listSlot("2026-07-28" + lv.tag()), Transform: func(_ *Exchange, resp *jsonrpc.Message) []byte {
		if resp.Result == nil {
			return nil
		}
		return resp.WithResult(transform(resp.Result))
	}}}
}

// appendOwnTools drops upstream tools with Tollgate's reserved prefix and appends Tollgate's
// tools on the last page.
func (g *Gateway) appendOwnTools(result []byte, lv listView) ([]byte, error) {
	elems, err := jsonrpc.Elements(jsonrpc.Member(result, "tools"))
	if err != nil {
		return nil, fmt.Errorf("tools: %w", err)
	}
	s := g.d.Snapshots.Load()
	blocked := g.pinBlocked(elems)
	hides := lv.hider(s)
	kept := elems[:0]
	learned := make(map[string]toolInfo, len(elems))
	for _, t := range elems {
		name, info, err := toolNameAndInfo(t)
		if err == nil && strings.HasPrefix(name, gwtools.Prefix) {
			// Reserved for Tollgate's own tools, as in the legacy era (rewriteTools).
			g.log.Warn("upstream tool hidden: the tollgate_ prefix is reserved for Tollgate's own tools", "tool", name)
			continue
		}
		if err == nil {
			learned[name] = info // annotations feed rules (match_annotations) and Cedar
			if blocked[name] {
				continue // quarantined: its new definition awaits an approver (pins)
			}
			hints := g.ann.pinnedHints(name, info.hints)
			if hides(name, hints, s.Rules.DecideFor(name, hints, lv.view)) {
				continue // this caller can never call it (a call would still be refused)
			}
		}
		kept = append(kept, t)
	}
	g.ann.learn(learned, false)
	if lv.filter && jsonrpc.Member(result, "cacheScope") != nil {
		if r, err := jsonrpc.Replace(result, "cacheScope", []byte(`"private"`)); err == nil {
			result = r // the list depends on who asks
		}
	}
	if lastPage(result) && g.d.Tools != nil {
		for _, d := range g.d.Tools.Definitions() {
			kept = append(kept, withoutTaskSupport(d))
		}
	}
	return jsonrpc.Replace(result, "tools", jsonrpc.AppendArray(nil, kept))
}

// withoutTaskSupport drops execution.taskSupport (and an execution left empty) from one of
// Tollgate's own tool definitions: protocol 2026-07-28 has no per-tool task support (the
// tasks extension lets the server decide per call), as docs/eras.md says.
func withoutTaskSupport(def json.RawMessage) json.RawMessage {
	var tool map[string]json.RawMessage
	if json.Unmarshal(def, &tool) != nil {
		return def
	}
	var exec map[string]json.RawMessage
	if json.Unmarshal(tool["execution"], &exec) != nil {
		return def
	}
	delete(exec, "taskSupport")
	delete(tool, "execution")
	if len(exec) > 0 {
		b, err := jsonrpc.Marshal(exec)
		if err != nil {
			return def
		}
		tool["execution"] = b
	}
	out, err := jsonrpc.Marshal(tool)
	if err != nil {
		return def
	}
	return out
}

// modernResourcesList and modernResourcesRead add Tollgate's diagrams resource as in the
// legacy era.
func (g *Gateway) modernResourcesList(ctx context.Context, x *Exchange) Result {
	r := g.resourcesList(ctx, x)
	if !g.br.upstreamModern(ctx) {
		return g.bridge(x, func(b []byte) []byte {
			m, err := jsonrpc.Parse(jsonrpc.ResultResponse(x.Msg.ID, b))
			if err != nil {
				return b
			}
			if out := r.Forward.Transform(x, m); out != nil {
				if m2, err := jsonrpc.Parse(out); err == nil {
					return m2.Result
				}
			}
			return b
		})
	}
	return r
}

func (g *Gateway) modernResourcesRead(ctx context.Context, x *Exchange) Result {
	r := g.resourcesRead(ctx, x)
	if r.Reply != nil {
		m, err := jsonrpc.Parse(r.Reply)
		if err == nil && m.Result != nil {
			return modernReply(x, withCacheHints(m.Result, "public")) // Tollgate's own diagrams
		}
		return r
	}
	return g.modernOther(ctx, x)
}

// bindUpstreamTask is the Transform that binds the task id of an upstream CreateTaskResult
// (resultType "task") to the caller.
func (g *Gateway) bindUpstreamTask(owner string) func(*Exchange, *jsonrpc.Message) []byte {
	return func(x *Exchange, resp *jsonrpc.Message) []byte {
		if resp.Result == nil {
			return nil
		}
		var r struct {
			ResultType string `json:"resultType"`
			TaskID     string `json:"taskId"`
		}
		if json.Unmarshal(resp.Result, &r) == nil && r.ResultType == "task" && r.TaskID != "" {
			g.bindUpstreamTaskID(source.Of(x.HTTP, x.Subject), r.TaskID, owner, resp.Result)
		}
		return nil
	}
}
