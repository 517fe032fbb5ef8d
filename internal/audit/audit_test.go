package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/disclose"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

const secretArg = "hunter2-SECRET-ARG"

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func task(state tasks.State, version uint64) *tasks.Task {
	return &tasks.Task{
		ID:          "tg_11111111-2222-4333-8444-555555555555",
		Owner:       "session:abcdef0123456789",
		RequestedBy: "carol",
		Tool:        "delete_user",
		Arguments:   json.RawMessage(`{"password":"` + secretArg + `"}`),
		ArgsHash:    "deadbeef",
		Workflow:    "default",
		State:       state,
		CreatedAt:   t0,
		UpdatedAt:   t0.Add(time.Duration(version) * time.Second),
		Version:     version,
	}
}

func decode(t *testing.T, b []byte) []Event {
	t.Helper()
	var out []Event
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

func kinds(es []Event) string {
	var s []string
	for _, e := range es {
		s = append(s, string(e.Kind)+":"+e.Actor)
	}
	return strings.Join(s, ",")
}

func TestOnTaskChange(t *testing.T) {
	approve := &tasks.Decision{Approved: true, By: "alice", Reason: "ok", At: t0.Add(time.Minute)}
	reject := &tasks.Decision{Approved: false, By: "bob", Reason: "no", At: t0.Add(time.Minute)}
	with := func(tk *tasks.Task, f func(*tasks.Task)) *tasks.Task { f(tk); return tk }

	tests := []struct {
		name  string
		calls []*tasks.Task
		want  string
	}{
		{"approve and execute", []*tasks.Task{
			task(tasks.AwaitingApproval, 1),
			with(task(tasks.Approved, 2), func(k *tasks.Task) { k.Decision = approve }),
			with(task(tasks.Executing, 3), func(k *tasks.Task) { k.Decision = approve }),
			with(task(tasks.Completed, 4), func(k *tasks.Task) { k.Decision = approve }),
		}, "created:carol,approved:alice,executed:"},
		{"reject", []*tasks.Task{
			task(tasks.AwaitingApproval, 1),
			with(task(tasks.Rejected, 2), func(k *tasks.Task) { k.Decision = reject }),
		}, "created:carol,rejected:bob"},
		{"timeout deny without decision", []*tasks.Task{
			task(tasks.AwaitingApproval, 1),
			task(tasks.TimedOut, 2),
		}, "created:carol,timed_out:system:on_timeout"},
		{"timeout approve", []*tasks.Task{
			task(tasks.AwaitingApproval, 1),
			with(task(tasks.Approved, 2), func(k *tasks.Task) {
				k.Decision = &tasks.Decision{Approved: true, By: "system:on_timeout"}
			}),
		}, "created:carol,approved:system:on_timeout"},
		{"accelerated", []*tasks.Task{
			with(task(tasks.Approved, 1), func(k *tasks.Task) { k.Accelerated = true; k.Workflow = "" }),
			with(task(tasks.Executing, 2), func(k *tasks.Task) { k.Accelerated = true }),
			with(task(tasks.Failed, 3), func(k *tasks.Task) {
				k.Accelerated = true
				k.Error = jsonrpc.NewError(jsonrpc.CodePolicyChanged, "PolicyChanged", "policy changed: "+secretArg)
			}),
		}, "created:carol,failed:"},
		{"accelerated as the manager creates it", []*tasks.Task{
			with(task(tasks.Approved, 1), func(k *tasks.Task) {
				k.Accelerated, k.Workflow = true, ""
				k.Decision = &tasks.Decision{Approved: true, By: "system:accelerated"}
			}),
			with(task(tasks.Completed, 3), func(k *tasks.Task) { k.Accelerated = true }),
		}, "created:carol,approved:system:accelerated,executed:"},
		{"duplicates and stale versions ignored", []*tasks.Task{
			task(tasks.AwaitingApproval, 1),
			task(tasks.AwaitingApproval, 2),
			with(task(tasks.Cancelled, 4), func(k *tasks.Task) {}),
			task(tasks.Executing, 3),
			task(tasks.Expired, 5),
		}, "created:carol,cancelled:"},
		{"expiry while waiting", []*tasks.Task{
			task(tasks.AwaitingApproval, 1),
			task(tasks.Expired, 2),
		}, "created:carol,expired:"},
		{"nil and empty ignored", []*tasks.Task{nil, {}}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := New(&buf)
			var from tasks.State // each call is the transition from the one before
			for _, c := range tc.calls {
				if c == nil {
					l.OnTaskChange(tasks.Transition{})
					continue
				}
				l.OnTaskChange(tasks.Transition{From: from, To: c.State, Task: c})
				from = c.State
			}
			es := decode(t, buf.Bytes())
			if got := kinds(es); got != tc.want {
				t.Fatalf("events = %q, want %q", got, tc.want)
			}
			out := buf.String()
			for _, bad := range []string{secretArg, "password", "abcdef0123456789"} {
				if strings.Contains(out, bad) {
					t.Errorf("audit output leaks %q: %s", bad, out)
				}
			}
			for _, e := range es {
				if e.Owner != disclose.OwnerHash("session:abcdef0123456789") || e.ArgsHash != "deadbeef" {
					t.Errorf("event %+v: owner/args hash not set", e)
				}
			}
		})
	}
}

