package intercept

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/cespare/xxhash/v2"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/governance"
	"github.com/tollgate-mcp/tollgate/internal/gwtools"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/pins"
	"github.com/tollgate-mcp/tollgate/internal/rules"
)

// tasksCapability is what Tollgate declares (spec 2025-11-25 ServerCapabilities.tasks).
var tasksCapability = []byte(`{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`)

// initialize forwards the handshake and rewrites the server's capabilities (REQ-CORE-007 F-001).
func (g *Gateway) initialize(_ context.Context, x *Exchange) Result {
	return Result{Forward: &Forward{Transform: func(x *Exchange, resp *jsonrpc.Message) []byte {
		if resp.Result == nil {
			return nil
		}
		out, supports, err := injectTasksCapability(resp.Result)
		if err != nil {
			g.log.Warn("initialize result not rewritten", "error", err.Error())
			return nil
		}
		if g.ann.setUpstreamTasks(supports) {
			// Listings rewritten since this request arrived may carry the old value under
			// the new tag; a new generation keeps them out of the memo.
			g.forgetLists()
		}
		if x.Session != nil {
			if v := jsonrpc.Member(resp.Result, "protocolVersion"); v != nil {
				var s string
				if json.Unmarshal(v, &s) == nil {
					x.Session.SetProtocol(s)
				}
			}
		}
		return resp.WithResult(out)
	}}}
}

// injectTasksCapability sets capabilities.tasks in an initialize result, keeping every other
// member, and reports whether the upstream itself declared tasks.requests.tools.call.
func injectTasksCapability(result []byte) ([]byte, bool, error) {
	caps := jsonrpc.Member(result, "capabilities")
	if caps == nil || string(caps) == "null" {
		caps = []byte(`{}`)
	}
	supports := upstreamDeclaresToolTasks(jsonrpc.Member(caps, "tasks"))
	newCaps, err := jsonrpc.Replace(caps, "tasks", tasksCapability)
	if err != nil {
		return nil, false, fmt.Errorf("capabilities: %w", err)
	}
	out, err := jsonrpc.Replace(result, "capabilities", newCaps)
	return out, supports, err
}

func upstreamDeclaresToolTasks(tasks []byte) bool {
	var t struct {
		Requests struct {
			Tools struct {
				Call json.RawMessage `json:"call"`
			} `json:"tools"`
		} `json:"requests"`
	}
	if tasks == nil || json.Unmarshal(tasks, &t) != nil {
		return false
	}
	c := t.Requests.Tools.Call
	return c != nil && string(c) != "null" && string(c) != "false"
}

// toolsList forwards tools/list and sets execution.taskSupport on every tool (REQ-CORE-007
// F-002); the last page also carries Tollgate's own tools.
func (g *Gateway) toolsList(_ context.Context, x *Exchange) Result {
	tag := "2025-11-25 upstream-tasks=false"
	if g.ann.upstreamTasks.Load() {
		tag = "2025-11-25 upstream-tasks=true"
	}
	lv := g.listView(x)
	tag += lv.tag()
	return Result{Forward: &Forward{Memo: g.listSlot(tag), Transform: func(x *Exchange, resp *jsonrpc.Message) []byte {
		if resp.Result == nil {
			return nil
		}
		res, err := g.rewriteTools(resp.Result, true, lv)
		if err != nil {
			g.log.Warn("tools/list result not rewritten", "error", err.Error())
			return nil
		}
		return resp.WithResult(res)
	}}}
}

// listSlot is where a tools/list reply is remembered as sent (Forward.Memo). The rewrite
// depends, besides the upstream's bytes, on the era (tag), the upstream's task capability
// (tag), the governance snapshot and the annotation cache; a reload or a new upstream session
// (Recompute) and the upstream's notifications/tools/list_changed (UpstreamNotification)
// start a new generation. With per-caller tool views (server.caller_auth.tool_view: caller) a
// listing depends on the caller's rules.View too, which the tag carries: one memo per distinct
// view, not per caller or request.
func (g *Gateway) listSlot(tag string) *MemoSlot {
	if k := g.ann.pins; k != nil {
		tag += fmt.Sprintf(" pins=%d", k.Gen()) // a quarantine or an accept changes the list
	}
	return &MemoSlot{Memo: &g.listMemo, Gen: g.listMemo.Gen(), Tag: tag}
}

