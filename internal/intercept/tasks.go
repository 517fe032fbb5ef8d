package intercept

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/tollgate-mcp/tollgate/internal/execution"
	"github.com/tollgate-mcp/tollgate/internal/gwtools"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

func taskIDParam(x *Exchange) (string, *jsonrpc.Error) {
	var p struct {
		TaskID string `json:"taskId"`
	}
	if err := json.Unmarshal(x.Msg.Params, &p); err != nil || p.TaskID == "" {
		return "", jsonrpc.NewError(jsonrpc.CodeInvalidParams, "InvalidParams", "Invalid params: taskId (string) is required")
	}
	return p.TaskID, nil
}

func notFound(id string) *jsonrpc.Error {
	return jsonrpc.NewError(jsonrpc.CodeInvalidParams, "TaskNotFound",
		fmt.Sprintf("Invalid params: task %q not found", id), "taskId", id)
}

// taskError answers a request about task id that the manager could not serve. The task store
// failing (tasks.ErrStore; the manager closing) says nothing about the task, which may well
// exist: StoreUnavailable, retryable, its details logged under the request's correlation_id
// and never sent (they name the store's address or file). Anything else (an unknown, foreign
// or expired id) is TaskNotFound.
func (g *Gateway) taskError(x *Exchange, id string, err error) *jsonrpc.Error {
	if !errors.Is(err, tasks.ErrStore) && !errors.Is(err, tasks.ErrClosed) {
		return notFound(id)
	}
	g.log.Warn("task store unavailable", "method", x.Msg.Method, "task_id", id, "correlation_id", x.CorrID, "error", err.Error())
	return storeUnavailable(id)
}

func storeUnavailable(id string) *jsonrpc.Error {
	return jsonrpc.NewError(jsonrpc.CodeCapacityExceeded, "StoreUnavailable",
		fmt.Sprintf("Tollgate's task store is unavailable, so task %q cannot be read or changed now; the task is not lost: retry shortly", id),
		"taskId", id, "retry_after", 1)
}

// modernTaskError is taskError as a 2026-07-28 answer: StoreUnavailable is HTTP 503.
func (g *Gateway) modernTaskError(x *Exchange, id string, err error) Result {
	e := g.taskError(x, id, err)
	r := modernError(x, e)
	if e.Name() == "StoreUnavailable" {
		r.Status = http.StatusServiceUnavailable
	}
	return r
}

// isTollgateTask: ids Tollgate creates start with tg_ (docs/contract.md §2), but an upstream may use
// the prefix too; an id this session created upstream stays the upstream's.
func (g *Gateway) isTollgateTask(x *Exchange, id string) bool {
	if x.Session != nil && x.Session.OwnsUpstreamTask(id) {
		return false
	}
	return strings.HasPrefix(id, tasks.IDPrefix)
}

// tollgateTask reads params.taskId of a tasks/* request. For an id that is not Tollgate's it
// returns how to answer instead: routed upstream, or an error.
func (g *Gateway) tollgateTask(x *Exchange) (string, *Result) {
	id, e := taskIDParam(x)
	if e != nil {
		r := ReplyError(x, e)
		return "", &r
	}
	if !g.isTollgateTask(x, id) {
		r := g.upstreamTask(x, id)
		return "", &r
	}
	return id, nil
}

// upstreamTask routes a non-Tollgate task id to the upstream, but only for the session that
// created it (REQ-CORE-007 F-006, docs/contract.md §2 routing).
func (g *Gateway) upstreamTask(x *Exchange, id string) Result {
	if x.Session == nil || !x.Session.OwnsUpstreamTask(id) {
		return ReplyError(x, notFound(id))
	}
	return Passthrough
}

func (g *Gateway) tasksGet(ctx context.Context, x *Exchange) Result {
	id, other := g.tollgateTask(x)
	if other != nil {
		return *other
	}
	t, err := g.d.Tasks.Get(ctx, owner(x), id)
	if err != nil {
		return ReplyError(x, g.taskError(x, id, err))
	}
	return ReplyResult(x, t.WireJSON())
}

func (g *Gateway) tasksCancel(ctx context.Context, x *Exchange) Result {
	id, other := g.tollgateTask(x)
	if other != nil {
		return *other
	}
	t, err := g.d.Tasks.Cancel(ctx, owner(x), id)
	switch {
	case errors.Is(err, tasks.ErrTerminal):
		return ReplyError(x, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "TaskTerminal",
			fmt.Sprintf("Invalid params: task %q is already %s and cannot be cancelled", id, t.State.Wire()), "taskId", id))
	case err != nil:
		return ReplyError(x, g.taskError(x, id, err))
	}
	return ReplyResult(x, t.WireJSON())
}

