package intercept

import (
	"context"
	"encoding/json"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/session"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// holdConfig is unitConfig in tasks.sync_approval hold with a budget set per test.
func holdConfig(budget, extra string) string {
	return strings.Replace(unitConfig, "tasks: {default_ttl: 10m, max_ttl: 1h, sync_approval: error}",
		"tasks: {default_ttl: 10m, max_ttl: 1h, sync_approval: hold, hold_budget: "+budget+"}"+extra, 1)
}

// waitOut runs a Wait result as the proxy would and returns the answer and what was emitted
// on the stream before it.
func waitOut(t *testing.T, res Result) (answer []byte, emitted []string) {
	t.Helper()
	if res.Wait == nil {
		t.Fatalf("want a held (Wait) answer, got reply %s", res.Reply)
	}
	var mu sync.Mutex
	answer = res.Wait(context.Background(), func(b []byte) bool {
		mu.Lock()
		defer mu.Unlock()
		emitted = append(emitted, string(b))
		return true
	})
	return answer, emitted
}

type heldAnswer struct {
	Result *struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool                       `json:"isError"`
		Meta    map[string]json.RawMessage `json:"_meta"`
	} `json:"result"`
	Error *wireError `json:"error"`
}

func decodeHeld(t *testing.T, b []byte) heldAnswer {
	t.Helper()
	var a heldAnswer
	if err := json.Unmarshal(b, &a); err != nil || (a.Result == nil) == (a.Error == nil) {
		t.Fatalf("answer %s: %v", b, err)
	}
	return a
}

func (h *gwHarness) upstreamCalls() int {
	n := 0
	for _, m := range h.up.methods() {
		if m == "tools/call" {
			n++
		}
	}
	return n
}

// TestHoldDecidedInTime: a decision within tasks.hold_budget answers the plain call with the
// real result; a client that sent a progressToken gets progress notifications meanwhile.
func TestHoldDecidedInTime(t *testing.T) {
	h := newHarness(t, holdConfig("30s", ""))
	sess := &session.Session{ID: "s1"}
	res := h.route(t, sess, callRequest(`{"name":"delete_x","arguments":{"id":1},"_meta":{"progressToken":"p-1"}}`))
	all, _ := h.mgr.ListAll(t.Context(), tasksAll)
	if len(all) != 1 {
		t.Fatalf("tasks = %d", len(all))
	}
	if _, err := h.mgr.Approve(t.Context(), all[0].ID, "alice", "ok"); err != nil {
		t.Fatal(err)
	}
	out, emitted := waitOut(t, res)
	a := decodeHeld(t, out)
	if a.Result == nil || a.Result.IsError || a.Result.Content[0].Text != "ran" {
		t.Fatalf("held call answer: %s", out)
	}
	if len(emitted) == 0 || !strings.Contains(emitted[0], `"method":"notifications/progress"`) || !strings.Contains(emitted[0], `"progressToken":"p-1"`) {
		t.Errorf("progress notifications: %q", emitted)
	}
	// The first notification names the task and where to approve it (tollgate call prints it
	// at once instead of after the budget).
	if len(emitted) > 0 {
		var note struct {
			Params struct {
				Meta map[string]struct {
					TaskID     string `json:"taskId"`
					ConsoleURL string `json:"consoleUrl"`
				} `json:"_meta"`
			} `json:"params"`
		}
		if err := json.Unmarshal([]byte(emitted[0]), &note); err != nil {
			t.Fatal(err)
		}
		if note.Params.Meta["io.modelcontextprotocol/related-task"].TaskID != all[0].ID || note.Params.Meta["io.tollgate/approval"].TaskID != all[0].ID {
			t.Errorf("progress _meta does not name task %s: %s", all[0].ID, emitted[0])
		}
	}
	if n := h.upstreamCalls(); n != 1 {
		t.Errorf("upstream executions = %d", n)
	}
}

