package intercept

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/tollgate-mcp/tollgate/internal/era"
	"github.com/tollgate-mcp/tollgate/internal/execution"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/sse"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

// subscriptions/listen (spec 2026-07-28 basic/patterns/subscriptions): the upstream's stream is
// relayed, and Tollgate adds what only it knows: notifications/tools/list_changed when a
// reload changed governance of the listed tools, and notifications/tasks for its own tg_
// tasks (tasks extension "Task Status Notifications").

const metaSubscriptionID = "io.modelcontextprotocol/subscriptionId"

// maxListeners bounds the open listen streams Tollgate adds notifications to.
const maxListeners = 10000

// listenerQueue is how many of Tollgate's own notifications may wait for one slow stream;
// beyond it they are dropped (a client that polls still sees every state).
const listenerQueue = 64

type listener struct {
	owner string
	tools bool
	tasks map[string]bool // Tollgate task ids this stream follows
}

type note struct {
	method string
	params []byte
}

type listeners struct {
	mu   sync.Mutex
	next int
	m    map[int]*listener
	q    map[int]chan note
}

func (l *listeners) add(ls *listener) (int, chan note, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.m) >= maxListeners {
		return 0, nil, false
	}
	if l.m == nil {
		l.m, l.q = map[int]*listener{}, map[int]chan note{}
	}
	l.next++
	ch := make(chan note, listenerQueue)
	l.m[l.next], l.q[l.next] = ls, ch
	return l.next, ch, true
}

func (l *listeners) remove(id int) {
	l.mu.Lock()
	delete(l.m, id)
	delete(l.q, id)
	l.mu.Unlock()
}

func (l *listeners) publish(match func(*listener) bool, n note) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, ls := range l.m {
		if match(ls) {
			select {
			case l.q[id] <- n:
			default: // slow stream: drop rather than block task changes
			}
		}
	}
}

// NotifyToolsChanged tells every modern listen stream that asked for toolsListChanged that
// Tollgate's view of the tools changed (after a reload).
func (g *Gateway) NotifyToolsChanged() {
	g.modern.listen.publish(func(ls *listener) bool { return ls.tools }, note{method: "notifications/tools/list_changed", params: []byte(`{}`)})
}

// OnModernTaskChange sends notifications/tasks with the DetailedTask to the listen streams of
// the task's owner that follow it (tasks.Manager subscriber).
func (g *Gateway) OnModernTaskChange(tr tasks.Transition) {
	if tr.Created() {
		return // the CreateTaskResult carried it
	}
	t := tr.Task
	params := t.StatusNotification(g.inputRequests(t))
	g.modern.listen.publish(func(ls *listener) bool { return tasks.MayAccess(ls.owner, t.Owner) && ls.tasks[t.ID] }, note{method: "notifications/tasks", params: params})
}

type listenFilter struct {
	ToolsListChanged bool     `json:"toolsListChanged"`
	TaskIDs          []string `json:"taskIds"`
}

// modernListen serves subscriptions/listen.
func (g *Gateway) modernListen(ctx context.Context, x *Exchange) Result {
	var p struct {
		Notifications json.RawMessage `json:"notifications"`
	}
	_ = json.Unmarshal(x.Msg.Params, &p)
	var f listenFilter
	_ = json.Unmarshal(p.Notifications, &f)
	if len(f.TaskIDs) > 0 && !x.Modern.Tasks {
		// tasks extension "Task Status Notifications": MUST return -32021.
		return modernError(x, era.MissingTasksCapability("Missing required client capability: task status notifications need the "+era.TasksExtension+" extension declared in _meta"))
	}
	if !strings.Contains(x.HTTP.Header.Get("Accept"), "text/event-stream") {
		return modernError(x, jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "InvalidRequest",
			"Invalid request: subscriptions/listen answers with an event stream; send Accept: text/event-stream"))
	}
	own := owner(x)
	ls := &listener{owner: own, tools: f.ToolsListChanged, tasks: map[string]bool{}}
	var upIDs []string
	for _, id := range f.TaskIDs {
		if _, bound := g.upstreamTaskOwner(ctx, id); !bound && strings.HasPrefix(id, tasks.IDPrefix) {
			if _, err := g.d.Tasks.Get(ctx, own, id); err == nil {
				ls.tasks[id] = true
			}
			continue // a tg_ id the caller does not own is neither followed nor passed on
		}
		upIDs = append(upIDs, id)
	}
	lid, queue, ok := g.modern.listen.add(ls)
	if !ok {
		return modernError(x, jsonrpc.NewError(jsonrpc.CodeCapacityExceeded, "CapacityExceeded",
			"Too many open subscriptions/listen streams; try again later"))
	}
	modernUp := g.br.upstreamModern(ctx)
	return Result{Wait: func(ctx context.Context, emit func([]byte) bool) []byte {
		defer g.modern.listen.remove(lid)
		// The relay emits on this request's stream: it must end before Wait returns, and
		// cancel (deferred after, so run first) is what ends it.
		var relay sync.WaitGroup
		defer relay.Wait()
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		upDone := make(chan []byte, 1)
		if modernUp {
			body, err := listenBody(x.Msg, p.Notifications, upIDs)
			if err != nil {
				return jsonrpc.ErrorResponse(x.Msg.ID, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "InvalidParams", "Invalid params: "+err.Error()))
			}
			relay.Go(func() { g.relayListen(ctx, x, body, ls, emit, upDone) })
		} else if !emit(g.ownAck(x, ls)) {
			return nil
		}
		for {
			select {
			case <-ctx.Done():
				return nil
			case final := <-upDone:
				return final
			case n := <-queue:
				if !emit(jsonrpc.Notification(n.method, withSubscription(n.params, x.Msg.ID))) {
					return nil
				}
			}
		}
	}}
}