// tasksResult blocks until the task is terminal (spec: tasks/result MUST block), then returns
// exactly what the tool call returned, with the related-task _meta.
func (g *Gateway) tasksResult(ctx context.Context, x *Exchange) Result {
	id, other := g.tollgateTask(x)
	if other != nil {
		return *other
	}
	own := owner(x)
	t, err := g.d.Tasks.Get(ctx, own, id)
	if err != nil {
		return ReplyError(x, g.taskError(x, id, err))
	}
	return Result{Wait: func(ctx context.Context, emit func([]byte) bool) []byte {
		if t.AskRequester && t.State == tasks.AwaitingApproval {
			g.askRequester(t, own, emit) // input_required: the question travels on this stream
		}
		// and so do the upstream's questions during the call
		// and so do the upstream's progress and log messages (spec 2025-11-25 tasks)
		note := func(n tasks.Note) bool {
			b := taskNote(t, n)
			return b == nil || emit(b)
		}
		st, err := g.d.Tasks.Follow(ctx, own, id, tasks.Relay{Ask: onStream(id, emit), Note: note})
		return g.outcomeReply(x, id, st.Result, st.Error, err)
	}}
}

// withRelatedTask adds _meta["io.modelcontextprotocol/related-task"] to a result object,
// keeping any _meta the tool set.
func withRelatedTask(result []byte, id string) []byte {
	rel := []byte(`{"taskId":` + string(rawString(id)) + `}`)
	meta := jsonrpc.Member(result, "_meta")
	if meta == nil || string(meta) == "null" {
		meta = []byte(`{}`)
	}
	nm, err := jsonrpc.Replace(meta, tasks.RelatedTaskKey, rel)
	if err != nil {
		return result
	}
	out, err := jsonrpc.Replace(result, "_meta", nm)
	if err != nil {
		return result
	}
	return out
}

// listPage is how many Tollgate tasks one tasks/list page holds.
const listPage = 50

type listCursor struct {
	TG int             `json:"tg,omitempty"` // offset into this caller's Tollgate tasks
	Up json.RawMessage `json:"up,omitempty"` // upstream cursor once Tollgate's tasks are exhausted
	Ph int             `json:"ph"`           // 0 = Tollgate tasks, 1 = upstream tasks
}

// maxUpstreamCursor bounds the upstream cursor Tollgate carries inside its own; a longer one
// ends paging (with a WARN) rather than producing a cursor the next request would refuse.
const maxUpstreamCursor = 8 << 10

// maxCursor bounds a decoded cursor: the upstream cursor plus Tollgate's few fields.
const maxCursor = maxUpstreamCursor + 256

func encodeCursor(c listCursor) string {
	b, _ := jsonrpc.Marshal(c) // no HTML escaping: the upstream cursor keeps its length
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (listCursor, bool) {
	var c listCursor
	if base64.RawURLEncoding.DecodedLen(len(s)) > maxCursor {
		return c, false
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || json.Unmarshal(b, &c) != nil || c.TG < 0 || c.Ph < 0 || c.Ph > 1 {
		return c, false
	}
	return c, true
}

// tasksList merges this caller's Tollgate tasks with the upstream's (F-006.5) behind one
// opaque cursor.
func (g *Gateway) tasksList(ctx context.Context, x *Exchange) Result {
	var p struct {
		Cursor *string `json:"cursor"`
	}
	if x.Msg.Params != nil {
		_ = json.Unmarshal(x.Msg.Params, &p)
	}
	cur := listCursor{}
	if p.Cursor != nil {
		c, ok := decodeCursor(*p.Cursor)
		if !ok {
			return ReplyError(x, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "InvalidCursor", "Invalid params: invalid cursor"))
		}
		cur = c
	}
	var items [][]byte
	next := ""
	if cur.Ph == 0 {
		mine, err := g.d.Tasks.List(ctx, owner(x), tasks.Filter{IncludeFinished: true})
		if err != nil {
			return ReplyError(x, jsonrpc.NewError(jsonrpc.CodeInternalError, "TaskListFailed", "Listing tasks failed"))
		}
		sort.Slice(mine, func(i, j int) bool { return mine[i].CreatedAt.Before(mine[j].CreatedAt) })
		if owner(x) == "" {
			mine = nil
		}
		if cur.TG > len(mine) {
			return ReplyError(x, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "InvalidCursor", "Invalid params: invalid cursor"))
		}
		end := min(cur.TG+listPage, len(mine))
		for _, t := range mine[cur.TG:end] {
			items = append(items, t.WireJSON())
		}
		if end < len(mine) {
			next = encodeCursor(listCursor{TG: end})
		} else if g.ann.upstreamTasks.Load() {
			// Tollgate's tasks are exhausted: the upstream's first page completes this one, so
			// no page is empty while tasks remain (a client reading one page sees both kinds).
			cur = listCursor{Ph: 1}
		}
	}
	if cur.Ph == 1 {
		up, upNext, err := g.upstreamTaskList(ctx, x, cur.Up)
		if err != nil {
			g.log.Warn("upstream tasks/list failed; returning Tollgate tasks only", "error", err.Error())
		}
		items = append(items, up...)
		if upNext != nil {
			next = encodeCursor(listCursor{Ph: 1, Up: upNext})
		}
	}
	out := []byte(`{"tasks":`)
	out = jsonrpc.AppendArray(out, items)
	if next != "" {
		out = append(out, `,"nextCursor":`...)
		out = append(out, rawString(next)...)
	}
	out = append(out, '}')
	return ReplyResult(x, out)
}

