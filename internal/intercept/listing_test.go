package intercept

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/session"
)

// TestUpstreamDeclaresToolTasks: which tasks capability values count as "the upstream runs
// task-augmented tools/call" (seed §5.4, docs/contract.md §2). The spec's shape is an object ({}); the
// seed's boolean true is accepted too; absent, null and false are not support.
func TestUpstreamDeclaresToolTasks(t *testing.T) {
	tests := []struct {
		name, tasks string // "" = no tasks member
		want        bool
	}{
		{"absent", "", false},
		{"null", `null`, false},
		{"empty_object", `{}`, false},
		{"list_and_cancel_only", `{"list":{},"cancel":{}}`, false},
		{"requests_empty", `{"requests":{}}`, false},
		{"requests_null", `{"requests":null}`, false},
		{"tools_empty", `{"requests":{"tools":{}}}`, false},
		{"call_null", `{"requests":{"tools":{"call":null}}}`, false},
		{"call_false", `{"requests":{"tools":{"call":false}}}`, false},
		{"call_object_spec_shape", `{"requests":{"tools":{"call":{}}}}`, true},
		{"call_object_with_members", `{"requests":{"tools":{"call":{"x":1}}}}`, true},
		{"call_true_seed_shape", `{"requests":{"tools":{"call":true}}}`, true},
		{"seed_tools_slash_call_key", `{"requests":{"tools/call":true}}`, false},
		{"sampling_only", `{"requests":{"sampling":{"createMessage":{}}}}`, false},
		{"not_an_object", `[1]`, false},
		{"tasks_string", `"yes"`, false},
		{"requests_wrong_type", `{"requests":"tools"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var raw []byte
			if tt.tasks != "" {
				raw = []byte(tt.tasks)
			}
			if got := upstreamDeclaresToolTasks(raw); got != tt.want {
				t.Errorf("upstreamDeclaresToolTasks(%s) = %v, want %v", tt.tasks, got, tt.want)
			}
		})
	}
}

// TestCapabilityRows covers the capability rows of seed §9.1 through the initialize handler.
// Where the seed and the spec disagree the spec wins (docs/contract.md §2): Tollgate declares
// {"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}, never {"requests":{"tools/call":true}},
// and there is no notifications.tasks.status capability in MCP 2025-11-25 — Tollgate neither
// adds one nor drops an upstream's unknown "notifications" member; notifications/tasks/status
// is sent whenever the owning session has an open stream.
func TestCapabilityRows(t *testing.T) {
	const tollgateTasks = `"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`
	tests := []struct {
		name, caps   string
		wantCaps     string
		wantSupports bool
	}{
		// Seed row expects {"tasks":{"requests":{"tools/call":true}}}; docs/contract.md §2 shape instead.
		{"Capability_injection_upstream_has_none", `{}`, `{` + tollgateTasks + `}`, false},
		// Seed row expects the upstream's capability preserved; Tollgate serves tasks/list and
		// tasks/cancel itself, so its own declaration replaces the upstream's in place (docs/contract.md §2).
		{"Capability_injection_upstream_has_tasks", `{"tasks":{"requests":{"tools":{"call":{}}}},"tools":{}}`, `{` + tollgateTasks + `,"tools":{}}`, true},
		{"Upstream_capability_detection_has_tasks", `{"tasks":{"requests":{"tools":{"call":true}}}}`, `{` + tollgateTasks + `}`, true},
		{"Upstream_capability_detection_no_tasks", `{"tools":{}}`, `{"tools":{},` + tollgateTasks + `}`, false},
		// SSE rows: superseded by the spec (no such capability); see the test comment.
		{"SSE_capability_detection_has_SSE", `{"notifications":{"tasks":{"status":true}}}`, `{"notifications":{"tasks":{"status":true}},` + tollgateTasks + `}`, false},
		{"SSE_capability_detection_no_SSE", `{}`, `{` + tollgateTasks + `}`, false},
		{"SSE_conditional_advertisement_upstream_has_SSE", `{"notifications":{"tasks":{"status":true}},"tasks":{"requests":{"tools":{"call":{}}}}}`,
			`{"notifications":{"tasks":{"status":true}},` + tollgateTasks + `}`, true},
		{"SSE_conditional_advertisement_upstream_no_SSE", `{"tasks":{"requests":{"tools":{"call":{}}}}}`, `{` + tollgateTasks + `}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, unitConfig)
			out := h.forward(t, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`,
				`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":`+tt.caps+`}}`)
			m, err := jsonrpc.Parse(out)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(jsonrpc.Member(m.Result, "capabilities")); got != tt.wantCaps {
				t.Errorf("capabilities\n got %s\nwant %s", got, tt.wantCaps)
			}
			if h.gw.ann.SupportsTasks() != tt.wantSupports {
				t.Errorf("UpstreamSupportsTasks = %v, want %v", h.gw.ann.SupportsTasks(), tt.wantSupports)
			}
			if strings.Contains(tt.name, "no_SSE") && strings.Contains(string(out), "notifications") {
				t.Errorf("Tollgate advertised notifications: %s", out)
			}
		})
	}
}