// TestHoldSettlesThenRetryAttaches: undecided at the end of the budget, the call gets a normal
// tool result naming the task; the same call again attaches to that task (no second approval)
// and, once approved, returns the result of the one execution.
func TestHoldSettlesThenRetryAttaches(t *testing.T) {
	h := newHarness(t, holdConfig("50ms", ""))
	h.gw.d.ConsoleURL = "http://127.0.0.1:7469/approvals"
	sess := &session.Session{ID: "s1"}
	call := callRequest(`{"name":"delete_x","arguments":{"id":1,"why":"test"}}`)
	out, emitted := waitOut(t, h.route(t, sess, call))
	if len(emitted) != 0 {
		t.Errorf("progress without a progressToken: %q", emitted)
	}
	a := decodeHeld(t, out)
	if a.Result == nil || a.Result.IsError {
		t.Fatalf("settled answer: %s", out)
	}
	var meta struct {
		TaskID     string `json:"taskId"`
		Status     string `json:"status"`
		State      string `json:"state"`
		ConsoleURL string `json:"consoleUrl"`
	}
	if err := json.Unmarshal(a.Result.Meta[approvalMetaKey], &meta); err != nil || !strings.HasPrefix(meta.TaskID, "tg_") ||
		meta.Status != "working" || meta.State != "awaiting_approval" || meta.ConsoleURL != "http://127.0.0.1:7469/approvals" {
		t.Fatalf("_meta %s: %v", a.Result.Meta[approvalMetaKey], err)
	}
	text := a.Result.Content[0].Text
	for _, want := range []string{meta.TaskID, "again with exactly the same arguments", "tollgate_get_task_result", "http://127.0.0.1:7469/approvals"} {
		if !strings.Contains(text, want) {
			t.Errorf("settled text lacks %q: %s", want, text)
		}
	}

	// Same call, members in another order: attaches, settles again with the same task.
	out, _ = waitOut(t, h.route(t, sess, callRequest(`{"name":"delete_x","arguments":{"why":"test","id":1}}`)))
	if !strings.Contains(string(out), meta.TaskID) {
		t.Errorf("retry did not attach to %s: %s", meta.TaskID, out)
	}
	if all, _ := h.mgr.ListAll(t.Context(), tasksAll); len(all) != 1 {
		t.Fatalf("approvals = %d, want 1", len(all))
	}
	if _, err := h.mgr.Approve(t.Context(), meta.TaskID, "alice", "ok"); err != nil {
		t.Fatal(err)
	}
	for range 2 { // every retry after the decision gets the one execution's result
		out, _ = waitOut(t, h.route(t, sess, call))
		if a := decodeHeld(t, out); a.Result == nil || a.Result.Content[0].Text != "ran" {
			t.Fatalf("retry after approval: %s", out)
		}
	}
	if n := h.upstreamCalls(); n != 1 {
		t.Errorf("upstream executions = %d, want 1", n)
	}
	// Another session of another owner making the same call gets its own approval.
	waitOut(t, h.route(t, &session.Session{ID: "s2"}, call))
	if all, _ := h.mgr.ListAll(t.Context(), tasksAll); len(all) != 2 {
		t.Errorf("tasks = %d, want 2 (owners do not share)", len(all))
	}
}