func (g *Gateway) upstreamTaskList(ctx context.Context, x *Exchange, cursor json.RawMessage) ([][]byte, json.RawMessage, error) {
	if x.Session == nil || x.Session.Local {
		return nil, nil, nil
	}
	params := json.RawMessage(`{}`)
	if cursor != nil {
		params = json.RawMessage(`{"cursor":` + string(cursor) + `}`)
	}
	hdr := execution.CallerHeaders(execution.CaptureHeaders(x.HTTP.Header), x.Session.ID)
	rep, err := g.d.Upstream.Call(ctx, hdr, jsonrpc.Request(json.RawMessage(`"tollgate-tasks-list"`), "tasks/list", params), nil)
	if err != nil {
		return nil, nil, err
	}
	if rep.Msg.Error != nil {
		return nil, nil, fmt.Errorf("upstream error %s", rep.Msg.Error)
	}
	elems, err := jsonrpc.Elements(jsonrpc.Member(rep.Msg.Result, "tasks"))
	if err != nil {
		return nil, nil, err
	}
	var out [][]byte
	for _, e := range elems {
		// Only tasks this session created upstream are shown (ownership binding).
		var t struct {
			TaskID string `json:"taskId"`
		}
		if json.Unmarshal(e, &t) == nil {
			x.Session.BindUpstreamTask(t.TaskID) // the upstream scoped the list to this session
			out = append(out, e)
		}
	}
	next := jsonrpc.Member(rep.Msg.Result, "nextCursor")
	if string(next) == "null" {
		next = nil
	}
	if len(next) > maxUpstreamCursor {
		g.log.Warn("upstream tasks/list cursor too long to carry; listing stops here", "bytes", len(next))
		next = nil
	}
	return out, next, nil
}

// resourcesList appends Tollgate's diagrams resource to the upstream's list.
func (g *Gateway) resourcesList(_ context.Context, x *Exchange) Result {
	return Result{Forward: &Forward{Transform: func(x *Exchange, resp *jsonrpc.Message) []byte {
		if resp.Result == nil || !lastPage(resp.Result) {
			return nil
		}
		elems, err := jsonrpc.Elements(jsonrpc.Member(resp.Result, "resources"))
		if err != nil {
			return nil
		}
		elems = append(elems, gwtools.DiagramsResource())
		res, err := jsonrpc.Replace(resp.Result, "resources", jsonrpc.AppendArray(nil, elems))
		if err != nil {
			return nil
		}
		return resp.WithResult(res)
	}}}
}

// resourcesRead serves tollgate://diagrams locally; anything else goes upstream.
func (g *Gateway) resourcesRead(_ context.Context, x *Exchange) Result {
	var p struct {
		URI string `json:"uri"`
	}
	if json.Unmarshal(x.Msg.Params, &p) != nil || p.URI != gwtools.DiagramsURI {
		return Passthrough
	}
	return ReplyResult(x, gwtools.DiagramsReadResult())
}

// promotedResult is the plain tool result a non-task client gets in sync_approval "promote"
// mode: it names the task and how to follow it.
func promotedResult(t *tasks.Task) []byte {
	text := fmt.Sprintf("This call needs human approval and is now task %s (%s). "+
		"Call tollgate_await_activity to wait for the decision, then tollgate_get_task_result with "+
		`{"task_id":"%s"} to get the tool's result.`, t.ID, t.StatusMessage, t.ID)
	sc := fmt.Sprintf(`{"taskId":%s,"status":%s,"statusMessage":%s,"next":["tollgate_await_activity","tollgate_get_task_result"]}`,
		rawString(t.ID), rawString(t.WireStatus()), rawString(t.StatusMessage))
	return handoffResult(t.ID, text, sc)
}

// handoffResult is the plain tool result that hands a call over to task id, for a client
// without tasks: text for the model, structuredContent for programs, and the related-task
// _meta (spec 2025-11-25 tasks).
func handoffResult(id, text, structured string) []byte {
	return []byte(`{"content":[{"type":"text","text":` + string(rawString(text)) + `}],"structuredContent":` + structured +
		`,"_meta":{"` + tasks.RelatedTaskKey + `":{"taskId":` + string(rawString(id)) + `}}}`)
}
