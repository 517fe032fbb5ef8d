package intercept

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/session"
)

func callRequest(params string) string {
	return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":` + params + `}`
}

// createdTask decodes a CreateTaskResult (spec 2025-11-25: the task is nested under "task").
func createdTask(t *testing.T, res Result) (id string, ttl int64, status string) {
	t.Helper()
	if res.Reply == nil {
		t.Fatalf("want a local CreateTaskResult, got forward=%v wait=%v", res.Forward != nil, res.Wait != nil)
	}
	var r struct {
		Task *struct {
			TaskID string `json:"taskId"`
			Status string `json:"status"`
			TTL    int64  `json:"ttl"`
		} `json:"task"`
	}
	if err := json.Unmarshal(replyResult(t, res.Reply), &r); err != nil || r.Task == nil || r.Task.TaskID == "" {
		t.Fatalf("not a CreateTaskResult: %s", res.Reply)
	}
	return r.Task.TaskID, r.Task.TTL, r.Task.Status
}

// TestToolsCall_TaskMetadata covers task metadata validation (REQ-CORE-007 F-004, seed §9.5
// EC-SEP-001…003, docs/contract.md §2: ≤0 or non-integer → -32602, above max → clamp and log,
// absent → default). delete_* needs approval, so a valid call creates a Tollgate task whose
// ttl shows what was accepted. unitConfig: default_ttl 10m, max_ttl 1h.
func TestToolsCall_TaskMetadata(t *testing.T) {
	const (
		defaultMS = 600000
		maxMS     = 3600000
	)
	tests := []struct {
		name    string
		task    string // raw params.task
		wantTTL int64  // 0 = a -32602 InvalidTaskMetadata is expected
		clamped bool   // a WARN names the clamp
	}{
		{"EC-SEP-001_malformed_string", `"soon"`, 0, false},
		{"EC-SEP-001_malformed_array", `[60000]`, 0, false},
		{"EC-SEP-001_malformed_number", `60000`, 0, false},
		{"EC-SEP-001_malformed_bool", `true`, 0, false},
		{"EC-SEP-001_ttl_object", `{"ttl":{"ms":1}}`, 0, false},
		{"EC-SEP-001_ttl_bool", `{"ttl":true}`, 0, false},
		{"EC-SEP-002_ttl_zero", `{"ttl":0}`, 0, false},
		{"EC-SEP-002_ttl_negative", `{"ttl":-1000}`, 0, false},
		{"EC-SEP-002_ttl_negative_zero", `{"ttl":-0}`, 0, false},
		{"EC-SEP-001_ttl_float", `{"ttl":1.5}`, 0, false},
		{"EC-SEP-001_ttl_exponent", `{"ttl":6e4}`, 0, false},
		{"EC-SEP-003_ttl_above_max_clamped", `{"ttl":864000000}`, maxMS, true},
		{"EC-SEP-003_ttl_max_exactly", `{"ttl":3600000}`, maxMS, false},
		{"ttl_valid", `{"ttl":60000}`, 60000, false},
		{"ttl_one_ms", `{"ttl":1}`, 1, false},
		{"ttl_absent_default", `{}`, defaultMS, false},
		{"ttl_null_default", `{"ttl":null}`, defaultMS, false},
		{"task_unknown_members_kept_valid", `{"ttl":60000,"x-hint":"slow"}`, 60000, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, unitConfig)
			sess := &session.Session{ID: "s1"}
			res := h.route(t, sess, callRequest(`{"name":"delete_x","arguments":{},"task":`+tt.task+`}`))
			if tt.wantTTL == 0 {
				e := replyError(t, res)
				if e.Code != jsonrpc.CodeInvalidParams || e.Data["error"] != "InvalidTaskMetadata" || e.Data["tool"] != "delete_x" {
					t.Fatalf("want -32602 InvalidTaskMetadata for tool delete_x, got %+v", e)
				}
				if !strings.HasPrefix(e.Message, "Invalid params:") {
					t.Errorf("message %q does not start with Invalid params:", e.Message)
				}
				return
			}
			_, ttl, status := createdTask(t, res)
			if ttl != tt.wantTTL || status != "working" {
				t.Errorf("task ttl=%d status=%q, want ttl=%d status=working", ttl, status, tt.wantTTL)
			}
			warned := strings.Contains(h.logs.String(), "level=WARN msg=\"task ttl above maximum; clamped\"")
			if warned != tt.clamped {
				t.Errorf("clamp WARN logged=%v, want %v; log:\n%s", warned, tt.clamped, h.logs.String())
			}
			if tt.clamped && (!strings.Contains(h.logs.String(), "requested_ms=864000000") || !strings.Contains(h.logs.String(), fmt.Sprintf("max_ms=%d", maxMS))) {
				t.Errorf("clamp WARN lacks requested/max: %s", h.logs.String())
			}
		})
	}
}

