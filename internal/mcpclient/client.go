// Package mcpclient is the small MCP client behind `tollgate call`: raw JSON-RPC over the
// streamable-HTTP endpoint (no SDK: Tollgate's own code speaks raw JSON-RPC), in either
// protocol era, that makes one tool call and follows it through governance — forwarded,
// denied, or held for a human — until there is an outcome.
//
// 2025-11-25 ("legacy"): initialize, a session, notifications/initialized, then the call; the
// session is ended with DELETE. 2026-07-28 ("modern"): stateless, every request carries the
// protocol _meta and the mirrored MCP-Protocol-Version / Mcp-Method / Mcp-Name headers.
package mcpclient

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Era is the protocol era a Client speaks.
type Era string

// The two eras Tollgate serves on one endpoint (docs/eras.md).
const (
	Legacy Era = "legacy" // 2025-11-25: sessions
	Modern Era = "modern" // 2026-07-28: stateless
)

// Protocol versions and _meta keys the client uses.
const (
	LegacyVersion  = "2025-11-25"
	ModernVersion  = "2026-07-28"
	TasksExtension = "io.modelcontextprotocol/tasks"
	RelatedTaskKey = "io.modelcontextprotocol/related-task"
	// ApprovalKey is Tollgate's own _meta member on a held call's progress notifications and
	// on its settled-undecided result: the task and the console URL.
	ApprovalKey = "io.tollgate/approval"
)

// maxReply bounds one reply body (a JSON body or one event of a stream).
const maxReply = 64 << 20

// Options say where and how to call.
type Options struct {
	URL    string      // the MCP endpoint, e.g. http://127.0.0.1:7467/mcp
	Era    Era         // Legacy (default) or Modern
	Header http.Header // added to every request: Authorization, an identity header
	HTTP   *http.Client
	// Task makes a task-augmented call (params.task in 2025-11-25, the tasks extension in
	// 2026-07-28) and polls the task until it finishes.
	Task bool
	// TTL is the task's requested TTL (0 = the server's default).
	TTL time.Duration
	// MaxPoll caps the interval between two polls of a task (0 = 5s); the task's own
	// pollInterval is used when it is shorter.
	MaxPoll time.Duration
}

// RPCError is a JSON-RPC error object as the server sent it.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string { return fmt.Sprintf("%s (%d)", e.Message, e.Code) }

// Name is data.error, Tollgate's stable error name ("" when absent).
func (e *RPCError) Name() string { return e.DataString("error") }

// DataString returns data[key] when it is a string.
func (e *RPCError) DataString(key string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(e.Data, &m) != nil {
		return ""
	}
	var s string
	if json.Unmarshal(m[key], &s) != nil {
		return ""
	}
	return s
}

// EventKind says what an Event reports.
type EventKind int

const (
	// Held: the call waits for a human decision on task TaskID (approve it in the console
	// at ConsoleURL when known, or with `tollgate approvals approve`). Reported once per task.
	Held EventKind = iota + 1
	// StillWaiting: the server's hold budget ran out undecided; the client keeps waiting on
	// the same task (2025-11-25: the same call again, which attaches to it; 2026-07-28: tasks/get).
	StillWaiting
	// Status: the task's status changed (task mode, or polling after a hold).
	Status
)

// Event is one thing worth telling the user while a call is under way.
type Event struct {
	Kind       EventKind
	TaskID     string
	ConsoleURL string
	Status     string
	Message    string
}

// Outcome is how a call ended: the tool's result, or the JSON-RPC error that ended it (a
// denial, a rejection, a timeout, an upstream error), and the task it went through.
type Outcome struct {
	Result json.RawMessage // a CallToolResult; nil when Err is set
	Err    *RPCError
	TaskID string
}

// Call calls tool with args (a JSON object, nil for none) and waits for its outcome until ctx
// ends; on hears what happens meanwhile (nil: nothing). The error is for what kept the call
// from getting an answer at all (connection, protocol, ctx).
func Call(ctx context.Context, o Options, tool string, args json.RawMessage, on func(Event)) (*Outcome, error) {
	if on == nil {
		on = func(Event) {}
	}
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	c := &conn{o: o, hc: o.HTTP, on: on}
	if c.hc == nil {
		c.hc = &http.Client{}
	}
	switch o.Era {
	case "":
		c.o.Era = Legacy
	case Legacy, Modern:
	default:
		return nil, fmt.Errorf("unknown era %q (legacy or modern)", o.Era)
	}
	if c.o.Era == Legacy {
		if err := c.initialize(ctx); err != nil {
			return nil, err
		}
		defer c.end()
	}
	if o.Task {
		return c.callTask(ctx, tool, args)
	}
	return c.callHeld(ctx, tool, args)
}