// TestHoldRetryDenials: after a rejection, an approval timeout or a cancel, the retry gets
// that outcome as a JSON-RPC error naming the task, not a tool error, and nothing runs.
func TestHoldRetryDenials(t *testing.T) {
	h := newHarness(t, holdConfig("50ms", "\napproval: {short: {timeout: 1ms}}\n"))
	sess := &session.Session{ID: "s1"}
	settle := func(args string) string {
		out, _ := waitOut(t, h.route(t, sess, callRequest(`{"name":"delete_x","arguments":`+args+`}`)))
		var a struct {
			Result struct {
				Meta map[string]struct {
					TaskID string `json:"taskId"`
				} `json:"_meta"`
			} `json:"result"`
		}
		_ = json.Unmarshal(out, &a)
		return a.Result.Meta[approvalMetaKey].TaskID
	}
	rejected := settle(`{"n":1}`)
	if _, err := h.mgr.Reject(t.Context(), rejected, "alice", "not today"); err != nil {
		t.Fatal(err)
	}
	cancelled := settle(`{"n":2}`)
	if _, err := h.mgr.Cancel(t.Context(), owner(exchange(t, sess, callRequest(`{"name":"x"}`))), cancelled); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args, id, name string
		code           int
	}{
		{`{"n":1}`, rejected, "ApprovalRejected", -32007},
		{`{"n":2}`, cancelled, "TaskCancelled", -32603},
	} {
		out, _ := waitOut(t, h.route(t, sess, callRequest(`{"name":"delete_x","arguments":`+tt.args+`}`)))
		a := decodeHeld(t, out)
		if a.Error == nil || a.Error.Code != tt.code || a.Error.Data["error"] != tt.name || a.Error.Data["taskId"] != tt.id {
			t.Errorf("retry of %s: %s, want %d %s", tt.args, out, tt.code, tt.name)
		}
	}
	if n := h.upstreamCalls(); n != 0 {
		t.Errorf("upstream executions = %d, want 0", n)
	}
	if all, _ := h.mgr.ListAll(t.Context(), tasksAll); len(all) != 2 {
		t.Errorf("tasks = %d, want 2", len(all))
	}

	// Nobody decides within the workflow's timeout (on_timeout deny): the held call and its
	// retry get -32008, still with the one task.
	h = newHarness(t, holdConfig("50ms", "\napproval: {default: {timeout: 10ms}}\n"))
	call := callRequest(`{"name":"delete_x","arguments":{"n":3}}`)
	for i := range 2 {
		out, _ := waitOut(t, h.route(t, sess, call))
		if a := decodeHeld(t, out); a.Error == nil || a.Error.Code != -32008 || a.Error.Data["error"] != "ApprovalTimedOut" {
			t.Errorf("call %d after the approval timeout: %s", i, out)
		}
	}
	if all, _ := h.mgr.ListAll(t.Context(), tasksAll); len(all) != 1 {
		t.Errorf("tasks = %d, want 1", len(all))
	}
}

// TestHoldOutputSchemaTool: a tool with an outputSchema settles with isError true, because
// clients validate non-error results against the schema.
func TestHoldOutputSchemaTool(t *testing.T) {
	h := newHarness(t, holdConfig("20ms", ""))
	h.listTools(t, `[{"name":"delete_typed","inputSchema":{"type":"object"},"outputSchema":{"type":"object","required":["n"]}},{"name":"delete_plain","outputSchema":null}]`)
	sess := &session.Session{ID: "s1"}
	for tool, wantErr := range map[string]bool{"delete_typed": true, "delete_plain": false} {
		out, _ := waitOut(t, h.route(t, sess, callRequest(`{"name":"`+tool+`","arguments":{}}`)))
		if a := decodeHeld(t, out); a.Result == nil || a.Result.IsError != wantErr {
			t.Errorf("%s: %s, want isError %v", tool, out, wantErr)
		}
	}
}

func TestProgressToken(t *testing.T) {
	for _, tt := range []struct{ params, want string }{
		{`{"_meta":{"progressToken":"abc"}}`, `"abc"`},
		{`{"_meta":{"progressToken":42}}`, `42`},
		{`{"_meta":{"progressToken":-1}}`, `-1`},
		{`{"_meta":{"progressToken":1.5}}`, ``},
		{`{"_meta":{"progressToken":{"x":1}}}`, ``},
		{`{"_meta":{"progressToken":"` + strings.Repeat("a", 300) + `"}}`, ``},
		{`{"_meta":{}}`, ``},
		{`{"name":"x"}`, ``},
		{``, ``},
	} {
		if got := string(progressToken(json.RawMessage(tt.params))); got != tt.want {
			t.Errorf("progressToken(%s) = %q, want %q", tt.params, got, tt.want)
		}
	}
}

// FuzzProgressToken: what is echoed back as a progressToken is nil or a bounded JSON string or
// integer taken verbatim from the request.
func FuzzProgressToken(f *testing.F) {
	for _, s := range []string{`{"_meta":{"progressToken":"a"}}`, `{"_meta":{"progressToken":7}}`, `{"_meta":{"progressToken":"\u0000\"}"}}`, `{"_meta":[]}`, `{`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, params string) {
		tok := progressToken(json.RawMessage(params))
		if tok == nil {
			return
		}
		if len(tok) > maxProgressTokenLen || !strings.Contains(params, string(tok)) {
			t.Fatalf("token %q from %q", tok, params)
		}
		var v any
		if err := json.Unmarshal(tok, &v); err != nil {
			t.Fatalf("token %q is not JSON: %v", tok, err)
		}
		switch v.(type) {
		case string, float64:
		default:
			t.Fatalf("token %q is %T", tok, v)
		}
	})
}

