package intercept

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/session"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

func taskRequest(method, params string) string {
	return `{"jsonrpc":"2.0","id":9,"method":"` + method + `","params":` + params + `}`
}

// newTaskFor creates an approval task (delete_x) owned by sess and returns its id.
func (h *gwHarness) newTaskFor(t *testing.T, sess *session.Session) string {
	t.Helper()
	id, _, _ := createdTask(t, h.route(t, sess, callRequest(`{"name":"delete_x","arguments":{"n":1},"task":{"ttl":60000}}`)))
	return id
}

// TestTasksRouting covers seed §9.1 "Task ID routing" and docs/contract.md §2 routing: a tg_ id goes
// to Tollgate's manager; any other id goes upstream only if this session created it
// (Session.BindUpstreamTask), else -32602 — for tasks/get, tasks/result and tasks/cancel alike.
func TestTasksRouting(t *testing.T) {
	for _, method := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		t.Run(method, func(t *testing.T) {
			tests := []struct {
				name string
				id   func(h *gwHarness, mine, other *session.Session) string
				sess string // "mine", "other" or "none"
				want string // local | forward | notfound
			}{
				{"Task_ID_routing_tg_prefix", func(h *gwHarness, mine, _ *session.Session) string { return h.newTaskFor(t, mine) }, "mine", "local"},
				{"Task_ID_routing_tg_prefix_foreign_owner", func(h *gwHarness, mine, _ *session.Session) string { return h.newTaskFor(t, mine) }, "other", "notfound"},
				{"Task_ID_routing_tg_prefix_unknown", func(*gwHarness, *session.Session, *session.Session) string {
					return "tg_00000000-0000-4000-8000-000000000000"
				}, "mine", "notfound"},
				{"Task_ID_routing_other_bound", func(_ *gwHarness, mine, _ *session.Session) string { mine.BindUpstreamTask("abc123"); return "abc123" }, "mine", "forward"},
				{"Task_ID_routing_other_bound_to_another_session", func(_ *gwHarness, _, other *session.Session) string {
					other.BindUpstreamTask("abc123")
					return "abc123"
				}, "mine", "notfound"},
				{"Task_ID_routing_other_unbound", func(*gwHarness, *session.Session, *session.Session) string { return "abc123" }, "mine", "notfound"},
				{"Task_ID_routing_other_no_session", func(_ *gwHarness, mine, _ *session.Session) string { mine.BindUpstreamTask("abc123"); return "abc123" }, "none", "notfound"},
				// docs/contract.md §2: tg_ ids are Tollgate's only when it created them; an upstream id
				// that happens to start with tg_ stays the upstream's for the session that made it.
				{"Task_ID_routing_upstream_id_with_tg_prefix", func(_ *gwHarness, mine, _ *session.Session) string {
					mine.BindUpstreamTask("tg_from-upstream")
					return "tg_from-upstream"
				}, "mine", "forward"},
				{"Task_ID_routing_TG_prefix_case", func(_ *gwHarness, mine, _ *session.Session) string { return "TG_abc" }, "mine", "notfound"},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					h := newHarness(t, unitConfig)
					mine, other := &session.Session{ID: "mine"}, &session.Session{ID: "other"}
					id := tt.id(h, mine, other)
					var sess *session.Session
					switch tt.sess {
					case "mine":
						sess = mine
					case "other":
						sess = other
					}
					res := h.route(t, sess, taskRequest(method, `{"taskId":`+string(rawString(id))+`}`))
					switch tt.want {
					case "forward":
						if res.Forward == nil || res.Forward.Transform != nil {
							t.Fatalf("want a plain passthrough, got %+v", res)
						}
					case "notfound":
						e := replyError(t, res)
						if e.Code != jsonrpc.CodeInvalidParams || e.Data["error"] != "TaskNotFound" || e.Data["taskId"] != id {
							t.Errorf("got %+v, want -32602 TaskNotFound", e)
						}
					case "local":
						if res.Forward != nil {
							t.Fatal("a tg_ task must never be forwarded")
						}
						if res.Wait != nil { // tasks/result blocks; a gone client ends only the wait
							ctx, cancel := context.WithCancel(t.Context())
							cancel()
							if out := res.Wait(ctx, func([]byte) bool { return false }); out != nil {
								t.Errorf("wait with a gone client answered %s", out)
							}
						}
					}
					if got := h.up.methods(); len(got) != 0 {
						t.Errorf("upstream contacted: %v", got)
					}
				})
			}
		})
	}
}