type conn struct {
	o       Options
	hc      *http.Client
	on      func(Event)
	session string
	nextID  int
	held    string // the task already reported as Held
}

// reply is one JSON-RPC response.
type reply struct {
	Result json.RawMessage `json:"result"`
	Error  *RPCError       `json:"error"`
}

// note is a notification that arrived on a request's event stream.
type note struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

func (c *conn) initialize(ctx context.Context) error {
	r, hdr, err := c.post(ctx, "initialize", map[string]any{
		"protocolVersion": LegacyVersion,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "tollgate-call", "version": "1"},
	}, false, nil)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	if r.Error != nil {
		return fmt.Errorf("initialize: %w", r.Error)
	}
	c.session = hdr.Get("Mcp-Session-Id")
	return c.notify(ctx, "notifications/initialized")
}

// end ends the session (best effort, bounded).
func (c *conn) end() {
	if c.session == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.o.URL, nil)
	if err != nil {
		return
	}
	c.headers(req.Header, "", nil)
	if resp, err := c.hc.Do(req); err == nil {
		resp.Body.Close()
	}
}

func (c *conn) notify(ctx context.Context, method string) error {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.o.URL, bytes.NewReader(b))
	if err != nil {
		return err
	}
	c.headers(req.Header, method, nil)
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxReply))
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s: HTTP %d", method, resp.StatusCode)
	}
	return nil
}

func (c *conn) headers(h http.Header, method string, params map[string]any) {
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	for k, v := range c.o.Header {
		h[k] = v
	}
	switch {
	case c.o.Era == Modern:
		// spec 2026-07-28 transports "Request Metadata": the headers mirror the body.
		h.Set("MCP-Protocol-Version", ModernVersion)
		h.Set("Mcp-Method", method)
		for _, k := range []string{"name", "uri", "taskId"} {
			if v, ok := params[k].(string); ok {
				h.Set("Mcp-Name", v)
			}
		}
	case c.session != "":
		h.Set("Mcp-Session-Id", c.session)
		h.Set("MCP-Protocol-Version", LegacyVersion)
	}
}

// modernMeta is the _meta every 2026-07-28 request carries; tasks declares the tasks extension.
func modernMeta(tasks bool) map[string]any {
	caps := map[string]any{}
	if tasks {
		caps["extensions"] = map[string]any{TasksExtension: map[string]any{}}
	}
	return map[string]any{
		"io.modelcontextprotocol/protocolVersion":    ModernVersion,
		"io.modelcontextprotocol/clientCapabilities": caps,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "tollgate-call", "version": "1"},
	}
}

// post sends one request and returns its response; notifications that arrive on the reply's
// event stream go to onNote. tasks declares the tasks extension (2026-07-28).
func (c *conn) post(ctx context.Context, method string, params map[string]any, tasks bool, onNote func(note)) (*reply, http.Header, error) {
	if c.o.Era == Modern {
		meta, _ := params["_meta"].(map[string]any)
		m := modernMeta(tasks)
		for k, v := range meta {
			m[k] = v
		}
		params["_meta"] = m
	}
	c.nextID++
	id := c.nextID
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.o.URL, bytes.NewReader(b))
	if err != nil {
		return nil, nil, err
	}
	c.headers(req.Header, method, params)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	var r *reply
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		r, err = readStream(resp.Body, id, onNote)
	} else {
		r, err = readJSON(resp.Body)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: HTTP %d: %w", method, resp.StatusCode, err)
	}
	return r, resp.Header, nil
}

func readJSON(body io.Reader) (*reply, error) {
	b, err := io.ReadAll(io.LimitReader(body, maxReply))
	if err != nil {
		return nil, err
	}
	var r reply
	if err := json.Unmarshal(b, &r); err != nil || (r.Result == nil && r.Error == nil) {
		return nil, fmt.Errorf("not a JSON-RPC response: %s", clip(b))
	}
	return &r, nil
}

