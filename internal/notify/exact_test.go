package notify

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// TestPayloadNumbersExact: webhook and Slack messages show the arguments exactly as the
// upstream will receive them — numbers as written, never re-encoded through float64.
func TestPayloadNumbersExact(t *testing.T) {
	tk := &tasks.Task{ID: "tg_n", Tool: "transfer", Workflow: "w", State: tasks.AwaitingApproval,
		Arguments: json.RawMessage(`{"account_id":9007199254740993,"ratio":1.0,"huge":1E400,"big":123456789012345678901234567890,"pin":7777}`)}
	it := item{event: EventRequested, task: tk, wf: config.Workflow{RedactFields: []string{"pin"}}}
	wh, err := webhookBody(it, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := `"arguments":{"account_id":9007199254740993,"ratio":1.0,"huge":1E400,"big":123456789012345678901234567890,"pin":"[REDACTED]"}`; !strings.Contains(string(wh), want) {
		t.Errorf("webhook body %s\nlacks %s", wh, want)
	}
	sl, err := slackBody(it, "")
	if err != nil {
		t.Fatal(err)
	}
	var m Slack
	if err := json.Unmarshal(sl, &m); err != nil {
		t.Fatal(err)
	}
	text, _ := json.Marshal(m.Blocks)
	for _, s := range []string{`9007199254740993`, `\"ratio\": 1.0`, `1E400`, `123456789012345678901234567890`} {
		if !strings.Contains(string(text), s) {
			t.Errorf("slack blocks lack %s: %s", s, text)
		}
	}
	if strings.Contains(string(text), "7777") {
		t.Errorf("slack shows a redacted value: %s", text)
	}
}