// TestToolsCall_TaskMetadataDeviations are inputs where the code and docs/contract.md §2 disagree
// today; each is skipped with the finding until the lead fixes the code.
func TestToolsCall_TaskMetadataDeviations(t *testing.T) {
	tests := []struct {
		name, task string
		wantTTL    int64 // 0 = -32602 expected
		finding    string
	}{
		{"EC-SEP-001_ttl_numeric_string", `{"ttl":"60000"}`, 0,
			"a JSON string ttl is accepted: encoding/json decodes a quoted number into *json.Number"},
		{"EC-SEP-003_ttl_beyond_int64_clamped", `{"ttl":99999999999999999999}`, 3600000,
			"an integer ttl beyond int64 is refused with -32602 instead of being clamped to max_ttl"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, unitConfig)
			res := h.route(t, &session.Session{ID: "s1"}, callRequest(`{"name":"delete_x","arguments":{},"task":`+tt.task+`}`))
			var got string
			if tt.wantTTL == 0 {
				if res.Reply == nil || !strings.Contains(string(res.Reply), `"code":-32602`) {
					got = fmt.Sprintf("not refused: %s", res.Reply)
				}
			} else if res.Reply == nil || !strings.Contains(string(res.Reply), fmt.Sprintf(`"ttl":%d`, tt.wantTTL)) {
				got = fmt.Sprintf("not clamped: %s", res.Reply)
			}
			if got != "" {
				t.Errorf("%s; %s", tt.finding, got)
			}
		})
	}
}

