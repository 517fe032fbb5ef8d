package gwtools

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// DiagramsURI is the resource with Tollgate's state machines (docs/contract.md §4, seed 000 "New
// Resources").
const DiagramsURI = "tollgate://diagrams"

// edge is one arrow of a diagram; "" as From or To is the start/end pseudo-state [*].
type edge struct{ From, To, Label string }

// approvalFlow is how a held call gets decided (docs/contract.md §3 approval lifecycle).
var approvalFlow = []edge{
	{"", "held", "rule approve, Cedar permit with decision approve, or force_required"},
	{"held", "task_created", "task-augmented tools/call (params.task)"},
	{"held", "task_required_error", "plain call, sync_approval error (-32601 TaskRequired)"},
	{"held", "task_created", "plain call, sync_approval promote (result names the task)"},
	{"held", "task_created", "plain call, sync_approval block (call waits for the decision)"},
	{"held", "task_created", "plain call, sync_approval hold (waits up to hold_budget, then a result naming the task)"},
	{"held", "task_created", "same plain call again (same owner, tool, arguments): attaches to the existing task"},
	{"task_required_error", "", ""},
	{"task_created", "notified", "workflow destination: console, webhook, slack or elicitation"},
	{"notified", "notified", "requester tries to decide own request (refused)"},
	{"notified", "approved", "approver approves via admin API or console"},
	{"notified", "approved", "timeout with on_timeout approve"},
	{"notified", "rejected", "approver rejects (-32007 ApprovalRejected)"},
	{"notified", "timed_out", "timeout with on_timeout deny (-32008 ApprovalTimedOut)"},
	{"notified", "cancelled", "requester cancels"},
	{"notified", "expired", "task TTL ends (-32005 TaskExpired)"},
	{"approved", "rechecked", "args hash and rule or policy re-checked"},
	{"rechecked", "executing", "still allowed: runs once, at once"},
	{"rechecked", "failed", "policy changed (-32011 PolicyChanged) or now denied (-32003)"},
	{"executing", "executing", "the tool asks (elicitation, sampling, roots): input_required, the owner answers on tasks/result, tasks/update or tollgate_answer_question, else declined after tasks.input_timeout"},
	{"executing", "completed", "upstream result stored until TTL"},
	{"executing", "failed", "upstream error"},
	{"completed", "", ""},
	{"failed", "", ""},
	{"rejected", "", ""},
	{"timed_out", "", ""},
	{"cancelled", "", ""},
	{"expired", "", ""},
}

// toolCallLifecycle is what happens to one tools/call (docs/contract.md §2 decision matrix, §3 rules).
var toolCallLifecycle = []edge{
	{"", "received", "tools/call from the client"},
	{"received", "own_tool", "tollgate_* name: served by Tollgate, never forwarded"},
	{"own_tool", "", ""},
	{"received", "matched", "first matching rule by glob, else defaults.action"},
	{"matched", "forwarded", "action forward"},
	{"matched", "denied", "action deny"},
	{"matched", "policy", "action policy"},
	{"matched", "held", "action approve"},
	{"policy", "forwarded", "Cedar permit"},
	{"policy", "held", "Cedar permit with decision approve"},
	{"policy", "denied", "Cedar forbid, no match, or evaluation error (fail closed)"},
	{"denied", "", "-32003 PolicyDenied, never reaches the upstream"},
	{"forwarded", "upstream_call", "plain call, or task call the upstream supports"},
	{"forwarded", "accelerated_task", "task call, upstream tool without task support"},
	{"accelerated_task", "upstream_call", "Tollgate runs it as an approved task"},
	{"upstream_call", "answered", "result or error relayed to the client"},
	{"upstream_call", "answered", "-32000 unreachable or -32001 timeout"},
	{"held", "approval", "see the approval flow diagram"},
	{"approval", "answered", "task result via tasks/result or tollgate_get_task_result"},
	{"answered", "", ""},
}