// TestTasksEdgeCases covers seed §9.5 EC-SEP-005…009 at the handler level.
func TestTasksEdgeCases(t *testing.T) {
	unknown := `{"taskId":"tg_00000000-0000-4000-8000-000000000000"}`
	for _, tt := range []struct{ name, method string }{
		{"EC-SEP-005_get_nonexistent", "tasks/get"},
		{"EC-SEP-006_result_nonexistent", "tasks/result"},
		{"EC-SEP-007_cancel_nonexistent", "tasks/cancel"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, unitConfig)
			e := replyError(t, h.route(t, &session.Session{ID: "s1"}, taskRequest(tt.method, unknown)))
			if e.Code != jsonrpc.CodeInvalidParams || e.Data["error"] != "TaskNotFound" {
				t.Errorf("got %+v, want -32602 TaskNotFound", e)
			}
		})
	}

	t.Run("EC-SEP-008_cancel_terminal", func(t *testing.T) {
		h := newHarness(t, unitConfig)
		sess := &session.Session{ID: "s1"}
		id := h.newTaskFor(t, sess)
		req := taskRequest("tasks/cancel", `{"taskId":"`+id+`"}`)
		res := h.route(t, sess, req)
		var task struct{ TaskID, Status string }
		if err := json.Unmarshal(replyResult(t, res.Reply), &task); err != nil || task.TaskID != id || task.Status != "cancelled" {
			t.Fatalf("first cancel: %s (flat Task with status cancelled expected)", res.Reply)
		}
		e := replyError(t, h.route(t, sess, req))
		if e.Code != jsonrpc.CodeInvalidParams || e.Data["error"] != "TaskTerminal" || e.Data["taskId"] != id ||
			!strings.Contains(e.Message, "cancelled") {
			t.Errorf("second cancel: got %+v, want -32602 TaskTerminal", e)
		}
	})

	t.Run("EC-SEP-009_result_while_working_blocks_until_terminal", func(t *testing.T) {
		h := newHarness(t, unitConfig)
		sess := &session.Session{ID: "s1"}
		id := h.newTaskFor(t, sess)
		res := h.route(t, sess, taskRequest("tasks/result", `{"taskId":"`+id+`"}`))
		if res.Wait == nil {
			t.Fatalf("tasks/result of a working task must block (spec: MUST block), got %+v", res)
		}
		done := make(chan []byte, 1)
		go func() { done <- res.Wait(t.Context(), func([]byte) bool { return false }) }()
		if _, err := h.mgr.Approve(t.Context(), id, "alice", "ok"); err != nil {
			t.Fatal(err)
		}
		out := <-done
		var r struct {
			Result struct {
				Content []struct{ Text string }
				Meta    map[string]struct {
					TaskID string `json:"taskId"`
				} `json:"_meta"`
			}
		}
		if err := json.Unmarshal(out, &r); err != nil || len(r.Result.Content) != 1 || r.Result.Content[0].Text != "ran" {
			t.Fatalf("tasks/result = %s, want the upstream's tool result", out)
		}
		if r.Result.Meta[tasks.RelatedTaskKey].TaskID != id {
			t.Errorf("_meta[%s] = %v, want taskId %s", tasks.RelatedTaskKey, r.Result.Meta, id)
		}
		if got := h.up.methods(); len(got) != 1 || got[0] != "tools/call" {
			t.Errorf("upstream saw %v, want exactly one tools/call (executed at most once)", got)
		}
	})

	t.Run("EC-SEP-009_client_gone_ends_wait_not_task", func(t *testing.T) {
		h := newHarness(t, unitConfig)
		sess := &session.Session{ID: "s1"}
		id := h.newTaskFor(t, sess)
		res := h.route(t, sess, taskRequest("tasks/result", `{"taskId":"`+id+`"}`))
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if out := res.Wait(ctx, func([]byte) bool { return false }); out != nil {
			t.Errorf("a gone client got %s", out)
		}
		got := h.route(t, sess, taskRequest("tasks/get", `{"taskId":"`+id+`"}`))
		if !strings.Contains(string(got.Reply), `"status":"working"`) {
			t.Errorf("task after the wait ended: %s, want still working", got.Reply)
		}
	})

	t.Run("missing_taskId", func(t *testing.T) {
		h := newHarness(t, unitConfig)
		for _, m := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
			for _, p := range []string{`{}`, `{"taskId":""}`, `{"taskId":7}`, `[]`} {
				if e := replyError(t, h.route(t, &session.Session{ID: "s1"}, taskRequest(m, p))); e.Code != jsonrpc.CodeInvalidParams {
					t.Errorf("%s %s: got %+v, want -32602", m, p, e)
				}
			}
		}
	})
}

