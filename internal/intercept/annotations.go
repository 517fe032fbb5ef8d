package intercept

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/governance"
	"github.com/tollgate-mcp/tollgate/internal/gwtools"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/pins"
	"github.com/tollgate-mcp/tollgate/internal/policyschema"
	"github.com/tollgate-mcp/tollgate/internal/rules"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

// Annotations is the annotation cache: what the upstream's tools/list said about each tool
// (its own taskSupport, its annotation hints, whether it has an outputSchema) and whether the
// upstream declared tasks.requests.tools.call (REQ-CORE-007 F-007). The Gateway fills it from
// listings and initialize results; the task manager reads the hints when it re-checks an
// approved call (Recheck); Refresh rebuilds it from Tollgate's own upstream session. Built before both and handed to each, so neither needs the other.
type Annotations struct {
	snaps *governance.Holder
	up    *upstream.Client
	br    *Bridge // Refresh learns there whether the upstream serves only 2026-07-28
	log   *slog.Logger

	// upstreamTasks caches whether the upstream declared tasks.requests.tools.call
	// (REQ-CORE-007 F-007.6), refreshed on every initialize.
	upstreamTasks atomic.Bool
	capsKnown     atomic.Bool

	mu    sync.RWMutex
	tools map[string]toolInfo // upstream tool → what its tools/list entry says
	// own are the tools of Refresh's last complete listing (every page, Tollgate's own
	// session), removed those an earlier complete listing had and a later one no longer has
	// (until listed again): Unrunnable's tool_removed. Only what Tollgate's own listing saw
	// go counts: an upstream may list other tools to other callers.
	own     map[string]bool
	removed map[string]bool

	// listed is the upstream's whole tools/list as Refresh last read it (names and
	// inputSchemas), for validating Cedar policies against it (cedar.validation); nil
	// until the first Refresh.
	listed atomic.Pointer[ListedTools]

	// pins are the pinned tool definitions (nil = governance.pins.mode off): rules and Cedar
	// read the accepted definition's annotations, never a newer unaccepted one.
	pins *pins.Keeper
}

// pinnedHints are the hints rules read for a listed tool: the accepted definition's with pins
// on (a listed tool that is not blocked has the accepted definition anyway), else listed.
func (a *Annotations) pinnedHints(name string, listed rules.Hints) rules.Hints {
	if a.pins != nil {
		if _, h, ok := a.pins.Accepted(name); ok {
			return h
		}
	}
	return listed
}

// SetPins makes a the reader of k's accepted definitions; call before serving.
func (a *Annotations) SetPins(k *pins.Keeper) { a.pins = k }

// NewAnnotations returns an empty cache; snaps is read at the moment of a re-check, up and br
// are used by Refresh.
func NewAnnotations(snaps *governance.Holder, up *upstream.Client, br *Bridge, log *slog.Logger) *Annotations {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Annotations{snaps: snaps, up: up, br: br, log: log, tools: map[string]toolInfo{}}
}

// SupportsTasks is the cached capability of the upstream.
func (a *Annotations) SupportsTasks() bool { return a.upstreamTasks.Load() }

// toolInfo is what Tollgate learned about an upstream tool from tools/list.
type toolInfo struct {
	own          rules.TaskSupport // its own execution.taskSupport ("" if absent)
	hints        rules.Hints       // its annotations (match_annotations, Cedar context.annotations)
	outputSchema bool              // it declares an outputSchema
}

// learn records what upstream tools' listings say; replace=true drops tools no longer listed.
func (a *Annotations) learn(m map[string]toolInfo, replace bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if replace {
		a.tools = m
		return
	}
	for k, v := range m {
		if _, known := a.tools[k]; known || len(a.tools) < maxKnownTools {
			a.tools[k] = v
		}
	}
}

// knowsTool reports whether the annotation cache has seen tool.
func (a *Annotations) knowsTool(tool string) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	_, ok := a.tools[tool]
	return ok
}