type diagram struct {
	ID          string `json:"id"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Format      string `json:"format"`
	Mermaid     string `json:"mermaid"`
}

// Diagrams is the content of tollgate://diagrams: a JSON object with mermaid stateDiagram-v2
// texts for the task lifecycle, the approval flow and the tool-call lifecycle.
func Diagrams() json.RawMessage {
	doc := struct {
		Diagrams []diagram `json:"diagrams"`
	}{[]diagram{
		{
			ID:          "task_lifecycle",
			Title:       "Tollgate task lifecycle",
			Description: "Internal task states with their MCP wire status; every allowed transition.",
			Format:      "mermaid",
			Mermaid:     TaskLifecycleMermaid(),
		},
		{
			ID:          "approval_flow",
			Title:       "Approval flow",
			Description: "How a call held for human approval is decided and executed.",
			Format:      "mermaid",
			Mermaid:     mermaid(approvalFlow, nil),
		},
		{
			ID:          "tool_call_lifecycle",
			Title:       "Tool call lifecycle",
			Description: "What Tollgate does with one tools/call.",
			Format:      "mermaid",
			Mermaid:     mermaid(toolCallLifecycle, nil),
		},
	}}
	raw, err := jsonrpc.Marshal(doc)
	if err != nil {
		panic("gwtools: diagrams: " + err.Error()) // static data
	}
	return raw
}

// DiagramsResource is the MCP Resource object for resources/list.
func DiagramsResource() json.RawMessage {
	raw, _ := jsonrpc.Marshal(map[string]string{
		"uri":         DiagramsURI,
		"name":        "tollgate-diagrams",
		"title":       "Tollgate state machines",
		"mimeType":    "application/json",
		"description": "Mermaid state diagrams: task lifecycle, approval flow, tool call lifecycle.",
	})
	return raw
}

// DiagramsReadResult is the resources/read result for tollgate://diagrams.
func DiagramsReadResult() json.RawMessage {
	raw, _ := jsonrpc.Marshal(map[string]any{
		"contents": []map[string]string{{
			"uri":      DiagramsURI,
			"mimeType": "application/json",
			"text":     string(Diagrams()),
		}},
	})
	return raw
}

// TaskLifecycleMermaid renders tasks.Transitions() with the creation edges and the wire status
// of each state (docs/contract.md §3).
func TaskLifecycleMermaid() string {
	var edges []edge
	for _, t := range append(tasks.Creations(), tasks.Transitions()...) {
		edges = append(edges, edge{string(t.From), string(t.To), t.Trigger})
	}
	notes := map[string]string{}
	for _, s := range tasks.States() {
		notes[string(s)] = "wire status " + s.Wire()
		if s == tasks.Executing {
			notes[string(s)] += ", input_required while a question of the tool waits for the owner"
		}
		if s.Terminal() {
			edges = append(edges, edge{string(s), "", "removed when its TTL ends"})
		}
	}
	return mermaid(edges, notes)
}

// mermaid renders edges as a stateDiagram-v2. descriptions adds "state : text" lines.
func mermaid(edges []edge, descriptions map[string]string) string {
	var b strings.Builder
	b.WriteString("stateDiagram-v2\n")
	seen := map[string]bool{}
	for _, e := range edges {
		for _, s := range []string{e.From, e.To} {
			if s == "" || seen[s] {
				continue
			}
			seen[s] = true
			if d, ok := descriptions[s]; ok {
				fmt.Fprintf(&b, "    %s : %s\n", s, label(d))
			}
		}
	}
	for _, e := range edges {
		line := fmt.Sprintf("    %s --> %s", node(e.From), node(e.To))
		if e.Label != "" {
			line += " : " + label(e.Label)
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

func node(s string) string {
	if s == "" {
		return "[*]"
	}
	return s
}

// label keeps a text on one mermaid line: a colon would start a new description and
// semicolons or newlines end the statement.
var labelReplacer = strings.NewReplacer(":", " =", ";", ",", "\n", " ", "\r", " ")

func label(s string) string { return labelReplacer.Replace(s) }