// PinsChanged is called when which tools are quarantined changed (pins.Keeper.OnChange): the
// remembered listings go, and 2026-07-28 listen streams are told (the server tells legacy
// sessions).
func (g *Gateway) PinsChanged() {
	g.forgetLists()
	g.NotifyToolsChanged()
}

// pinBlocked observes one listing page's tools (pins) and returns those to leave out: a tool
// whose definition is not the accepted one never reaches the model.
func (g *Gateway) pinBlocked(tools [][]byte) map[string]bool {
	k := g.ann.pins
	if k == nil {
		return nil
	}
	seen := make([]pins.Seen, 0, len(tools))
	for _, t := range tools {
		if s, err := k.See(t); err == nil {
			seen = append(seen, s)
		}
	}
	return k.Observe(context.Background(), seen)
}

// UpstreamNotification sees the method of each notification the upstream sends on a
// session's stream; tools/list_changed ends the remembered tools/list replies.
func (g *Gateway) UpstreamNotification(method string) {
	if method == "notifications/tools/list_changed" {
		g.forgetLists()
	}
}

// forgetLists drops the remembered tools/list replies and rewritten pages, so the next listing
// is parsed, checked, rewritten and learned from (Annotations) in full.
func (g *Gateway) forgetLists() {
	g.listMemo.Invalidate()
	g.lists.clear()
}

// rewriteTools annotates the tools of one tools/list result. It learns each upstream tool's own
// taskSupport as it goes (F-007.3). Identical upstream pages under the same snapshot and
// capabilities are served from a small cache: a 1000-tool list then costs one hash.
func (g *Gateway) rewriteTools(result []byte, appendOwn bool, lv listView) ([]byte, error) {
	s := g.d.Snapshots.Load()
	key := listKey{sum: xxhash.Sum64(result), n: len(result), rev: s.Revision, tasks: g.ann.upstreamTasks.Load(), own: appendOwn, view: lv.viewKey}
	if g.ann.pins != nil {
		key.pins = g.ann.pins.Gen()
	}
	if out, ok := g.lists.get(key); ok {
		return out, nil
	}
	toolsRaw := jsonrpc.Member(result, "tools")
	if toolsRaw == nil {
		return nil, fmt.Errorf("result has no tools array")
	}
	elems, err := jsonrpc.Elements(toolsRaw)
	if err != nil {
		return nil, fmt.Errorf("tools: %w", err)
	}
	blocked := g.pinBlocked(elems)
	if g.ann.pins != nil {
		key.pins = g.ann.pins.Gen() // after Observe: a quarantine it made is in this page
	}
	arr := make([]byte, 0, len(toolsRaw)+len(elems)*48+1024)
	arr = append(arr, '[')
	learned := make(map[string]toolInfo, len(elems))
	upTasks, mode := g.ann.upstreamTasks.Load(), s.Config.Tasks.SyncApproval
	hides := lv.hider(s)
	n := 0
	sep := func() {
		if n > 0 {
			arr = append(arr, ',')
		}
		n++
	}
	for _, t := range elems {
		tl, err := scanTool(t)
		if err != nil {
			sep()
			arr = append(arr, t...) // not ours to fix; pass it on
			continue
		}
		if strings.HasPrefix(tl.name, gwtools.Prefix) {
			// Reserved for Tollgate's own tools; such calls are never forwarded (toolsCall).
			g.log.Warn("upstream tool hidden: the tollgate_ prefix is reserved for Tollgate's own tools", "tool", tl.name)
			continue
		}
		learned[tl.name] = tl.info
		if blocked[tl.name] {
			continue // quarantined: its new definition awaits an approver (pins)
		}
		hints := g.ann.pinnedHints(tl.name, tl.info.hints)
		d := s.Rules.DecideFor(tl.name, hints, lv.view)
		if hides(tl.name, hints, d) {
			continue // this caller can never call it (a call would still be refused)
		}
		sep()
		arr = tl.appendAnnotated(arr, t, rules.Annotation(d, upTasks, tl.info.own, mode))
	}
	g.ann.learn(learned, false)
	if appendOwn && g.d.Tools != nil && lastPage(result) {
		for _, d := range g.d.Tools.Definitions() {
			sep()
			arr = append(arr, d...)
		}
	}
	arr = append(arr, ']')
	out, err := jsonrpc.Replace(result, "tools", arr)
	if err == nil {
		g.lists.put(key, out)
	}
	return out, err
}