// TestToolsCall_ValidationRows covers seed §9.1 "Validation: required + no task" and
// "Validation: forbidden + task present" with the error shapes of docs/contract.md §2: -32601, the
// message prefixed with the error name, data {error, tool, reason[, hint]}.
func TestToolsCall_ValidationRows(t *testing.T) {
	tests := []struct {
		name          string
		upstreamTasks bool
		params        string
		wantName      string // TaskRequired | TaskForbidden
		wantReason    string // substring of data.reason
		deviation     string // known disagreement with docs/contract.md
	}{
		{"Validation_required_no_task/approve", false, `{"name":"delete_x","arguments":{}}`, "TaskRequired", `workflow "default"`, ""},
		{"Validation_required_no_task/policy", false, `{"name":"transfer_funds","arguments":{"amount":1}}`, "TaskRequired", "Cedar policy", ""},
		{"Validation_required_no_task/force_required", false, `{"name":"audit_log","arguments":{}}`, "TaskRequired", "force_required", ""},
		{"Validation_required_no_task/task_null_is_absent", false, `{"name":"delete_x","task":null}`, "TaskRequired", "approval", ""},
		{"Validation_required_no_task/upstream_tool_required", true, `{"name":"render","arguments":{}}`, "TaskRequired", "upstream",
			"the reason of a forward tool the upstream marks required says it needs human approval"},
		{"Validation_forbidden_task_present/forward_upstream_without_tasks", false, `{"name":"read_file","arguments":{},"task":{"ttl":60000}}`, "TaskForbidden", "does not support tasks", ""},
		{"Validation_forbidden_task_present/empty_task_object", false, `{"name":"read_file","task":{}}`, "TaskForbidden", "does not support tasks", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, unitConfig)
			h.initUpstream(t, tt.upstreamTasks)
			if tt.upstreamTasks {
				h.listTools(t, `[{"name":"render","execution":{"taskSupport":"required"}}]`)
			}
			res := h.route(t, &session.Session{ID: "s1"}, callRequest(tt.params))
			e := replyError(t, res)
			if e.Code != jsonrpc.CodeMethodNotFound {
				t.Errorf("code = %d, want -32601", e.Code)
			}
			if !strings.HasPrefix(e.Message, tt.wantName+":") {
				t.Errorf("message %q does not start with %s:", e.Message, tt.wantName)
			}
			keys := []string{"error", "reason", "tool"}
			if tt.wantName == "TaskRequired" {
				keys = append(keys, "hint")
			}
			if len(e.Data) != len(keys) {
				t.Errorf("data = %v, want exactly the keys %v", e.Data, keys)
			}
			for _, k := range keys {
				if s, _ := e.Data[k].(string); s == "" {
					t.Errorf("data.%s missing: %v", k, e.Data)
				}
			}
			if e.Data["error"] != tt.wantName {
				t.Errorf("data.error = %v, want %s", e.Data["error"], tt.wantName)
			}
			if r, _ := e.Data["reason"].(string); !strings.Contains(r, tt.wantReason) {
				t.Errorf("data.reason = %q, want it to mention %q", r, tt.wantReason)
			}
			if got := h.up.methods(); len(got) != 0 {
				t.Errorf("upstream contacted: %v", got)
			}
		})
	}
}

// TestToolsCall_Deny: docs/contract.md §2 "denied → -32003 PolicyDenied with data {error, tool,
// rule}; never reaches upstream" — Route answers with a Reply (not a Forward), whatever the
// task metadata, and the stub upstream sees nothing.
func TestToolsCall_Deny(t *testing.T) {
	tests := []struct {
		name, params, wantRule string
		wantPolicies           bool
	}{
		{"rule_no_task", `{"name":"drop_table","arguments":{"table":"users"}}`, "drop_*", false},
		{"rule_with_task", `{"name":"drop_table","arguments":{},"task":{"ttl":60000}}`, "drop_*", false},
		{"cedar_forbid_with_task", `{"name":"transfer_funds","arguments":{"amount":200000},"task":{"ttl":60000}}`, "transfer_*", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, upTasks := range []bool{false, true} {
				h := newHarness(t, unitConfig)
				h.initUpstream(t, upTasks)
				res := h.route(t, &session.Session{ID: "s1"}, callRequest(tt.params))
				if res.Forward != nil || res.Wait != nil {
					t.Fatalf("upstream tasks=%v: a denied call must be answered locally", upTasks)
				}
				e := replyError(t, res)
				if e.Code != jsonrpc.CodePolicyDenied || e.Data["error"] != "PolicyDenied" ||
					e.Data["rule"] != tt.wantRule || e.Data["tool"] == nil || !strings.HasPrefix(e.Message, "PolicyDenied:") {
					t.Errorf("upstream tasks=%v: got %+v", upTasks, e)
				}
				if _, ok := e.Data["policies"]; ok != tt.wantPolicies {
					t.Errorf("data.policies present=%v, want %v", ok, tt.wantPolicies)
				}
				if got := h.up.methods(); len(got) != 0 {
					t.Errorf("upstream contacted: %v", got)
				}
				if n, _ := h.mgr.ListAll(t.Context(), tasksAll); len(n) != 0 {
					t.Errorf("a denied call created %d tasks", len(n))
				}
			}
		})
	}
}