// readStream reads an event stream until the response to request id (spec 2025-11-25
// transports: the server may send requests and notifications before it).
func readStream(body io.Reader, id int, onNote func(note)) (*reply, error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), maxReply)
	var data []string
	dispatch := func() (*reply, bool) {
		if len(data) == 0 {
			return nil, false
		}
		b := []byte(strings.Join(data, "\n"))
		data = data[:0]
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			reply
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(b, &m) != nil {
			return nil, false
		}
		switch {
		case m.Method != "" && len(m.ID) == 0:
			if onNote != nil {
				onNote(note{Method: m.Method, Params: m.Params})
			}
		case m.Method == "" && string(m.ID) == fmt.Sprint(id) && (m.Result != nil || m.Error != nil):
			return &m.reply, true
		}
		// A server→client request: this client declared no capabilities, so none is
		// expected; it is left unanswered.
		return nil, false
	}
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		switch {
		case line == "":
			if r, ok := dispatch(); ok {
				return r, nil
			}
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	if r, ok := dispatch(); ok {
		return r, nil
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, errors.New("the event stream ended before the response")
}

func clip(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// approvalMeta is Tollgate's io.tollgate/approval member of a _meta object.
type approvalMeta struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	ConsoleURL    string `json:"consoleUrl"`
	Retry         string `json:"retry"`
}

func metaOf(obj json.RawMessage) (approval approvalMeta, related string) {
	var m struct {
		Meta struct {
			Approval *approvalMeta `json:"io.tollgate/approval"`
			Related  *struct {
				TaskID string `json:"taskId"`
			} `json:"io.modelcontextprotocol/related-task"`
		} `json:"_meta"`
	}
	_ = json.Unmarshal(obj, &m)
	if m.Meta.Approval != nil {
		approval = *m.Meta.Approval
	}
	if m.Meta.Related != nil {
		related = m.Meta.Related.TaskID
	}
	return approval, related
}

func (c *conn) announce(id, consoleURL, msg string) {
	if id == "" || id == c.held {
		return
	}
	c.held = id
	c.on(Event{Kind: Held, TaskID: id, ConsoleURL: consoleURL, Message: msg})
}

// callHeld makes a plain call. A call that needs approval is held by Tollgate
// (tasks.sync_approval: hold): its progress notifications name the task at once; when the hold
// budget runs out undecided the answer is a result naming the task (io.tollgate/approval), and
// the client keeps waiting on that same task.
func (c *conn) callHeld(ctx context.Context, tool string, args json.RawMessage) (*Outcome, error) {
	for {
		params := map[string]any{"name": tool, "arguments": args,
			"_meta": map[string]any{"progressToken": fmt.Sprintf("tollgate-call-%d", c.nextID+1)}}
		r, _, err := c.post(ctx, "tools/call", params, false, func(n note) {
			if n.Method != "notifications/progress" {
				return
			}
			ap, related := metaOf(n.Params)
			var p struct {
				Message string `json:"message"`
			}
			_ = json.Unmarshal(n.Params, &p)
			c.announce(cmp.Or(ap.TaskID, related), ap.ConsoleURL, p.Message)
		})
		if err != nil {
			return nil, err
		}
		if r.Error != nil {
			return &Outcome{Err: r.Error, TaskID: cmp.Or(r.Error.DataString("taskId"), c.held)}, nil
		}
		ap, related := metaOf(r.Result)
		if ap.TaskID == "" || ap.Retry == "" {
			return &Outcome{Result: r.Result, TaskID: cmp.Or(related, c.held)}, nil
		}
		// Settled undecided: the task goes on.
		c.announce(ap.TaskID, ap.ConsoleURL, ap.StatusMessage)
		c.on(Event{Kind: StillWaiting, TaskID: ap.TaskID, Status: ap.Status, Message: ap.StatusMessage})
		if c.o.Era == Modern {
			// An anonymous 2026-07-28 caller's every call is a task of its own, so a retry
			// would ask for a second approval; the task id is enough to follow this one.
			return c.poll(ctx, ap.TaskID, ap.Status)
		}
		// 2025-11-25: the same call again attaches to the same task (docs/architecture.md).
	}
}

// callTask makes a task-augmented call and polls the task.
func (c *conn) callTask(ctx context.Context, tool string, args json.RawMessage) (*Outcome, error) {
	params := map[string]any{"name": tool, "arguments": args}
	if c.o.Era == Legacy {
		task := map[string]any{}
		if c.o.TTL > 0 {
			task["ttl"] = c.o.TTL.Milliseconds()
		}
		params["task"] = task
	}
	r, _, err := c.post(ctx, "tools/call", params, true, nil)
	if err != nil {
		return nil, err
	}
	if r.Error != nil {
		return &Outcome{Err: r.Error, TaskID: r.Error.DataString("taskId")}, nil
	}
	t, ok := taskOf(r.Result, c.o.Era)
	if !ok { // answered at once (a forwarded call the upstream ran without a task)
		_, related := metaOf(r.Result)
		return &Outcome{Result: r.Result, TaskID: related}, nil
	}
	c.status(t)
	return c.poll(ctx, t.TaskID, t.Status)
}

// wireTask is a task as tasks/get answers it (2025-11-25 flat task; 2026-07-28 DetailedTask
// with the outcome inlined).
type wireTask struct {
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage"`
	PollInterval   int64           `json:"pollInterval"`
	PollIntervalMs int64           `json:"pollIntervalMs"`
	Result         json.RawMessage `json:"result"`
	Error          *RPCError       `json:"error"`
}

// taskOf finds the task in a CreateTaskResult.
func taskOf(res json.RawMessage, era Era) (wireTask, bool) {
	var t wireTask
	if era == Legacy {
		var w struct {
			Task *wireTask `json:"task"`
		}
		if json.Unmarshal(res, &w) != nil || w.Task == nil || w.Task.TaskID == "" {
			return t, false
		}
		return *w.Task, true
	}
	var w struct {
		ResultType string `json:"resultType"`
		wireTask
	}
	if json.Unmarshal(res, &w) != nil || w.ResultType != "task" || w.TaskID == "" {
		return t, false
	}
	return w.wireTask, true
}

// status reports a task's status: Held while it awaits a human approval, else Status.
func (c *conn) status(t wireTask) {
	if t.Status == "working" && strings.Contains(strings.ToLower(t.StatusMessage), "approval") {
		c.announce(t.TaskID, "", t.StatusMessage)
		return
	}
	c.on(Event{Kind: Status, TaskID: t.TaskID, Status: t.Status, Message: t.StatusMessage})
}

func terminal(status string) bool {
	return status == "completed" || status == "failed" || status == "cancelled"
}

// poll follows task id with tasks/get until it finishes, then returns its outcome (2025-11-25:
// tasks/result; 2026-07-28: inlined in tasks/get).
func (c *conn) poll(ctx context.Context, id, last string) (*Outcome, error) {
	maxPoll := c.o.MaxPoll
	if maxPoll <= 0 {
		maxPoll = 5 * time.Second
	}
	lastMsg := ""
	for {
		r, _, err := c.post(ctx, "tasks/get", map[string]any{"taskId": id}, true, nil)
		if err != nil {
			return nil, err
		}
		if r.Error != nil {
			return &Outcome{Err: r.Error, TaskID: id}, nil
		}
		var t wireTask
		if err := json.Unmarshal(r.Result, &t); err != nil {
			return nil, fmt.Errorf("tasks/get: %w", err)
		}
		if t.Status != last || t.StatusMessage != lastMsg {
			c.status(t)
			last, lastMsg = t.Status, t.StatusMessage
		}
		if terminal(t.Status) {
			return c.outcome(ctx, id, t)
		}
		wait := time.Duration(cmp.Or(t.PollIntervalMs, t.PollInterval)) * time.Millisecond
		if wait <= 0 || wait > maxPoll {
			wait = maxPoll
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-timer.C:
		}
	}
}

func (c *conn) outcome(ctx context.Context, id string, t wireTask) (*Outcome, error) {
	if c.o.Era == Legacy {
		r, _, err := c.post(ctx, "tasks/result", map[string]any{"taskId": id}, false, nil)
		if err != nil {
			return nil, err
		}
		return &Outcome{Result: r.Result, Err: r.Error, TaskID: id}, nil
	}
	switch {
	case t.Status == "completed" && t.Result != nil:
		return &Outcome{Result: t.Result, TaskID: id}, nil
	case t.Error != nil:
		return &Outcome{Err: t.Error, TaskID: id}, nil
	}
	return &Outcome{Err: &RPCError{Code: -32603, Message: "task " + t.Status + ": " + t.StatusMessage}, TaskID: id}, nil
}