// TestTasksEdgeCases_EC_SEP_010 (seed §9.5 "Upstream changes capabilities on reconnect"): each
// initialize refreshes the cached capability, and the next tools/list follows it.
func TestTasksEdgeCases_EC_SEP_010(t *testing.T) {
	h := newHarness(t, unitConfig)
	tools := `[{"name":"plain"}],"nextCursor":"n"`
	for _, step := range []struct {
		tasks bool
		want  string
	}{{false, "forbidden"}, {true, "optional"}, {false, "forbidden"}} {
		h.initUpstream(t, step.tasks)
		if out := h.listTools(t, tools); !strings.Contains(string(out), `"taskSupport":"`+step.want+`"`) {
			t.Errorf("upstream tasks=%v: tools/list = %s, want %s", step.tasks, out, step.want)
		}
	}
}

// TestForwardWithTaskBindsUpstreamID (F-005.5): a task-augmented call forwarded to a
// task-capable upstream binds the returned upstream task id to the calling session only.
func TestForwardWithTaskBindsUpstreamID(t *testing.T) {
	h := newHarness(t, unitConfig)
	h.initUpstream(t, true)
	h.listTools(t, `[{"name":"analyze","execution":{"taskSupport":"optional"}}]`)
	mine, other := &session.Session{ID: "mine"}, &session.Session{ID: "other"}
	out := h.forward(t, mine, callRequest(`{"name":"analyze","task":{"ttl":60000}}`),
		`{"jsonrpc":"2.0","id":7,"result":{"task":{"taskId":"up-42","status":"working","createdAt":"2025-11-25T00:00:00Z","lastUpdatedAt":"2025-11-25T00:00:00Z","ttl":60000}}}`)
	if !strings.Contains(string(out), `"up-42"`) {
		t.Fatalf("CreateTaskResult changed: %s", out)
	}
	if !mine.OwnsUpstreamTask("up-42") || other.OwnsUpstreamTask("up-42") {
		t.Fatal("upstream task id not bound to exactly the calling session")
	}
	if res := h.route(t, mine, taskRequest("tasks/get", `{"taskId":"up-42"}`)); res.Forward == nil {
		t.Errorf("owner's tasks/get not forwarded: %s", res.Reply)
	}
	if e := replyError(t, h.route(t, other, taskRequest("tasks/get", `{"taskId":"up-42"}`))); e.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("other session: %+v, want -32602", e)
	}
	// An error answer binds nothing.
	h.forward(t, mine, callRequest(`{"name":"analyze","task":{"ttl":60000}}`), `{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"x"}}`)
}