// TestToolsCall_Routing pins where a valid call goes (docs/contract.md §2 decision matrix).
func TestToolsCall_Routing(t *testing.T) {
	tests := []struct {
		name          string
		upstreamTasks bool
		params        string
		want          string // forward | task | wait
	}{
		{"forward_no_task", false, `{"name":"read_file","arguments":{}}`, "forward"},
		{"forward_task_upstream_tool_optional", true, `{"name":"analyze","arguments":{},"task":{"ttl":60000}}`, "forward"},
		{"forward_task_upstream_tool_forbidden_accelerated", true, `{"name":"ping","arguments":{},"task":{"ttl":60000}}`, "task"},
		{"forward_task_upstream_tool_unlisted_accelerated", true, `{"name":"never_listed","task":{"ttl":60000}}`, "task"},
		{"approve_task", false, `{"name":"delete_x","arguments":{"id":1},"task":{"ttl":60000}}`, "task"},
		{"policy_forward_task", false, `{"name":"transfer_funds","arguments":{"amount":5},"task":{"ttl":60000}}`, "task"},
		{"policy_approve_task", false, `{"name":"transfer_funds","arguments":{"amount":5000},"task":{"ttl":60000}}`, "task"},
		{"own_tool", false, `{"name":"tollgate_list_tasks","arguments":{}}`, "wait"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, unitConfig)
			h.initUpstream(t, tt.upstreamTasks)
			if tt.upstreamTasks {
				h.listTools(t, `[{"name":"analyze","execution":{"taskSupport":"optional"}},{"name":"ping","execution":{"taskSupport":"forbidden"}}]`)
			}
			res := h.route(t, &session.Session{ID: "s1"}, callRequest(tt.params))
			switch tt.want {
			case "forward":
				if res.Forward == nil {
					t.Fatalf("want the client's bytes forwarded, got %+v", res)
				}
			case "task":
				createdTask(t, res)
			case "wait":
				if res.Wait == nil {
					t.Fatalf("want a local Wait, got %+v", res)
				}
				if out := res.Wait(t.Context(), func([]byte) bool { return false }); !strings.Contains(string(out), `"result"`) {
					t.Errorf("own tool answered %s", out)
				}
			}
		})
	}
}