// TestHeldResultNamesTheConsoleOnce: the answer to a held call says where approvers decide
// once, whether the task's status message already names the console or not.
func TestHeldResultNamesTheConsoleOnce(t *testing.T) {
	const url = "http://127.0.0.1:7469/approvals"
	for _, tk := range []*tasks.Task{
		{ID: "tg_1", Tool: "delete_user", State: tasks.AwaitingApproval,
			StatusMessage: "Awaiting approval by a human (workflow default): approve in the console at " + url + " or with `tollgate approvals approve tg_1`"},
		{ID: "tg_2", Tool: "delete_user", State: tasks.AwaitingApproval, StatusMessage: "Awaiting approval (default)"},
	} {
		var r struct {
			Content []struct{ Text string } `json:"content"`
		}
		if err := json.Unmarshal(heldResult(tk, url, false), &r); err != nil || len(r.Content) != 1 {
			t.Fatalf("%s: %v", tk.ID, err)
		}
		if n := strings.Count(r.Content[0].Text, url); n != 1 {
			t.Errorf("%s: the console URL appears %d times in %q", tk.ID, n, r.Content[0].Text)
		}
	}
}

// TestHeldCallGoroutines: a held plain call waits on the goroutine that runs its Wait (the
// proxy's handler) and starts none of its own — no question relay, no progress sender, no
// outcome waiter — in either era: thousands of held calls are open connections (issue 21,
// docs/PERFORMANCE.md "Held plain calls"). Structural, not timed: the goroutine growth is
// read once all n calls are parked in their wait.
func TestHeldCallGoroutines(t *testing.T) {
	const n = 50
	sess := &session.Session{ID: "s1"}
	for _, tc := range []struct {
		name string
		x    func(i int) *Exchange
	}{
		{"2025-11-25", func(i int) *Exchange {
			return exchange(t, sess, callRequest(`{"name":"delete_x","arguments":{"id":1}}`))
		}},
		{"2025-11-25 with a progressToken", func(i int) *Exchange {
			return exchange(t, sess, callRequest(`{"name":"delete_x","arguments":{"id":1},"_meta":{"progressToken":`+strconv.Itoa(i)+`}}`))
		}},
		{"2026-07-28", func(int) *Exchange {
			return modernExchange(t, "tools/call", `{"name":"delete_x","arguments":{"id":1}}`, `{"elicitation":{}}`, "X-User", "alice")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, holdConfig("10m", "\nserver: {identity_header: X-User}\n"))
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			base := runtime.NumGoroutine()
			var wg sync.WaitGroup
			answers := make(chan []byte, n)
			for i := range n {
				res := h.router.Route(ctx, tc.x(i))
				if res.Wait == nil {
					t.Fatalf("call %d not held: %s", i, res.Reply)
				}
				wg.Go(func() { answers <- res.Wait(ctx, func([]byte) bool { return true }) })
			}
			waitHeld(t, ctx, n)
			grown := runtime.NumGoroutine() - base
			cancel()
			wg.Wait()
			close(answers)
			for a := range answers {
				if a != nil {
					t.Errorf("a held call answered before a decision: %s", a)
				}
			}
			per := float64(grown) / n
			t.Logf("%d held calls: %d goroutines more (%.2f each)", n, grown, per)
			if per >= 1.5 { // one, its own waiter; 2 or 3 when a relay (and a progress sender) ran beside it
				t.Errorf("%.2f goroutines per held call, want 1 (the one running its Wait)", per)
			}
		})
	}
}

// waitHeld waits until n goroutines are parked in a held call's Wait (a select, in the task
// wait or beside the goroutines it started): a structural wait, there is no event to await
// when a goroutine parks.
func waitHeld(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	buf := make([]byte, 4<<20)
	for {
		k := 0
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if head, _, _ := strings.Cut(g, "\n"); strings.Contains(head, "[select") && strings.Contains(g, "intercept.(*Gateway).hold.func") {
				k++
			}
		}
		if k >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d held calls parked", k, n)
		case <-time.After(time.Millisecond):
		}
	}
}