// TestTasksListCursor covers the opaque tasks/list cursor (docs/contract.md §2: invalid → -32602).
func TestTasksListCursor(t *testing.T) {
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	tests := []struct {
		name, cursor string
		ok           bool
	}{
		{"start", encodeCursor(listCursor{}), true},
		{"tollgate_offset", encodeCursor(listCursor{TG: 50}), true},
		{"upstream_phase", encodeCursor(listCursor{Ph: 1, Up: json.RawMessage(`"abc"`)}), true},
		{"not_base64", "!!!", false},
		{"padded_base64", base64.URLEncoding.EncodeToString([]byte(`{"ph":0}x`)), false},
		{"std_alphabet", base64.StdEncoding.EncodeToString([]byte(`{"tg":1,"ph":0,"up":"??>"}`)), false},
		{"not_json", enc("hello"), false},
		{"json_array", enc(`[1]`), false},
		{"negative_offset", enc(`{"tg":-1,"ph":0}`), false},
		{"negative_phase", enc(`{"ph":-1}`), false},
		{"phase_2", enc(`{"ph":2}`), false},
		{"float_offset", enc(`{"tg":1.5}`), false},
		{"oversized", enc(`{"ph":1,"up":"` + strings.Repeat("a", maxCursor+1) + `"}`), false},
		{"empty", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok := decodeCursor(tt.cursor); ok != tt.ok {
				t.Errorf("decodeCursor(%q) ok = %v, want %v", tt.cursor, ok, tt.ok)
			}
			if tt.ok {
				return
			}
			h := newHarness(t, unitConfig)
			e := replyError(t, h.route(t, &session.Session{ID: "s1"}, taskRequest("tasks/list", `{"cursor":`+string(rawString(tt.cursor))+`}`)))
			if e.Code != jsonrpc.CodeInvalidParams || e.Data["error"] != "InvalidCursor" {
				t.Errorf("got %+v, want -32602 InvalidCursor", e)
			}
		})
	}
	t.Run("round_trip", func(t *testing.T) {
		for _, c := range []listCursor{{}, {TG: 1}, {TG: 1 << 20}, {Ph: 1}, {Ph: 1, Up: json.RawMessage(`{"k":[1,2]}`)}} {
			got, ok := decodeCursor(encodeCursor(c))
			if !ok || got.TG != c.TG || got.Ph != c.Ph || string(got.Up) != string(c.Up) {
				t.Errorf("round trip %+v → %+v (ok=%v)", c, got, ok)
			}
		}
	})
	t.Run("offset_past_end", func(t *testing.T) {
		h := newHarness(t, unitConfig)
		cur := encodeCursor(listCursor{TG: 3})
		e := replyError(t, h.route(t, &session.Session{ID: "s1"}, taskRequest("tasks/list", `{"cursor":"`+cur+`"}`)))
		if e.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("got %+v, want -32602", e)
		}
	})
}

type taskList struct {
	Tasks []struct {
		TaskID string `json:"taskId"`
	} `json:"tasks"`
	NextCursor *string `json:"nextCursor"`
}

func (h *gwHarness) tasksList(t *testing.T, sess *session.Session, cursor *string) taskList {
	t.Helper()
	params := `{}`
	if cursor != nil {
		params = `{"cursor":"` + *cursor + `"}`
	}
	var l taskList
	res := h.route(t, sess, taskRequest("tasks/list", params))
	if err := json.Unmarshal(replyResult(t, res.Reply), &l); err != nil {
		t.Fatal(err)
	}
	return l
}