// setUpstreamTasks records the upstream's declared task support (REQ-CORE-007 F-007.6),
// logging at INFO the first time and on every change.
func (a *Annotations) setUpstreamTasks(supports bool) (changed bool) {
	prev := a.upstreamTasks.Swap(supports)
	if !a.capsKnown.Swap(true) || prev != supports {
		a.log.Info("Upstream capabilities: tasks=" + fmt.Sprint(supports))
		return prev != supports
	}
	a.log.Debug("Upstream capabilities: tasks=" + fmt.Sprint(supports))
	return false
}

// tool returns what the annotation cache knows about tool (zero when it was never listed).
func (a *Annotations) tool(name string) toolInfo {
	a.mu.RLock()
	ti := a.tools[name]
	a.mu.RUnlock()
	if a.pins != nil {
		if _, h, ok := a.pins.Accepted(name); ok {
			ti.hints = h // the accepted definition's, whatever the upstream lists now
		} else if a.pins.Blocked(name) {
			ti.hints = rules.ParseHints(nil) // nothing accepted yet: the spec's cautious defaults
		}
	}
	return ti
}

// Hints are the MCP annotation hints the upstream lists for tool (zero when unknown), as
// rules and Cedar see them.
func (a *Annotations) Hints(tool string) rules.Hints { return a.tool(tool).hints }

// Recheck re-evaluates governance right before an approved task executes (docs/contract.md §3); the
// tasks manager has checked the keyed arguments hash already.
func (a *Annotations) Recheck(ctx context.Context, t *tasks.Task) *jsonrpc.Error {
	if t.Accelerated {
		return nil
	}
	if e := a.pinRecheck(t); e != nil {
		return e
	}
	return a.snaps.Load().Recheck(ctx, a.log, governance.Caller{Subject: t.RequestedBy, SessionID: t.SessionID, Verified: t.Requester},
		t.Tool, a.tool(t.Tool).hints, t.Arguments, t.ID)
}