// TestInitializeSetsProtocol: the negotiated protocol version is recorded on the session.
func TestInitializeSetsProtocol(t *testing.T) {
	h := newHarness(t, unitConfig)
	x := exchange(t, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
	x.Session = &session.Session{ID: "s1"}
	res := h.router.Route(t.Context(), x)
	applyTransform(t, res.Forward, x, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{}}}`)
	if got := x.Session.Protocol(); got != "2025-06-18" {
		t.Errorf("Protocol() = %q", got)
	}
}

// TestAnnotationRows covers the annotation rows of seed §9.1 through tools/list. "Approval
// path" is a rule with action approve or policy; the seed's "preserve upstream annotation"
// row differs on purpose for absent/forbidden (docs/contract.md §2: → optional, F-005.6).
func TestAnnotationRows(t *testing.T) {
	tests := []struct {
		name          string
		upstreamTasks bool
		tool          string // upstream tool object
		want          string
	}{
		{"Annotation_upstream_no_tasks_no_approval", false, `{"name":"read_file"}`, "forbidden"},
		{"Annotation_upstream_no_tasks_no_approval_upstream_says_optional", false, `{"name":"read_file","execution":{"taskSupport":"optional"}}`, "forbidden"},
		{"Annotation_upstream_no_tasks_approval_possible", false, `{"name":"delete_x"}`, "required"},
		{"Annotation_upstream_no_tasks_policy", false, `{"name":"transfer_funds"}`, "required"},
		{"Annotation_upstream_has_tasks_no_approval_optional", true, `{"name":"a","execution":{"taskSupport":"optional"}}`, "optional"},
		{"Annotation_upstream_has_tasks_no_approval_required", true, `{"name":"a","execution":{"taskSupport":"required"}}`, "required"},
		{"Annotation_upstream_has_tasks_no_approval_absent", true, `{"name":"a"}`, "optional"},
		{"Annotation_forbidden_no_approval", true, `{"name":"a","execution":{"taskSupport":"forbidden"}}`, "optional"},
		{"Annotation_forbidden_approval_possible", true, `{"name":"delete_x","execution":{"taskSupport":"forbidden"}}`, "required"},
		{"Annotation_force_required_override", false, `{"name":"audit_log"}`, "required"},
		{"Annotation_force_required_override_upstream_forbidden", true, `{"name":"audit_log","execution":{"taskSupport":"forbidden"}}`, "required"},
		{"Annotation_deny", true, `{"name":"drop_x","execution":{"taskSupport":"required"}}`, "forbidden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, unitConfig)
			h.initUpstream(t, tt.upstreamTasks)
			out := h.listTools(t, `[`+tt.tool+`],"nextCursor":"n"`)
			m, err := jsonrpc.Parse(out)
			if err != nil {
				t.Fatal(err)
			}
			var r struct {
				Tools []struct {
					Execution struct {
						TaskSupport string `json:"taskSupport"`
					} `json:"execution"`
				} `json:"tools"`
			}
			if err := json.Unmarshal(m.Result, &r); err != nil || len(r.Tools) != 1 {
				t.Fatalf("tools/list = %s", out)
			}
			if got := r.Tools[0].Execution.TaskSupport; got != tt.want {
				t.Errorf("taskSupport = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestSyncApprovalAnnotations: hold, promote and block serve task-less clients, so approval
// tools are advertised optional instead of required (docs/contract.md §3).
func TestSyncApprovalAnnotations(t *testing.T) {
	for _, mode := range []string{"error", "promote", "block", "hold"} {
		t.Run(mode, func(t *testing.T) {
			cfg := strings.Replace(unitConfig, "tasks: {default_ttl: 10m, max_ttl: 1h, sync_approval: error}",
				"tasks: {default_ttl: 10m, max_ttl: 1h, sync_approval: "+mode+"}", 1)
			h := newHarness(t, cfg)
			out := string(h.listTools(t, `[{"name":"delete_x"}],"nextCursor":"n"`))
			want := `"taskSupport":"required"`
			if mode != "error" {
				want = `"taskSupport":"optional"`
			}
			if !strings.Contains(out, want) {
				t.Errorf("tools/list = %s, want %s", out, want)
			}
		})
	}
}

// TestToolsListNullNextCursor: "nextCursor": null means no further page (Refresh already reads
// it so); the page is the last one and must carry Tollgate's tools.
func TestToolsListNullNextCursor(t *testing.T) {
	h := newHarness(t, unitConfig)
	out := string(h.listTools(t, `[{"name":"a"}],"nextCursor":null`))
	if !strings.Contains(out, `"tollgate_list_tasks"`) {
		t.Errorf("a tools/list page with \"nextCursor\": null is the last page and must carry Tollgate's tools: %s", out)
	}
}
