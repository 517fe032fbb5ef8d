package intercept

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/governance"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
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
}

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
	defer a.mu.RUnlock()
	return a.tools[name]
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
	truncated, err := a.up.Pages(ctx, hdr, "tools/list", "tollgate-tools-", maxPages, meta, func(result json.RawMessage) error {
		elems, err := jsonrpc.Elements(jsonrpc.Member(result, "tools"))
		if err != nil {
			return err
		}
		for _, t := range elems {
			if name, info, err := toolNameAndInfo(t); err == nil {
				all[name] = info
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
	a.learn(all, true)
	return nil
}