func TestEventFields(t *testing.T) {
	var buf bytes.Buffer
	l := New(&buf)
	tk := task(tasks.AwaitingApproval, 1)
	l.OnTaskChange(tasks.Transition{To: tk.State, Task: tk})
	d := &tasks.Decision{Approved: false, By: "bob", Reason: "line1\nline2 <b>", At: t0.Add(time.Minute)}
	tk = task(tasks.Rejected, 2)
	tk.Decision = d
	l.OnTaskChange(tasks.Transition{From: tasks.AwaitingApproval, To: tk.State, Task: tk})

	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %d: %q", len(lines), buf.String())
	}
	var e map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &e); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"time": "2026-03-01T12:01:00Z", "kind": "rejected", "task_id": tk.ID, "tool": "delete_user",
		"workflow": "default", "owner": disclose.OwnerHash(tk.Owner), "actor": "bob",
		"reason": "line1\nline2 <b>", "args_hash": "deadbeef",
	}
	for k, v := range want {
		if e[k] != v {
			t.Errorf("%s = %v, want %v", k, e[k], v)
		}
	}
	if len(e) != len(want) {
		t.Errorf("unexpected fields: %v", e)
	}
	if !strings.Contains(lines[1], "<b>") {
		t.Errorf("HTML escaped: %s", lines[1])
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	for i := range 2 { // reopening appends
		l, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		l.Record(Event{Kind: KindCreated, TaskID: fmt.Sprintf("tg_%d", i)})
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	es := decode(t, b)
	if len(es) != 2 || es[0].TaskID != "tg_0" || es[1].TaskID != "tg_1" || es[0].Time.IsZero() {
		t.Fatalf("file = %q", b)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("mode = %v, want 0600", perm)
	}

	for _, p := range []string{"", "-"} {
		l, err := Open(p)
		if err != nil || l.w != os.Stderr || l.Close() != nil {
			t.Errorf("Open(%q) = %v, %v; want stderr", p, l, err)
		}
	}
	if _, err := Open(filepath.Join(dir, "missing", "x.jsonl")); err == nil {
		t.Error("Open in a missing directory succeeded")
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) { f.n++; return 0, os.ErrClosed }

func TestRecordWriteFailureDoesNotPanic(t *testing.T) {
	fw := &failWriter{}
	l := New(fw)
	l.Record(Event{Kind: KindCreated, TaskID: "a"})
	l.Record(Event{Kind: KindCreated, TaskID: "b"})
	if fw.n != 2 {
		t.Fatalf("writes = %d, want 2", fw.n)
	}
}

func TestConcurrentRecordWholeLines(t *testing.T) {
	var buf syncBuffer
	l := New(&buf)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				l.Record(Event{Kind: KindExecuted, TaskID: fmt.Sprintf("tg_%d_%d", g, i), Reason: strings.Repeat("x", 300)})
				tk := task(tasks.AwaitingApproval, 1)
				tk.ID = fmt.Sprintf("tg_sub_%d_%d", g, i)
				l.OnTaskChange(tasks.Transition{To: tk.State, Task: tk})
			}
		}()
	}
	wg.Wait()
	if es := decode(t, buf.Bytes()); len(es) != 8*50*2 {
		t.Fatalf("got %d events, want %d", len(es), 8*50*2)
	}
}

func TestSeenIsBounded(t *testing.T) {
	l := New(&bytes.Buffer{})
	for i := range seenLimit + 100 {
		tk := task(tasks.Cancelled, 1)
		tk.ID = fmt.Sprintf("tg_%d", i)
		l.OnTaskChange(tasks.Transition{From: tasks.AwaitingApproval, To: tk.State, Task: tk})
	}
	if len(l.seen) > seenLimit || len(l.finished) > seenLimit {
		t.Fatalf("seen=%d finished=%d, want <= %d", len(l.seen), len(l.finished), seenLimit)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

func (s *syncBuffer) String() string { return string(s.Bytes()) }

func (s *syncBuffer) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Reset()
}

func TestFailedEventNamesErrorOnly(t *testing.T) {
	tests := []struct {
		name string
		err  *jsonrpc.Error
		want string
	}{
		{"named", jsonrpc.NewError(jsonrpc.CodePolicyChanged, "PolicyChanged", "changed: "+secretArg), "PolicyChanged (-32011)"},
		{"upstream without name", &jsonrpc.Error{Code: -32099, Message: "bad " + secretArg}, "code -32099"},
		{"none", nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := New(&buf)
			tk := task(tasks.Failed, 3)
			tk.Error = tc.err
			l.OnTaskChange(tasks.Transition{From: tasks.Executing, To: tk.State, Task: tk})
			es := decode(t, buf.Bytes())
			if len(es) != 1 || es[0].Kind != KindFailed || es[0].Error != tc.want {
				t.Fatalf("events = %+v, want one failed with error %q", es, tc.want)
			}
			if strings.Contains(buf.String(), secretArg) {
				t.Errorf("error message leaked: %s", &buf)
			}
		})
	}
}