// TestTasksList covers the merged list (F-006.5, seed §9.2 "tasks/list merge" and "TG only"):
// this caller's Tollgate tasks in pages of listPage, then — only when the upstream supports
// tasks — the upstream's, each of which becomes routable for this session.
func TestTasksList(t *testing.T) {
	t.Run("tollgate_only_paged", func(t *testing.T) {
		h := newHarness(t, unitConfig)
		mine, other := &session.Session{ID: "mine"}, &session.Session{ID: "other"}
		h.newTaskFor(t, other) // never listed for mine
		want := map[string]bool{}
		for range listPage + 3 {
			want[h.newTaskFor(t, mine)] = true
		}
		p1 := h.tasksList(t, mine, nil)
		if len(p1.Tasks) != listPage || p1.NextCursor == nil {
			t.Fatalf("page 1: %d tasks, next %v", len(p1.Tasks), p1.NextCursor)
		}
		p2 := h.tasksList(t, mine, p1.NextCursor)
		if len(p2.Tasks) != 3 || p2.NextCursor != nil {
			t.Fatalf("page 2: %d tasks, next %v (upstream without tasks: no upstream phase)", len(p2.Tasks), p2.NextCursor)
		}
		for _, tk := range append(p1.Tasks, p2.Tasks...) {
			if !want[tk.TaskID] {
				t.Errorf("listed %s: not this caller's task or listed twice", tk.TaskID)
			}
			delete(want, tk.TaskID)
		}
		if len(want) != 0 {
			t.Errorf("not listed: %v", want)
		}
		if got := h.up.methods(); len(got) != 0 {
			t.Errorf("upstream without tasks was asked: %v", got)
		}
	})
	t.Run("merged_with_upstream", func(t *testing.T) {
		h := newHarness(t, unitConfig)
		h.initUpstream(t, true)
		sess := &session.Session{ID: "mine"}
		id := h.newTaskFor(t, sess)
		// Tollgate's tasks come first; once they are exhausted the upstream's first page
		// completes the same page, so a one-page reader sees both (F-006.5).
		p1 := h.tasksList(t, sess, nil)
		if len(p1.Tasks) != 2 || p1.Tasks[0].TaskID != id || p1.Tasks[1].TaskID != "up-1" || p1.NextCursor != nil {
			t.Fatalf("page 1: %+v", p1)
		}
		if !sess.OwnsUpstreamTask("up-1") {
			t.Error("an upstream task listed for this session is not routable for it")
		}
		if got := h.up.methods(); fmt.Sprint(got) != "[tasks/list]" {
			t.Errorf("upstream saw %v", got)
		}
	})
	t.Run("no_session_lists_nothing", func(t *testing.T) {
		h := newHarness(t, unitConfig)
		if l := h.tasksList(t, nil, nil); len(l.Tasks) != 0 || l.NextCursor != nil {
			t.Errorf("got %+v", l)
		}
	})
}

// TestWithRelatedTask: tasks/result adds _meta["io.modelcontextprotocol/related-task"] and
// keeps whatever _meta the tool set (spec 2025-11-25 tasks).
func TestWithRelatedTask(t *testing.T) {
	const rel = `"io.modelcontextprotocol/related-task":{"taskId":"tg_1"}`
	tests := []struct{ name, in, want string }{
		{"no_meta", `{"content":[]}`, `{"content":[],"_meta":{` + rel + `}}`},
		{"meta_kept", `{"_meta":{"a":1,"b":"<&>"},"content":[]}`, `{"_meta":{"a":1,"b":"<&>",` + rel + `},"content":[]}`},
		{"meta_null", `{"_meta":null}`, `{"_meta":{` + rel + `}}`},
		{"meta_empty", `{"_meta":{}}`, `{"_meta":{` + rel + `}}`},
		{"related_task_replaced", `{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"other"},"z":0}}`, `{"_meta":{` + rel + `,"z":0}}`},
		{"empty_result", `{}`, `{"_meta":{` + rel + `}}`},
		{"not_an_object", `[1]`, `[1]`},
		{"meta_not_object", `{"_meta":5}`, `{"_meta":5}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(withRelatedTask([]byte(tt.in), "tg_1")); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}