// scannedTool locates what the rewrite needs in one tool object, in a single pass.
type scannedTool struct {
	name       string
	info       toolInfo // the upstream's execution.taskSupport, annotations, outputSchema
	exStart    int      // execution value span in the tool (exEnd == 0: absent)
	exEnd      int
	tsStart    int // taskSupport value span inside the execution object (tsEnd == 0: absent)
	tsEnd      int
	execIsNull bool
}

func scanTool(tool []byte) (scannedTool, error) {
	var st scannedTool
	var nameRaw []byte
	err := jsonrpc.Members(tool, func(k []byte, start, end int) error {
		switch string(k) {
		case "name":
			nameRaw = tool[start:end]
		case "execution":
			st.exStart, st.exEnd = start, end
		case "annotations":
			st.info.hints = rules.ParseHints(tool[start:end])
		case "outputSchema":
			st.info.outputSchema = string(tool[start:end]) != "null"
		}
		return nil
	})
	if err != nil {
		return st, err
	}
	if nameRaw == nil {
		return st, fmt.Errorf("tool without name")
	}
	if len(nameRaw) >= 2 && nameRaw[0] == '"' && bytes.IndexByte(nameRaw, '\\') < 0 {
		st.name = string(nameRaw[1 : len(nameRaw)-1])
	} else if err := json.Unmarshal(nameRaw, &st.name); err != nil {
		return st, err
	}
	if st.exEnd > 0 {
		ex := tool[st.exStart:st.exEnd]
		if string(ex) == "null" {
			st.execIsNull = true
			return st, nil
		}
		if ex[0] != '{' {
			// Malformed: replace it like null, so every tool is still annotated (F-002).
			st.execIsNull = true
			return st, nil
		}
		_ = jsonrpc.Members(ex, func(k []byte, start, end int) error {
			if string(k) == "taskSupport" {
				st.tsStart, st.tsEnd = start, end
				var v string
				if json.Unmarshal(ex[start:end], &v) == nil {
					st.info.own = rules.TaskSupport(v)
				}
			}
			return nil
		})
	}
	return st, nil
}

// appendAnnotated appends tool with execution.taskSupport set to ann, splicing bytes so every
// other member stays as the upstream wrote it.
func (st scannedTool) appendAnnotated(dst, tool []byte, ann rules.TaskSupport) []byte {
	val := `"` + string(ann) + `"`
	switch {
	case st.exEnd == 0: // no execution member: add one before the closing brace
		end := bytes.LastIndexByte(tool, '}')
		dst = append(dst, tool[:end]...)
		if bytes.IndexByte(tool[1:end], '"') >= 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `"execution":{"taskSupport":`...)
		dst = append(dst, val...)
		dst = append(dst, '}')
		return append(dst, tool[end:]...)
	case st.execIsNull:
		dst = append(dst, tool[:st.exStart]...)
		dst = append(dst, `{"taskSupport":`...)
		dst = append(dst, val...)
		dst = append(dst, '}')
		return append(dst, tool[st.exEnd:]...)
	case st.tsEnd > 0: // replace the existing value
		dst = append(dst, tool[:st.exStart+st.tsStart]...)
		dst = append(dst, val...)
		return append(dst, tool[st.exStart+st.tsEnd:]...)
	default: // an execution object without taskSupport: add it before its closing brace
		ex := tool[st.exStart:st.exEnd]
		end := bytes.LastIndexByte(ex, '}')
		dst = append(dst, tool[:st.exStart]...)
		dst = append(dst, ex[:end]...)
		if bytes.IndexByte(ex[1:end], '"') >= 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `"taskSupport":`...)
		dst = append(dst, val...)
		dst = append(dst, ex[end:]...)
		return append(dst, tool[st.exEnd:]...)
	}
}

func toolNameAndInfo(tool []byte) (string, toolInfo, error) {
	st, err := scanTool(tool)
	return st.name, st.info, err
}

