package intercept

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

// TestHeldProgressOrder: on a held call's stream the upstream's progress comes under the
// request's own token after Tollgate's own notifications, whose ticks then stop; its values are
// raised past Tollgate's own (and total with them) so every value is greater than the last;
// without a token only log messages pass.
func TestHeldProgressOrder(t *testing.T) {
	var out []string
	emit := func(b []byte) bool { out = append(out, string(b)); return true }
	x := &Exchange{Msg: mustParse(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":"mine"}}}`)}
	p := newHeldProgress(x, emit, "Awaiting approval", 0, `{}`)
	p.tick()
	p.tick()
	up := func(progress string) tasks.Note {
		return tasks.Note{Method: tasks.MethodProgress, Params: json.RawMessage(`{"progressToken":"tollgate-exec-tg_1","progress":` + progress + `,"total":5,"message":"step"}`)}
	}
	p.note(up("1"))
	p.note(up("2"))
	p.note(tasks.Note{Method: tasks.MethodLog, Params: json.RawMessage(`{"level":"info","data":"hi"}`)})
	if p.tick() {
		t.Error("Tollgate's own ticks go on after the upstream's progress began")
	}
	last := -1.0
	for i, s := range out {
		m := mustParse(t, s)
		if m.Method != tasks.MethodProgress {
			continue
		}
		if tok := string(jsonrpc.Member(m.Params, "progressToken")); tok != `"mine"` {
			t.Errorf("notification %d has token %s", i, tok)
		}
		var v float64
		_ = json.Unmarshal(jsonrpc.Member(m.Params, "progress"), &v)
		if v <= last {
			t.Errorf("notification %d: progress %v after %v", i, v, last)
		}
		last = v
	}
	if len(out) != 5 || !strings.Contains(out[2], `"progress":3,"total":7`) || !strings.Contains(out[4], `notifications/message`) {
		t.Errorf("stream:\n%s", strings.Join(out, "\n"))
	}

	out = nil
	bare := &Exchange{Msg: mustParse(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`)}
	p = newHeldProgress(bare, emit, "", 0, `{}`)
	p.note(up("1"))
	p.note(tasks.Note{Method: tasks.MethodLog, Params: json.RawMessage(`{"level":"info","data":"hi"}`)})
	if len(out) != 1 || !strings.Contains(out[0], "notifications/message") {
		t.Errorf("without a progressToken: %q, want the log message only", out)
	}
}

// TestTaskNote: a 2025-11-25 task call's notes carry the creating request's token and the
// related-task _meta; a held call's and a 2026-07-28 task's are not sent this way.
func TestTaskNote(t *testing.T) {
	n := tasks.Note{Method: tasks.MethodProgress, Params: json.RawMessage(`{"progressToken":"tollgate-exec-tg_1","progress":1,"_meta":{"k":1}}`)}
	b := TaskNote(&tasks.Task{ID: "tg_1", ProgressToken: json.RawMessage(`7`)}, n)
	if s := string(b); !strings.Contains(s, `"progressToken":7`) || !strings.Contains(s, `"_meta":{"k":1,"io.modelcontextprotocol/related-task":{"taskId":"tg_1"}}`) {
		t.Errorf("task note: %s", b)
	}
	if b := TaskNote(&tasks.Task{ID: "tg_1"}, n); b != nil {
		t.Errorf("progress without the request's token: %s", b)
	}
	if b := TaskNote(&tasks.Task{ID: "tg_1", IdemKey: "k", ProgressToken: json.RawMessage(`7`)}, n); b != nil {
		t.Errorf("a held call's note as a task note: %s", b)
	}
	if b := TaskNote(&tasks.Task{ID: "tg_1", Era: tasks.EraModern, ProgressToken: json.RawMessage(`7`)}, n); b != nil {
		t.Errorf("a 2026-07-28 task's note: %s", b)
	}
}

func mustParse(t *testing.T, s string) *jsonrpc.Message {
	t.Helper()
	m, err := jsonrpc.Parse([]byte(s))
	if err != nil {
		t.Fatalf("%v: %s", err, s)
	}
	return m
}
