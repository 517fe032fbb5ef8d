package gwtools

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

func TestDiagrams(t *testing.T) {
	var doc struct {
		Diagrams []diagram `json:"diagrams"`
	}
	if err := json.Unmarshal(Diagrams(), &doc); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, d := range doc.Diagrams {
		ids[d.ID] = d.Mermaid
	}
	for _, id := range []string{"task_lifecycle", "approval_flow", "tool_call_lifecycle"} {
		m, ok := ids[id]
		if !ok {
			t.Fatalf("diagram %s missing", id)
		}
		checkMermaid(t, id, m)
	}

	life := ids["task_lifecycle"]
	for _, s := range tasks.States() {
		if !regexp.MustCompile(`(?m)^\s+` + string(s) + `\b`).MatchString(life) {
			t.Errorf("state %s missing from the lifecycle diagram", s)
		}
	}
	for _, tr := range tasks.Transitions() {
		edge := "    " + string(tr.From) + " --> " + string(tr.To) + " :"
		if !strings.Contains(life, edge) {
			t.Errorf("transition %s -> %s missing", tr.From, tr.To)
		}
	}
}

// checkMermaid checks the grammar subset we emit: a header, then "id : text" or
// "a --> b [: label]" lines with identifiers or [*].
func checkMermaid(t *testing.T, id, m string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(m, "\n"), "\n")
	if lines[0] != "stateDiagram-v2" {
		t.Fatalf("%s: header %q", id, lines[0])
	}
	node := `(\[\*\]|[a-z][a-z_]*)`
	re := regexp.MustCompile(`^    (` + node + ` --> ` + node + `( : [^:;]+)?|[a-z][a-z_]* : [^:;]+)$`)
	edges := 0
	for _, l := range lines[1:] {
		if !re.MatchString(l) {
			t.Errorf("%s: bad mermaid line %q", id, l)
		}
		if strings.Contains(l, "-->") {
			edges++
		}
	}
	if edges == 0 {
		t.Errorf("%s: no edges", id)
	}
}

func TestLabelSanitised(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"on_timeout: approve", "on_timeout = approve"},
		{"a;b\nc", "a,b c"},
	}
	for _, tc := range tests {
		if got := label(tc.in); got != tc.want {
			t.Errorf("label(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestDiagramsResource(t *testing.T) {
	var res map[string]string
	if err := json.Unmarshal(DiagramsResource(), &res); err != nil {
		t.Fatal(err)
	}
	if res["uri"] != "tollgate://diagrams" || res["mimeType"] != "application/json" || res["name"] == "" || res["description"] == "" {
		t.Fatalf("resource = %v", res)
	}
	var read struct {
		Contents []struct{ URI, MimeType, Text string }
	}
	if err := json.Unmarshal(DiagramsReadResult(), &read); err != nil {
		t.Fatal(err)
	}
	if len(read.Contents) != 1 || read.Contents[0].URI != DiagramsURI || read.Contents[0].Text != string(Diagrams()) {
		t.Fatalf("read result = %+v", read)
	}
}