// listKey identifies one rewritten tools/list page.
type listKey struct {
	sum   uint64
	n     int
	rev   uint64
	tasks bool
	own   bool
	view  viewKey
	pins  uint64 // pins.Keeper.Gen
}

// listView is what of the caller a listing depends on: with per-caller tool views
// (server.caller_auth.tool_view: caller), the tools a rule denies for the caller's rules.View
// are left out, and so are the tools a Cedar forbid denies the caller whatever the arguments
// (governance.Snapshot.ForbiddenRegardless); the annotations always follow the caller's view.
type listView struct {
	viewKey
	who governance.Caller // Cedar's principal, when cedar is set
}

// viewKey is the part of a listView listings are remembered under: callers with equal keys
// get the same listing. With Cedar forbids in play it names the principal (cedar), since a
// forbid may read the subject, groups, claims and scopes: one memo per distinct principal.
type viewKey struct {
	filter bool
	view   rules.View
	cedar  [16]byte // digest of the Cedar principal's parts; zero when Cedar hides nothing
}

// listView is x's listing view under the current snapshot.
func (g *Gateway) listView(x *Exchange) listView {
	s := g.d.Snapshots.Load()
	ca := s.Config.Server.CallerAuth
	c := caller(x)
	lv := listView{viewKey: viewKey{filter: ca.Enabled() && ca.ToolView == config.ToolViewCaller, view: s.Rules.ViewOf(c.Who())}}
	if lv.filter && s.Policy != nil && s.Policy.HasForbid() {
		lv.who, lv.cedar = c, principalDigest(c)
	}
	return lv
}

// principalDigest is a digest of everything of c a Cedar request reads besides the call
// (policy.Request: subject or session, groups, e-mail, name, scopes), never zero. SHA-256, so
// that no caller can choose claims whose listing memo is another's.
func principalDigest(c governance.Caller) [16]byte {
	h := sha256.New()
	put := func(s string) { fmt.Fprintf(h, "%d:%s", len(s), s) }
	put(c.Subject)
	if c.Subject == "" {
		put(c.SessionID)
	}
	groups, email, name, scopes := c.Groups, "", "", []string(nil)
	if v := c.Verified; v != nil {
		groups, email, name, scopes = v.Groups, v.Email, v.Name, v.Scopes
	}
	for _, list := range [][]string{groups, scopes} {
		put(strconv.Itoa(len(list)))
		for _, s := range slices.Sorted(slices.Values(list)) {
			put(s)
		}
	}
	put(email)
	put(name)
	var d [16]byte
	copy(d[:], h.Sum(nil))
	d[0] |= 1 // never the zero "no Cedar" key
	return d
}

// hider returns, for one listing under s, whether a tool decided d for this view is left out:
// denied by a rule, or forbidden by Cedar whatever the arguments. An audit-mode decision hides
// nothing (the call would be forwarded). Not safe for concurrent use.
func (lv listView) hider(s *governance.Snapshot) func(tool string, hints rules.Hints, d rules.Decision) bool {
	var cedar func(string, rules.Hints, rules.Decision) bool
	if lv.cedar != [16]byte{} {
		cedar = s.Forbidder(lv.who)
	}
	return func(tool string, hints rules.Hints, d rules.Decision) bool {
		if !lv.filter || d.Audit {
			return false
		}
		if d.Action == config.ActionDeny {
			return true
		}
		return cedar != nil && cedar(tool, hints, d)
	}
}

// tag is the listing memo's tag part for this view ("" for the shared view).
func (lv listView) tag() string {
	if !lv.filter && lv.view == 0 {
		return ""
	}
	t := fmt.Sprintf(" view=%t/%x", lv.filter, uint64(lv.view))
	if lv.cedar != [16]byte{} {
		t += fmt.Sprintf(" cedar=%x", lv.cedar)
	}
	return t
}

// listCache keeps the last few rewritten pages (clients list the same tools again and again).
type listCache struct {
	mu   sync.Mutex
	keys []listKey
	vals map[listKey][]byte
}

const listCacheSize = 8

func (c *listCache) get(k listKey) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.vals[k]
	return v, ok
}

func (c *listCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keys, c.vals = nil, nil
}