// listenBody is the listen request for the upstream: the caller's, with Tollgate's own task
// ids taken out of notifications.taskIds.
func listenBody(m *jsonrpc.Message, notifications json.RawMessage, upIDs []string) ([]byte, error) {
	if jsonrpc.Member(notifications, "taskIds") == nil {
		return m.Raw, nil
	}
	if upIDs == nil {
		upIDs = []string{}
	}
	ids, _ := jsonrpc.Marshal(upIDs)
	n, err := jsonrpc.Replace(notifications, "taskIds", ids)
	if err != nil {
		return nil, err
	}
	params, err := jsonrpc.Replace(m.Params, "notifications", n)
	if err != nil {
		return nil, err
	}
	return jsonrpc.Request(m.ID, m.Method, params), nil
}

// relayListen opens the upstream's listen stream and relays it, merging Tollgate's part into
// the acknowledgement. The upstream's final response (a graceful end) goes to done.
func (g *Gateway) relayListen(ctx context.Context, x *Exchange, body []byte, ls *listener, emit func([]byte) bool, done chan<- []byte) {
	hdr := execution.CaptureHeaders(x.HTTP.Header)
	hdr = modernHeaders(hdr, x.Msg.Method, "")
	hdr.Set("Accept", "application/json, text/event-stream")
	resp, err := g.d.Upstream.Send(ctx, http.MethodPost, hdr, body)
	if err != nil {
		if ctx.Err() == nil {
			e := jsonrpc.NewError(jsonrpc.CodeUpstreamUnreachable, "UpstreamUnreachable", "Upstream MCP server did not open the subscription: "+err.Error())
			done <- jsonrpc.ErrorResponse(x.Msg.ID, e.WithCorrelation(x.CorrID))
		}
		return
	}
	defer resp.Body.Close()
	if !upstream.IsEventStream(resp.Header) {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if m, err := jsonrpc.Parse(b); err == nil && m.Kind == jsonrpc.KindResponse {
			done <- m.WithID(x.Msg.ID)
			return
		}
		e := jsonrpc.NewError(jsonrpc.CodeUpstreamUnreachable, "UpstreamUnreachable", "Upstream MCP server answered subscriptions/listen without a stream")
		done <- jsonrpc.ErrorResponse(x.Msg.ID, e.WithCorrelation(x.CorrID))
		return
	}
	rd := sse.NewReader(resp.Body, 0)
	defer rd.Close()
	for {
		ev, err := rd.Next()
		if err != nil {
			if ctx.Err() == nil {
				done <- nil // the upstream dropped the stream: so does Tollgate
			}
			return
		}
		if !ev.HasData {
			continue
		}
		m, err := jsonrpc.Parse(ev.Data)
		if err != nil {
			continue
		}
		out := ev.Data
		switch {
		case m.Kind == jsonrpc.KindResponse:
			done <- m.WithID(x.Msg.ID)
			return
		case m.Method == "notifications/subscriptions/acknowledged":
			out = mergeAck(m, ls)
		}
		if !emit(out) {
			done <- nil
			return
		}
	}
}

// mergeAck adds what Tollgate agreed to honour to the upstream's acknowledgement.
func mergeAck(m *jsonrpc.Message, ls *listener) []byte {
	n := jsonrpc.Member(m.Params, "notifications")
	if len(n) == 0 || string(n) == "null" {
		n = []byte(`{}`)
	}
	var err error
	if ls.tools {
		if n, err = jsonrpc.Replace(n, "toolsListChanged", []byte(`true`)); err != nil {
			return m.Raw
		}
	}
	if len(ls.tasks) > 0 {
		var ids []string
		_ = json.Unmarshal(jsonrpc.Member(n, "taskIds"), &ids)
		for id := range ls.tasks {
			ids = append(ids, id)
		}
		b, _ := jsonrpc.Marshal(ids)
		if n, err = jsonrpc.Replace(n, "taskIds", b); err != nil {
			return m.Raw
		}
	}
	params, err := jsonrpc.Replace(m.Params, "notifications", n)
	if err != nil {
		return m.Raw
	}
	return jsonrpc.Notification(m.Method, params)
}

// ownAck is the acknowledgement Tollgate sends itself when no upstream stream is relayed.
func (g *Gateway) ownAck(x *Exchange, ls *listener) []byte {
	n := map[string]any{}
	if ls.tools {
		n["toolsListChanged"] = true
	}
	if len(ls.tasks) > 0 {
		ids := make([]string, 0, len(ls.tasks))
		for id := range ls.tasks {
			ids = append(ids, id)
		}
		n["taskIds"] = ids
	}
	b, _ := jsonrpc.Marshal(map[string]any{"notifications": n})
	return jsonrpc.Notification("notifications/subscriptions/acknowledged", withSubscription(b, x.Msg.ID))
}

// withSubscription sets _meta["io.modelcontextprotocol/subscriptionId"] on notification params.
func withSubscription(params []byte, id json.RawMessage) []byte {
	meta := jsonrpc.Member(params, "_meta")
	if len(meta) == 0 || string(meta) == "null" {
		meta = []byte(`{}`)
	}
	nm, err := jsonrpc.Replace(meta, metaSubscriptionID, id)
	if err != nil {
		return params
	}
	out, err := jsonrpc.Replace(params, "_meta", nm)
	if err != nil {
		return params
	}
	return out
}