// Refresh opens Tollgate's own upstream session, reads the capabilities and every tools/list
// page, and rebuilds the annotation cache (F-007.1, F-007.4); Gateway.Recompute then tells
// which tools' annotations changed. On failure the previous cache stays (NF-002.2).
func (a *Annotations) Refresh(ctx context.Context, maxPages int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sess, err := a.up.Handshake(ctx, json.RawMessage(
		`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"tollgate","version":"annotation-cache"}}`), "")
	// An upstream that refuses initialize but answers server/discover serves only protocol
	// 2026-07-28: its tools are listed the modern way, and legacy clients are bridged.
	modernOnly := err != nil && a.br.upstreamModern(ctx)
	a.br.setModernOnly(modernOnly)
	var hdr http.Header
	var meta json.RawMessage
	switch {
	case modernOnly:
		hdr, meta = modernHeaders(nil, "tools/list", ""), json.RawMessage(ownMeta)
	case err != nil:
		return err
	default:
		a.br.noteLegacyInit(sess.Result)
		caps := jsonrpc.Member(sess.Result, "capabilities")
		a.setUpstreamTasks(caps != nil && upstreamDeclaresToolTasks(jsonrpc.Member(caps, "tasks")))
		defer a.up.EndSession(sess)
		hdr = sess.Header()
	}

	all := map[string]toolInfo{}
	var schemaTools []policyschema.Tool
	var seen []pins.Seen
	truncated, err := a.up.Pages(ctx, hdr, "tools/list", "tollgate-tools-", maxPages, meta, func(result json.RawMessage) error {
		elems, err := jsonrpc.Elements(jsonrpc.Member(result, "tools"))
		if err != nil {
			return err
		}
		for _, t := range elems {
			if name, info, err := toolNameAndInfo(t); err == nil {
				all[name] = info
				if !strings.HasPrefix(name, gwtools.Prefix) { // never forwarded (rewriteTools)
					schemaTools = append(schemaTools, policyschema.Tool{Name: name, InputSchema: bytes.Clone(jsonrpc.Member(t, "inputSchema"))})
				}
				if a.pins != nil {
					if s, err := a.pins.See(t); err == nil {
						seen = append(seen, s)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if truncated {
		a.log.Warn("tools/list pagination stopped at TOLLGATE_TOOLS_MAX_PAGES", "pages", maxPages)
	}
	if a.pins != nil {
		a.pins.Observe(ctx, seen) // the whole listing at once (trust_first pins it at start)
	}
	a.learn(all, true)
	a.listed.Store(&ListedTools{Tools: schemaTools, Digest: policyschema.Digest(schemaTools)})
	if !truncated && len(all) < maxKnownTools {
		a.mu.Lock()
		removed := map[string]bool{}
		for name := range a.removed {
			if _, listed := all[name]; !listed {
				removed[name] = true
			}
		}
		for name := range a.own {
			if _, listed := all[name]; !listed && len(removed) < maxKnownTools {
				removed[name] = true
			}
		}
		own := make(map[string]bool, len(all))
		for name := range all {
			own[name] = true
		}
		a.own, a.removed = own, removed
		a.mu.Unlock()
	}
	return nil
}

// Unrunnable tells why pending task t's call would fail if approved now, as far as the tool
// goes: its definition is quarantined or changed (the pin re-check before execution fails it
// ToolChanged), or the upstream's complete tools/list no longer lists it after an earlier one
// did (Tollgate's own listing: a tool it never saw is not reported). Nil when
// neither is known. Cheap (map lookups): the approvals list asks it for every row of a page.
func (a *Annotations) Unrunnable(t *tasks.Task) *tasks.Unrunnable {
	if t.Accelerated {
		return nil
	}
	if a.pinRecheck(t) != nil {
		return &tasks.Unrunnable{Reason: tasks.UnrunnableToolQuarantined, Message: fmt.Sprintf(
			"The definition of tool %q changed and is quarantined by pins; approved now, the call fails (ToolChanged) unless that definition is accepted again", t.Tool)}
	}
	a.mu.RLock()
	gone := a.removed[t.Tool]
	a.mu.RUnlock()
	if gone {
		return &tasks.Unrunnable{Reason: tasks.UnrunnableToolRemoved, Message: fmt.Sprintf(
			"The upstream no longer lists tool %q (tools/list); approved now, the call would most likely fail", t.Tool)}
	}
	return nil
}

// ListedTools is one complete tools/list of the upstream as policy validation reads it.
type ListedTools struct {
	Tools  []policyschema.Tool
	Digest string // policyschema.Digest(Tools)
}

// Listed is the upstream's tools as the last successful Refresh read them (nil before the
// first). Clients' own tools/list pages do not change it: a page is not the whole list.
func (a *Annotations) Listed() *ListedTools { return a.listed.Load() }

// pinRecheck fails an approved task whose tool's definition is no longer the one accepted
// when the call was approved (docs/contract.md "Pinned tool definitions").
func (a *Annotations) pinRecheck(t *tasks.Task) *jsonrpc.Error {
	if a.pins == nil {
		return nil
	}
	digest, _, ok := a.pins.Accepted(t.Tool)
	if t.ToolDigest != "" && t.ToolDigest == a.pins.Awaiting(t.Tool) {
		return nil // held under on_change: hold, approved for the definition that still awaits
	}
	if a.pins.Blocked(t.Tool) || (t.ToolDigest != "" && (!ok || digest != t.ToolDigest)) {
		return jsonrpc.NewError(jsonrpc.CodePolicyChanged, "ToolChanged",
			fmt.Sprintf("Tool changed since approval: the definition of tool %q is not the one the call was approved under", t.Tool),
			"taskId", t.ID, "tool", t.Tool)
	}
	return nil
}