// TestToolsCall_AmbiguousParams: params different decoders would read differently are refused
// before governance looks at them (jsonrpc.CheckParams): duplicate keys at any depth and case
// variants of name/arguments/task/_meta.
func TestToolsCall_AmbiguousParams(t *testing.T) {
	tests := []struct{ name, params string }{
		{"duplicate_name", `{"name":"read_file","name":"drop_table"}`},
		{"duplicate_task", `{"name":"delete_x","task":{"ttl":1},"task":null}`},
		{"duplicate_in_arguments", `{"name":"read_file","arguments":{"path":"a","path":"b"}}`},
		{"duplicate_in_task", `{"name":"delete_x","task":{"ttl":60000,"ttl":0}}`},
		{"case_Name", `{"name":"read_file","Name":"drop_table"}`},
		{"case_NAME_alone", `{"NAME":"drop_table"}`},
		{"case_Arguments", `{"name":"read_file","Arguments":{}}`},
		{"case_Task", `{"name":"read_file","Task":{"ttl":60000}}`},
		{"case_TASK", `{"name":"delete_x","TASK":{}}`},
		{"case_Meta", `{"name":"read_file","_META":{}}`},
		{"kelvin_sign_folds_to_k", "{\"name\":\"read_file\",\"tas\u212a\":{}}"},
		{"case_variant_argument", `{"name":"read_file","arguments":{"amount":10,"Amount":100000}}`},
		{"case_variant_argument_deep", `{"name":"read_file","arguments":{"a":[{"b":{"limit":1,"LIMIT":9}}]}}`},
		{"folding_variant_argument", "{\"name\":\"read_file\",\"arguments\":{\"mask\":1,\"mas\u212a\":2}}"},
		{"case_variant_in_meta", `{"name":"read_file","_meta":{"progressToken":1,"ProgressToken":2}}`},
		{"params_not_object", `["read_file"]`},
		{"arguments_string", `{"name":"read_file","arguments":"/etc/passwd"}`},
		{"arguments_array", `{"name":"read_file","arguments":["/etc/passwd"]}`},
		{"arguments_number", `{"name":"read_file","arguments":1}`},
		{"name_missing", `{"arguments":{}}`},
		{"name_not_string", `{"name":7}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, unitConfig)
			e := replyError(t, h.route(t, &session.Session{ID: "s1"}, callRequest(tt.params)))
			if e.Code != jsonrpc.CodeInvalidParams || e.Data["error"] != "InvalidParams" {
				t.Errorf("got %+v, want -32602 InvalidParams", e)
			}
		})
	}
	t.Run("invalid_utf8", func(t *testing.T) {
		h := newHarness(t, unitConfig)
		x := exchange(t, nil, callRequest(`{"name":"read_file"}`))
		x.Msg.Params = json.RawMessage("{\"name\":\"read_\xff\"}")
		e := replyError(t, h.router.Route(t.Context(), x))
		if e.Code != jsonrpc.CodeInvalidParams {
			t.Errorf("got %+v, want -32602", e)
		}
	})
}

// TestToolsCall_SessionRequired: a task cannot be owned without a session.
func TestToolsCall_SessionRequired(t *testing.T) {
	h := newHarness(t, unitConfig)
	e := replyError(t, h.route(t, nil, callRequest(`{"name":"delete_x","task":{"ttl":60000}}`)))
	if e.Code != jsonrpc.CodeInvalidRequest || e.Data["error"] != "SessionRequired" {
		t.Errorf("got %+v", e)
	}
}

// TestToolsCall_CorrelationID: every local error carries the exchange's correlation id.
func TestToolsCall_CorrelationID(t *testing.T) {
	h := newHarness(t, unitConfig)
	for _, params := range []string{`{"name":"delete_x"}`, `{"name":"drop_x"}`, `{"name":"x","task":0}`} {
		x := exchange(t, &session.Session{ID: "s1"}, callRequest(params))
		x.CorrID = "corr-1"
		if e := replyError(t, h.router.Route(t.Context(), x)); e.Data["correlation_id"] != "corr-1" {
			t.Errorf("%s: data = %v, want correlation_id corr-1", params, e.Data)
		}
	}
}

// TestToolsCall_OwnToolWithTask: Tollgate's own tools advertise taskSupport forbidden; the spec
// (tasks 2025-11-25 "Tool-Level Negotiation") says servers SHOULD answer a task-augmented call
// to such a tool with -32601. Today the task is ignored and the tool runs.
func TestToolsCall_OwnToolWithTask(t *testing.T) {
	h := newHarness(t, unitConfig)
	res := h.route(t, &session.Session{ID: "s1"}, callRequest(`{"name":"tollgate_list_tasks","arguments":{},"task":{"ttl":60000}}`))
	if res.Reply == nil || !strings.Contains(string(res.Reply), `"code":-32601`) {
		t.Errorf("a task-augmented call to a tollgate_* tool must be refused with -32601 TaskForbidden: %s", res.Reply)
	}
}

// TestRoute_GovernedNotifications: every method Tollgate intercepts, sent without an id or
// with id null, is refused locally (HTTP 400, -32600 IdRequired, id null) and never forwarded;
// ungoverned notifications still pass through.
func TestRoute_GovernedNotifications(t *testing.T) {
	h := newHarness(t, unitConfig)
	governed := maps.Clone(h.router.handlers)
	maps.Copy(governed, h.router.modern) // 2026-07-28 methods (tasks/update, server/discover…)
	for method := range governed {
		for _, id := range []string{``, `"id":null,`} {
			res := h.route(t, &session.Session{ID: "s1"}, `{"jsonrpc":"2.0",`+id+`"method":"`+method+`","params":{"name":"drop_x","taskId":"tg_x"}}`)
			if res.Forward != nil || res.Status != http.StatusBadRequest {
				t.Errorf("%s notification (%s): forward=%v status=%d, want a local 400", method, id, res.Forward != nil, res.Status)
				continue
			}
			if e := replyError(t, res); e.Code != jsonrpc.CodeInvalidRequest || e.Data["error"] != "IdRequired" {
				t.Errorf("%s notification: %+v", method, e)
			}
			if !strings.Contains(string(res.Reply), `"id":null`) {
				t.Errorf("%s notification: reply %s, want id null", method, res.Reply)
			}
		}
	}
	if len(governed) < 11 || governed["tasks/update"] == nil || governed["tools/call"] == nil {
		t.Errorf("only %d governed methods registered", len(governed))
	}
	if res := h.route(t, nil, `{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`); res.Forward == nil {
		t.Errorf("ungoverned notification not forwarded: %+v", res)
	}
}

// TestToolsCall_ReservedPrefix: the tollgate_ prefix is Tollgate's. A name with it that is not
// one of Tollgate's tools is answered -32602 UnknownTool locally — with or without a task, and
// whatever the rules say — and never forwarded to the upstream.
func TestToolsCall_ReservedPrefix(t *testing.T) {
	h := newHarness(t, unitConfig)
	for _, params := range []string{
		`{"name":"tollgate_unknown","arguments":{}}`,
		`{"name":"tollgate_unknown","arguments":{},"task":{"ttl":60000}}`,
		`{"name":"tollgate_","arguments":{}}`,
		`{"name":"tollgate_list_tasks_x"}`,
	} {
		res := h.route(t, &session.Session{ID: "s1"}, callRequest(params))
		if res.Forward != nil {
			t.Errorf("%s was forwarded", params)
			continue
		}
		if e := replyError(t, res); e.Code != jsonrpc.CodeInvalidParams || e.Data["error"] != "UnknownTool" {
			t.Errorf("%s: %+v, want -32602 UnknownTool", params, e)
		}
	}
	if up := h.up.methods(); slices.Contains(up, "tools/call") {
		t.Errorf("upstream saw %v", up)
	}
}

// TestToolsCall_NameBounded: a tool name longer than MaxToolNameBytes is refused with -32602
// before rules, Cedar or logs read it, in both eras; one of exactly the bound is governed as
// usual (here denied by drop_*). Issue 27: a 200 KB name made rule matching cost seconds.
func TestToolsCall_NameBounded(t *testing.T) {
	name := func(n int) string { return "drop_" + strings.Repeat("x", n-len("drop_")) }
	tests := []struct {
		name     string
		tool     string
		wantCode int
	}{
		{"at the bound", name(MaxToolNameBytes), -32003},
		{"one byte over", name(MaxToolNameBytes + 1), jsonrpc.CodeInvalidParams},
		{"200 KB", name(200 << 10), jsonrpc.CodeInvalidParams},
	}
	for _, tt := range tests {
		params := `{"name":"` + tt.tool + `","arguments":{}}`
		check := func(t *testing.T, e wireError) {
			t.Helper()
			if e.Code != tt.wantCode {
				t.Fatalf("code %d (%s), want %d", e.Code, e.Message, tt.wantCode)
			}
			if tt.wantCode == jsonrpc.CodeInvalidParams &&
				(e.Data["error"] != "InvalidParams" || !strings.Contains(e.Message, fmt.Sprint(MaxToolNameBytes))) {
				t.Errorf("got %+v, want InvalidParams naming the bound", e)
			}
		}
		t.Run("2025-11-25/"+tt.name, func(t *testing.T) {
			h := newHarness(t, unitConfig)
			check(t, replyError(t, h.route(t, &session.Session{ID: "s1"}, callRequest(params))))
		})
		t.Run("2026-07-28/"+tt.name, func(t *testing.T) {
			h := newHarness(t, unitConfig)
			h.modernUpstream()
			check(t, replyError(t, h.routeModern(modernExchange(t, "tools/call", params, tasksCaps))))
		})
	}
}