func (c *listCache) put(k listKey, v []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.vals == nil {
		c.vals = map[listKey][]byte{}
	}
	if _, ok := c.vals[k]; ok {
		return
	}
	if len(c.keys) == listCacheSize {
		delete(c.vals, c.keys[0])
		c.keys = c.keys[1:]
	}
	c.keys = append(c.keys, k)
	c.vals[k] = v
}

// maxKnownTools bounds the tools learned from clients' tools/list pages between refreshes.
const maxKnownTools = 100000

// Recompute recalculates every known tool's annotation against snapshot s (after a reload) and
// returns the tools whose annotation changed.
// NF-003.1 asks for the annotation decisions at INFO: one summary line counts them (a 1000-tool
// upstream would otherwise write 1000 lines at every start); each new or changed tool is at DEBUG.
func (g *Gateway) Recompute(s *governance.Snapshot) []string {
	g.forgetLists() // a new snapshot or upstream session: rewrite lists afresh
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ann.mu.RLock() // lock order: Gateway.mu, then Annotations.mu
	defer g.ann.mu.RUnlock()
	known := g.ann.tools
	next := make(map[string]rules.TaskSupport, len(known))
	counts := map[rules.TaskSupport]int{}
	var changed []string
	names := make([]string, 0, len(known))
	for n := range known {
		names = append(names, n)
	}
	sort.Strings(names)
	upstreamTasks := g.ann.upstreamTasks.Load()
	debug := g.log.Enabled(context.Background(), slog.LevelDebug)
	for _, name := range names {
		ti := known[name]
		d := s.Rules.DecideHints(name, g.ann.pinnedHints(name, ti.hints))
		ann := rules.Annotation(d, g.ann.upstreamTasks.Load(), ti.own, s.Config.Tasks.SyncApproval)
		next[name] = ann
		counts[ann]++
		if prev, ok := g.listed[name]; !ok || prev != ann {
			changed = append(changed, name)
			if debug {
				g.log.Debug(fmt.Sprintf("Tool annotation: %s -> %s (yaml_action=%s, upstream_tasks=%v)",
					name, ann, d.Action, upstreamTasks))
			}
		}
	}
	for name := range g.listed {
		if _, ok := next[name]; !ok {
			changed = append(changed, name)
		}
	}
	ca := s.Config.Server.CallerAuth
	perCaller := s.Rules.UsesCallers() || ca.Enabled() && ca.ToolView == config.ToolViewCaller
	if len(changed) == 0 && (perCaller || g.viewRules != nil) && g.viewRules != s.Rules {
		// A caller's listing may have changed with the rules although view 0's did not
		// (a rule narrowed to callers, a deny for some): every tool counts as changed, so
		// list_changed goes out and clients list again.
		changed = names
	}
	g.viewRules = nil
	if perCaller {
		g.viewRules = s.Rules
	}
	if len(changed) > 0 {
		g.log.Info("Tool annotations", "tools", len(next), "changed", len(changed),
			string(rules.Required), counts[rules.Required], string(rules.Optional), counts[rules.Optional],
			string(rules.Forbidden), counts[rules.Forbidden], "upstream_tasks", upstreamTasks)
	}
	g.listed = next
	g.m.setAnnotations(counts)
	return changed
}

// computeOnDemand handles a tool first seen in a tools/call (F-007: computed on demand, WARN).
func (g *Gateway) computeOnDemand(s *governance.Snapshot, tool string) {
	if g.ann.knowsTool(tool) {
		return
	}
	_, ann := g.annotation(s, tool, 0)
	if ok, held := g.warnOnDemand.Allow(); ok {
		g.log.Warn("tool not in annotation cache; computed on demand", "tool", tool, "annotation", string(ann), "suppressed", held)
	}
}

// isOwnTool reports whether name is one of Tollgate's tools.
func (g *Gateway) isOwnTool(name string) bool {
	return g.d.Tools != nil && strings.HasPrefix(name, gwtools.Prefix) && g.d.Tools.Has(name)
}

// lastPage reports whether a paginated result has no further page ("nextCursor" absent or
// null).
func lastPage(result []byte) bool {
	c := jsonrpc.Member(result, "nextCursor")
	return c == nil || string(c) == "null"
}
