package stdio

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/source"
	"github.com/tollgate-mcp/tollgate/internal/upstream"
)

// childBin is the test server (testdata/child), built once.
var childBin string

func TestMain(m *testing.M) {
	if bin := os.Getenv(helperEnv); bin != "" { // TestTollgateAsHelper's run: the child is built
		childBin = bin
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "stdio-child")
	if err != nil {
		panic(err)
	}
	// Readable by every user: TestRunAsDropsUser runs it as nobody.
	if err := os.Chmod(dir, 0o755); err != nil {
		panic(err)
	}
	childBin = filepath.Join(dir, "child")
	if out, err := exec.Command("go", "build", "-o", childBin, "./testdata/child").CombinedOutput(); err != nil {
		panic(fmt.Sprintf("building the test child: %v\n%s", err, out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// logBuf collects log lines for assertions.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type fixture struct {
	t    *testing.T
	tr   *Transport
	up   *upstream.Client
	logs *logBuf
	exit chan struct{}
}

func start(t *testing.T, o Options) *fixture {
	t.Helper()
	if o.Command == "" {
		o.Command = childBin
	}
	logs := &logBuf{}
	o.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if o.StopGrace == 0 {
		o.StopGrace = 200 * time.Millisecond
	}
	tr := New(o)
	f := &fixture{t: t, tr: tr, logs: logs, exit: make(chan struct{}, 64)}
	tr.onExit = func() { f.exit <- struct{}{} }
	up, err := upstream.New("http://stdio/", upstream.Options{Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	f.up = up
	t.Cleanup(func() { tr.Close() })
	return f
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func (f *fixture) open() *upstream.Session {
	f.t.Helper()
	s, err := f.up.Handshake(ctx(f.t), json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`), "2025-11-25")
	if err != nil {
		f.t.Fatal(err)
	}
	if s.ID == "" {
		f.t.Fatal("no session id minted")
	}
	return s
}

func callBody(id, tool, args string) []byte {
	return jsonrpc.Request(json.RawMessage(id), "tools/call", json.RawMessage(`{"name":"`+tool+`","arguments":`+args+`}`))
}

// call sends tools/call and returns the reply (text of the first content item, or the error).
func (f *fixture) call(s *upstream.Session, id, tool, args string, onOther func(*jsonrpc.Message)) (*upstream.Reply, string) {
	f.t.Helper()
	rep, err := f.up.Call(ctx(f.t), s.Header(), callBody(id, tool, args), onOther)
	if err != nil {
		f.t.Fatalf("%s: %v", tool, err)
	}
	if rep.Msg.Error != nil {
		return rep, ""
	}
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(rep.Msg.Result, &r); err != nil || len(r.Content) == 0 {
		f.t.Fatalf("%s: result %s", tool, rep.Msg.Result)
	}
	return rep, r.Content[0].Text
}

func (f *fixture) awaitExit() {
	f.t.Helper()
	select {
	case <-f.exit:
	case <-ctx(f.t).Done():
		f.t.Fatal("no process exit")
	}
}

func TestReplyKeepsTheRequestID(t *testing.T) {
	f := start(t, Options{})
	s := f.open()
	for _, id := range []string{`7`, `"abc"`, `9007199254740993`} {
		rep, text := f.call(s, id, "echo", `{"text":"hi"}`, nil)
		if text != "hi" || string(rep.Msg.ID) != id {
			t.Fatalf("id %s: got id %s text %q", id, rep.Msg.ID, text)
		}
		if !upstream.IsJSON(rep.Header) {
			t.Fatalf("a plain reply should be application/json, got %q", rep.Header.Get("Content-Type"))
		}
	}
}

func TestSessionsHaveTheirOwnProcess(t *testing.T) {
	f := start(t, Options{})
	a, b := f.open(), f.open()
	_, pa := f.call(a, "1", "pid", `{}`, nil)
	_, pb := f.call(b, "1", "pid", `{}`, nil)
	if pa == pb {
		t.Fatalf("two sessions share process %s", pa)
	}
	f.call(a, "2", "set", `{"text":"only-a"}`, nil)
	if _, got := f.call(b, "3", "get", `{}`, nil); got != "" {
		t.Fatalf("session b sees a's state %q", got)
	}
	if _, got := f.call(a, "3", "get", `{}`, nil); got != "only-a" {
		t.Fatalf("session a lost its state: %q", got)
	}
	if n := f.tr.Processes(); n != 2 {
		t.Fatalf("processes = %d, want 2", n)
	}
}

func TestDeleteStopsTheProcessAndForgetsTheSession(t *testing.T) {
	f := start(t, Options{})
	s := f.open()
	f.up.EndSession(s)
	if n := f.tr.Processes(); n != 0 {
		t.Fatalf("processes after DELETE = %d", n)
	}
	rep, err := f.up.Call(ctx(t), s.Header(), callBody("1", "echo", `{}`), nil)
	if st := upstream.StatusOf(rep, err); st != http.StatusNotFound {
		t.Fatalf("request on an ended session: status %d (%v), want 404", st, err)
	}
	// A GET and a DELETE of an unknown session are 404 too.
	for _, m := range []string{http.MethodGet, http.MethodDelete} {
		resp, err := f.up.Send(ctx(t), m, s.Header(), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("%s unknown session: %d", m, resp.StatusCode)
		}
	}
}

func TestRequestWithoutSession(t *testing.T) {
	f := start(t, Options{})
	rep, err := f.up.Call(ctx(t), nil, callBody("1", "echo", `{}`), nil)
	if err != nil || rep.Status != http.StatusBadRequest || rep.Msg.Error == nil {
		t.Fatalf("got %+v, %v; want 400 with a JSON-RPC error", rep, err)
	}
	if f.tr.Processes() != 0 {
		t.Fatal("a request without a session started a process")
	}
}

func TestProgressGoesOnThePOSTStream(t *testing.T) {
	f := start(t, Options{})
	s := f.open()
	var got []*jsonrpc.Message
	body := jsonrpc.Request(json.RawMessage(`5`), "tools/call", json.RawMessage(`{"name":"progress","arguments":{},"_meta":{"progressToken":"tok-1"}}`))
	rep, err := f.up.Call(ctx(t), s.Header(), body, func(m *jsonrpc.Message) { got = append(got, m) })
	if err != nil {
		t.Fatal(err)
	}
	if !upstream.IsEventStream(rep.Header) {
		t.Fatalf("content type %q, want an event stream", rep.Header.Get("Content-Type"))
	}
	if len(got) != 1 || got[0].Method != "notifications/progress" || !strings.Contains(string(got[0].Params), `"tok-1"`) {
		t.Fatalf("related messages: %v", got)
	}
	if string(rep.Msg.ID) != "5" {
		t.Fatalf("reply id %s", rep.Msg.ID)
	}
}

func TestServerRequestAnsweredOnlyByItsSession(t *testing.T) {
	f := start(t, Options{})
	a, b := f.open(), f.open()
	done := make(chan string, 1)
	go func() {
		_, text := f.call(a, `"q"`, "ask", `{}`, func(m *jsonrpc.Message) {
			if m.Kind != jsonrpc.KindRequest || m.Method != "roots/list" {
				return
			}
			// Session b answers first: it must not reach a's process.
			answer := func(s *upstream.Session, roots string) {
				resp, err := f.up.Send(ctx(t), http.MethodPost, s.Header(),
					[]byte(`{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"roots":"`+roots+`"}}`))
				if err == nil {
					resp.Body.Close()
				}
			}
			answer(b, "from-b")
			answer(a, "from-a")
		})
		done <- text
	}()
	select {
	case text := <-done:
		if text != `answered {"roots":"from-a"}` {
			t.Fatalf("got %q", text)
		}
	case <-ctx(t).Done():
		t.Fatal("no answer")
	}
}

func TestUnrelatedMessagesGoToTheGETStream(t *testing.T) {
	f := start(t, Options{})
	s := f.open()
	st, err := f.up.Listen(ctx(t), s.Header())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Second GET on the same session is refused.
	resp, err := f.up.Send(ctx(t), http.MethodGet, s.Header(), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("second GET: %d", resp.StatusCode)
	}
	// A message sent when none of the session's requests is in flight belongs to none.
	if _, text := f.call(s, "1", "later", `{}`, nil); text != "ok" {
		t.Fatalf("later: %q", text)
	}
	m, err := st.Next()
	if err != nil || m.Method != "notifications/tools/list_changed" {
		t.Fatalf("GET stream: %v %v", m, err)
	}
	// Ending the session ends its GET stream.
	f.up.EndSession(s)
	if _, err := st.Next(); err == nil {
		t.Fatal("GET stream still open after DELETE")
	}
}

func TestExitFailsInflightRequests(t *testing.T) {
	f := start(t, Options{})
	s := f.open()
	rep, _ := f.call(s, "9", "die", `{}`, nil)
	e := jsonrpc.DecodeError(rep.Msg.Error)
	if e.Code != jsonrpc.CodeUpstreamUnreachable || e.Name() != "UpstreamExited" || e.Data["exit"] != "exit status 3" {
		t.Fatalf("error %s", rep.Msg.Error)
	}
	if string(rep.Msg.ID) != "9" {
		t.Fatalf("error for id %s", rep.Msg.ID)
	}
	f.awaitExit()
	// The process's state is gone with it: the session is gone (404), a new one starts a new
	// process.
	rep2, err := f.up.Call(ctx(t), s.Header(), callBody("1", "echo", `{}`), nil)
	if st := upstream.StatusOf(rep2, err); st != http.StatusNotFound {
		t.Fatalf("after the exit: status %d, want 404", st)
	}
	s2 := f.open()
	if _, text := f.call(s2, "1", "echo", `{"text":"back"}`, nil); text != "back" {
		t.Fatalf("new session: %q", text)
	}
	if !strings.Contains(f.logs.String(), "stdio server exited") {
		t.Fatal("the exit was not logged")
	}
}

func TestInvalidLineSkippedAndNotLogged(t *testing.T) {
	f := start(t, Options{})
	s := f.open()
	if _, text := f.call(s, "1", "garbage", `{"text":"hunter2"}`, nil); text != "after garbage" {
		t.Fatalf("got %q", text)
	}
	logs := f.logs.String()
	if !strings.Contains(logs, "not a JSON-RPC message") || !strings.Contains(logs, "bytes=") {
		t.Fatalf("skipped line not logged:\n%s", logs)
	}
	if strings.Contains(logs, "hunter2") {
		t.Fatalf("the skipped line's content reached the log:\n%s", logs)
	}
}

func TestLargeMessages(t *testing.T) {
	f := start(t, Options{MaxMessageBytes: 8 << 20})
	s := f.open()
	if _, text := f.call(s, "1", "big", `{"n":3000000}`, nil); len(text) != 3000000 {
		t.Fatalf("got %d bytes", len(text))
	}
}

func TestMaxProcesses(t *testing.T) {
	f := start(t, Options{MaxProcesses: 2})
	a, b := f.open(), f.open()
	f.call(b, "1", "pid", `{}`, nil) // b used last: a is the least recently used
	// At the bound a new session ends the least recently used idle one.
	c := f.open()
	f.awaitExit()
	rep, err := f.up.Call(ctx(t), a.Header(), callBody("1", "echo", `{}`), nil)
	if st := upstream.StatusOf(rep, err); st != http.StatusNotFound {
		t.Fatalf("the evicted session: status %d, want 404", st)
	}
	if _, text := f.call(b, "2", "echo", `{"text":"still here"}`, nil); text != "still here" {
		t.Fatalf("b: %q", text)
	}
	// With every process busy, a new session is refused, naming the bound.
	var wg sync.WaitGroup
	for _, s := range []*upstream.Session{b, c} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.call(s, `"busy"`, "sleep", `{"n":1500}`, nil)
		}()
	}
	f.waitLogCount("line=sleeping", 2)
	_, err = f.up.Handshake(ctx(t), json.RawMessage(`{}`), "2025-11-25")
	if err == nil || !strings.Contains(err.Error(), "UpstreamBusy") || !strings.Contains(err.Error(), "max_processes") {
		t.Fatalf("a session beyond max_processes with every process busy: %v", err)
	}
	wg.Wait()
}

func TestIdleSessionEnds(t *testing.T) {
	f := start(t, Options{IdleTimeout: 100 * time.Millisecond})
	s := f.open()
	f.awaitExit()
	if f.tr.Processes() != 0 {
		t.Fatal("idle process still counted")
	}
	rep, err := f.up.Call(ctx(t), s.Header(), callBody("1", "echo", `{}`), nil)
	if st := upstream.StatusOf(rep, err); st != http.StatusNotFound {
		t.Fatalf("idle-ended session: %d", st)
	}
}

func TestCloseEscalatesToSIGKILL(t *testing.T) {
	f := start(t, Options{Args: []string{"-stubborn"}, StopGrace: 50 * time.Millisecond})
	s := f.open()
	_, pid := f.call(s, "1", "pid", `{}`, nil)
	if err := f.tr.Close(); err != nil {
		t.Fatal(err)
	}
	logs := f.logs.String()
	if !strings.Contains(logs, "SIGTERM") || !strings.Contains(logs, "SIGKILL") {
		t.Fatalf("no escalation logged:\n%s", logs)
	}
	if !strings.Contains(logs, "signal: killed") {
		t.Fatalf("process %s not killed:\n%s", pid, logs)
	}
}

func TestShareRemapsIDs(t *testing.T) {
	f := start(t, Options{Share: true})
	a, b := f.open(), f.open()
	_, pa := f.call(a, "1", "pid", `{}`, nil)
	_, pb := f.call(b, "1", "pid", `{}`, nil)
	if pa != pb || f.tr.Processes() != 1 {
		t.Fatalf("share: pids %s %s, processes %d", pa, pb, f.tr.Processes())
	}
	// Both sessions use id 1 at once; each gets its own answer.
	var wg sync.WaitGroup
	got := make([]string, 2)
	for i, s := range []*upstream.Session{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, got[i] = f.call(s, "1", "echo", fmt.Sprintf(`{"text":"s%d"}`, i), nil)
		}()
	}
	wg.Wait()
	if got[0] != "s0" || got[1] != "s1" {
		t.Fatalf("answers crossed: %v", got)
	}
}

func TestShareRestartsAfterExit(t *testing.T) {
	f := start(t, Options{Share: true})
	s := f.open()
	_, p1 := f.call(s, "1", "pid", `{}`, nil)
	rep, _ := f.call(s, "2", "die", `{}`, nil)
	if e := jsonrpc.DecodeError(rep.Msg.Error); e.Name() != "UpstreamExited" {
		t.Fatalf("got %s", rep.Msg.Error)
	}
	f.awaitExit()
	_, p2 := f.call(s, "3", "pid", `{}`, nil)
	if p2 == p1 || p2 == "" {
		t.Fatalf("not restarted: %s → %s", p1, p2)
	}
}

func TestStderrLoggedWithSession(t *testing.T) {
	f := start(t, Options{})
	s := f.open()
	f.call(s, "1", "stderr", `{"n":3,"text":"`+strings.Repeat("z", 2000)+`"}`, nil)
	f.up.EndSession(s) // stderr is drained before the process is reaped
	logs := f.logs.String()
	if n := strings.Count(logs, "stdio server stderr"); n != 3 {
		t.Fatalf("%d stderr lines logged:\n%s", n, logs)
	}
	if strings.Contains(logs, strings.Repeat("z", 600)) {
		t.Fatal("stderr line not clipped")
	}
	if !strings.Contains(logs, "session="+label(s.ID)) || strings.Contains(logs, s.ID) {
		t.Fatal("stderr lines must name the session by its label, never its id")
	}
}

func TestEnvAndDir(t *testing.T) {
	dir := t.TempDir()
	f := start(t, Options{Env: []string{"GREETING=hello"}, Dir: dir})
	s := f.open()
	if _, v := f.call(s, "1", "env", `{"text":"GREETING"}`, nil); v != "hello" {
		t.Fatalf("env: %q", v)
	}
	if _, v := f.call(s, "2", "env", `{"text":"HOME"}`, nil); v != "" {
		t.Fatalf("an unlisted variable reached the process: HOME=%q", v)
	}
	if _, v := f.call(s, "3", "cwd", `{}`, nil); v != dir {
		t.Fatalf("cwd %q, want %q", v, dir)
	}
}

func TestCrashingServerBacksOff(t *testing.T) {
	f := start(t, Options{Args: []string{"-initfail"}})
	for range 2 {
		_, err := f.up.Handshake(ctx(t), json.RawMessage(`{}`), "2025-11-25")
		if err == nil || !strings.Contains(err.Error(), "UpstreamExited") {
			t.Fatalf("initialize on a crashing server: %v", err)
		}
		f.awaitExit()
	}
	f.tr.mu.Lock()
	var failures int
	if b := f.tr.backoff[""]; b != nil {
		failures = b.failures
	}
	wait := f.tr.startDelay("")
	f.tr.mu.Unlock()
	if failures != 2 || wait <= 0 {
		t.Fatalf("failures %d, next start in %v: want 2 and a pending backoff", failures, wait)
	}
	if !strings.Contains(f.logs.String(), "refusing to start") {
		t.Fatal("the server's stderr was not logged")
	}
}

func TestCommandNotFound(t *testing.T) {
	f := start(t, Options{Command: filepath.Join(t.TempDir(), "missing")})
	_, err := f.up.Handshake(ctx(t), json.RawMessage(`{}`), "2025-11-25")
	if err == nil || !strings.Contains(err.Error(), "could not be started") {
		t.Fatalf("got %v", err)
	}
	if f.tr.Processes() != 0 {
		t.Fatal("a failed start is still counted")
	}
}

// waitLogCount waits (bounded) until the log holds sub n times.
func (f *fixture) waitLogCount(sub string, n int) {
	f.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); strings.Count(f.logs.String(), sub) < n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			f.t.Fatalf("log never had %q %d times:\n%s", sub, n, f.logs.String())
		}
	}
}

// waitLog waits (bounded) until the log holds sub.
func (f *fixture) waitLog(sub string) {
	f.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(f.logs.String(), sub); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			f.t.Fatalf("log never had %q:\n%s", sub, f.logs.String())
		}
	}
}

// A client's notifications/cancelled names its own request id; the process gets the id
// Tollgate wrote for that request. One naming no request in flight is not passed on.
func TestCancelledRemapped(t *testing.T) {
	f := start(t, Options{})
	s := f.open()
	cctx, cancel := context.WithCancel(ctx(t))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = f.up.Call(cctx, s.Header(), callBody(`"c1"`, "sleep", `{"n":20000}`), nil)
	}()
	defer func() { cancel(); <-done }()
	f.waitLog("line=sleeping")
	for _, id := range []string{`"nope"`, `"c1"`} {
		resp, err := f.up.Send(ctx(t), http.MethodPost, s.Header(),
			jsonrpc.Notification("notifications/cancelled", json.RawMessage(`{"requestId":`+id+`,"reason":"user"}`)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("notification: HTTP %d", resp.StatusCode)
		}
	}
	f.waitLog(`cancelled {\"requestId\":\"tg-`)
	if strings.Contains(f.logs.String(), `nope`) || strings.Contains(f.logs.String(), `\"c1\"`) {
		t.Fatalf("the process saw a client's own id:\n%s", f.logs.String())
	}
}

// A server whose helper keeps stdout open after the server itself exited: the exit is still
// noticed (the group is ended after the grace) and the request in flight fails.
func TestExitNoticedWhenAHelperHoldsStdout(t *testing.T) {
	// The helper (sleep) inherits stdout; the shell runs the child and exits after it.
	f := start(t, Options{Command: "/bin/sh", Args: []string{"-c", "sleep 60 & " + childBin + "; exit 0"}, StopGrace: 100 * time.Millisecond})
	s := f.open()
	rep, _ := f.call(s, "1", "die", `{}`, nil)
	if e := jsonrpc.DecodeError(rep.Msg.Error); e.Name() != "UpstreamExited" {
		t.Fatalf("got %s", rep.Msg.Error)
	}
}

// Sessions on the shared process are bounded; at the bound the least recently used idle one
// gives way (404 afterwards), the others keep working on the one process.
func TestShareSessionsBounded(t *testing.T) {
	f := start(t, Options{Share: true})
	f.tr.maxShared = 2
	a, b := f.open(), f.open()
	f.call(b, "1", "echo", `{"text":"b"}`, nil) // a is now the least recently used
	c := f.open()
	rep, err := f.up.Call(ctx(t), a.Header(), callBody("1", "echo", `{}`), nil)
	if st := upstream.StatusOf(rep, err); st != http.StatusNotFound {
		t.Fatalf("the session that gave way: status %d, want 404", st)
	}
	for i, s := range []*upstream.Session{b, c} {
		if _, text := f.call(s, "2", "echo", fmt.Sprintf(`{"text":"s%d"}`, i), nil); text != fmt.Sprintf("s%d", i) {
			t.Fatalf("session %d: %q", i, text)
		}
	}
	if n := f.tr.Processes(); n != 1 {
		t.Fatalf("processes %d, want 1", n)
	}
}

// A reader that stops reading an event stream does not keep its writer (and Close) waiting:
// cancelling the request, or closing the transport, releases it.
func TestStalledStreamReleased(t *testing.T) {
	f := start(t, Options{})
	s := f.open()
	rctx, cancel := context.WithCancel(ctx(t))
	body := jsonrpc.Request(json.RawMessage(`5`), "tools/call", json.RawMessage(`{"name":"progress","arguments":{},"_meta":{"progressToken":"t"}}`))
	h := s.Header()
	h.Set("Accept", "application/json, text/event-stream")
	resp, err := f.up.Send(rctx, http.MethodPost, h, body)
	if err != nil {
		t.Fatal(err)
	}
	if !upstream.IsEventStream(resp.Header) {
		t.Fatalf("want an event stream, got %q", resp.Header.Get("Content-Type"))
	}
	// Never read the body; cancel the request instead. Close must not hang on the writer.
	cancel()
	done := make(chan struct{})
	go func() { f.tr.Close(); close(done) }()
	select {
	case <-done:
	case <-ctx(t).Done():
		t.Fatal("Close hung on a stream nobody reads")
	}
	resp.Body.Close()
}

// A shared process's own request with no request in flight belongs to no client: it is
// answered at once with a JSON-RPC error, so the server does not wait for nobody.
func TestShareRequestWithNobodyToAsk(t *testing.T) {
	f := start(t, Options{Share: true})
	s := f.open()
	if _, text := f.call(s, "1", "ask-later", `{}`, nil); text != "ok" {
		t.Fatalf("ask-later: %q", text)
	}
	f.waitLog(`late answer {\"error\":`)
	if !strings.Contains(f.logs.String(), "NotBridged") {
		t.Fatalf("the refusal does not name NotBridged:\n%s", f.logs.String())
	}
}

// TestMaxProcessesFairAcrossSources: at max_processes a source that opens many sessions ends
// its own least recently used idle one, never the idle session of a source holding fewer; a
// lighter source may take from the heaviest. (In a sidecar without server.identity_header all
// callers are one source, and this is plain least-recently-used.)
func TestMaxProcessesFairAcrossSources(t *testing.T) {
	f := start(t, Options{MaxProcesses: 3})
	as := func(src string) *upstream.Session {
		t.Helper()
		s, err := f.up.Handshake(source.NewContext(ctx(t), src), json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`), "2025-11-25")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	alive := func(s *upstream.Session) bool {
		rep, err := f.up.Call(ctx(t), s.Header(), callBody("1", "echo", `{"text":"x"}`), nil)
		return upstream.StatusOf(rep, err) != http.StatusNotFound
	}
	b := as("ip:B") // the least recently used of all
	a1, a2 := as("ip:A"), as("ip:A")
	f.call(a1, "1", "pid", `{}`, nil)
	f.call(a2, "1", "pid", `{}`, nil)

	a3 := as("ip:A") // A holds 2 of 3: it ends its own a1, not B's older session
	f.awaitExit()
	if alive(a1) || !alive(b) {
		t.Fatalf("at the bound, A's new session ended a1 alive=%v and B's b alive=%v; want A's own a1 ended, b kept", alive(a1), alive(b))
	}
	b2 := as("ip:B") // B holds 1 of 3, A 2: B takes A's least recently used idle session
	f.awaitExit()
	if alive(a2) || !alive(a3) || !alive(b) || !alive(b2) {
		t.Fatalf("B's second session: a2 alive=%v a3=%v b=%v b2=%v; want only a2 ended", alive(a2), alive(a3), alive(b), alive(b2))
	}
}

// TestKeptSessionNotEvicted: a session Options.Keep holds (its client has a pending task or an
// open stream) is never the one ended at max_processes, though it is the least recently used.
func TestKeptSessionNotEvicted(t *testing.T) {
	var keep atomic.Value
	keep.Store("")
	f := start(t, Options{MaxProcesses: 2, Keep: func(id string) bool { return id == keep.Load().(string) }})
	a := f.open()
	keep.Store(a.ID)
	b := f.open()
	f.call(b, "1", "pid", `{}`, nil)
	f.open() // at the bound: b gives way, not the older but kept a
	f.awaitExit()
	if rep, err := f.up.Call(ctx(t), b.Header(), callBody("2", "echo", `{}`), nil); upstream.StatusOf(rep, err) != http.StatusNotFound {
		t.Fatalf("b after the third session: status %d, want 404", upstream.StatusOf(rep, err))
	}
	if _, text := f.call(a, "2", "echo", `{"text":"kept"}`, nil); text != "kept" {
		t.Fatalf("the kept session: %q", text)
	}
}

// TestKeptSessionsCannotHoldEveryProcess: sessions Keep holds give way, as a last resort, to a
// source holding at least two fewer; one source keeping many (pending tasks, open streams)
// cannot refuse everyone else.
func TestKeptSessionsCannotHoldEveryProcess(t *testing.T) {
	f := start(t, Options{MaxProcesses: 2, Keep: func(string) bool { return true }})
	open := func(src string) (*upstream.Session, error) {
		return f.up.Handshake(source.NewContext(ctx(t), src), json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`), "2025-11-25")
	}
	a1, err := open("ip:A")
	if err != nil {
		t.Fatal(err)
	}
	if _, err = open("ip:A"); err != nil {
		t.Fatal(err)
	}
	if _, err := open("ip:A"); err == nil || !strings.Contains(err.Error(), "UpstreamBusy") {
		t.Fatalf("A's third session while A keeps both processes: %v, want UpstreamBusy (A's own kept sessions never give way to A)", err)
	}
	if _, err := open("ip:B"); err != nil {
		t.Fatalf("B's first session while A keeps both processes: %v, want one of A's to give way", err)
	}
	f.awaitExit()
	if rep, err := f.up.Call(ctx(t), a1.Header(), callBody("9", "echo", `{}`), nil); upstream.StatusOf(rep, err) != http.StatusNotFound {
		t.Fatalf("A's least recently used kept session: status %d, want 404 (ended for B)", upstream.StatusOf(rep, err))
	}
}

// TestShareQuestionNeverToAnotherClient: on a shared process a server's own request names no
// client. While requests of two sessions are in flight it is refused (NotBridged), never put
// to the other client's request — which used to get it (the oldest in flight), answer it, and
// have its answer used by the asking client's call.
func TestShareQuestionNeverToAnotherClient(t *testing.T) {
	f := start(t, Options{Share: true})
	victim, other := f.open(), f.open()
	var saw atomic.Int32
	octx, cancel := context.WithCancel(ctx(t))
	done := make(chan struct{})
	go func() { // the other client's call, in flight first and throughout
		defer close(done)
		_, _ = f.up.Call(octx, other.Header(), callBody(`"o1"`, "sleep", `{"n":20000}`), func(m *jsonrpc.Message) {
			if m.Kind != jsonrpc.KindRequest {
				return
			}
			saw.Add(1)
			resp, err := f.up.Send(ctx(t), http.MethodPost, other.Header(),
				[]byte(`{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"roots":"from-other"}}`))
			if err == nil {
				resp.Body.Close()
			}
		})
	}()
	defer func() { cancel(); <-done }()
	f.waitLog("line=sleeping")
	_, text := f.call(victim, `"v1"`, "ask", `{}`, func(m *jsonrpc.Message) {
		if m.Kind == jsonrpc.KindRequest {
			t.Errorf("the asking client's own stream got %s although two clients' requests are in flight", m.Method)
		}
	})
	if !strings.Contains(text, "NotBridged") || strings.Contains(text, "from-other") {
		t.Fatalf("the asking call got %q; want its question refused with NotBridged", text)
	}
	if n := saw.Load(); n != 0 {
		t.Fatalf("the other client's call was handed %d of the process's requests", n)
	}
}

// TestShareQuestionToTheOnlyCallInFlight: with one request in flight on the shared process,
// the process's request goes to that request's stream and its answer back.
func TestShareQuestionToTheOnlyCallInFlight(t *testing.T) {
	f := start(t, Options{Share: true})
	a, _ := f.open(), f.open()
	_, text := f.call(a, `"q"`, "ask", `{}`, func(m *jsonrpc.Message) {
		if m.Kind != jsonrpc.KindRequest {
			return
		}
		resp, err := f.up.Send(ctx(t), http.MethodPost, a.Header(),
			[]byte(`{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"roots":"from-a"}}`))
		if err == nil {
			resp.Body.Close()
		}
	})
	if text != `answered {"roots":"from-a"}` {
		t.Fatalf("got %q", text)
	}
}

// TestQuestionWithSeveralCallsOfOneSession: with two requests of one session in flight
// Tollgate cannot tell which asked: the question goes to the session's GET stream when it
// listens (its client answers), and is refused (NotBridged) when it does not — never to one of
// the calls by guess.
func TestQuestionWithSeveralCallsOfOneSession(t *testing.T) {
	for _, listen := range []bool{false, true} {
		t.Run(fmt.Sprintf("listening=%v", listen), func(t *testing.T) {
			f := start(t, Options{})
			s := f.open()
			if listen {
				lctx, lcancel := context.WithCancel(ctx(t))
				st, err := f.up.Listen(lctx, s.Header())
				if err != nil {
					t.Fatal(err)
				}
				read := make(chan struct{})
				defer func() { lcancel(); <-read; st.Close() }()
				go func() {
					defer close(read)
					for {
						m, err := st.Next()
						if err != nil {
							return
						}
						if m.Kind == jsonrpc.KindRequest {
							resp, err := f.up.Send(ctx(t), http.MethodPost, s.Header(),
								[]byte(`{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"roots":"from-get"}}`))
							if err == nil {
								resp.Body.Close()
							}
						}
					}
				}()
			}
			octx, cancel := context.WithCancel(ctx(t))
			done := make(chan struct{})
			var saw atomic.Int32
			go func() {
				defer close(done)
				_, _ = f.up.Call(octx, s.Header(), callBody(`"o1"`, "sleep", `{"n":20000}`), func(m *jsonrpc.Message) {
					if m.Kind == jsonrpc.KindRequest {
						saw.Add(1)
					}
				})
			}()
			defer func() { cancel(); <-done }()
			f.waitLog("line=sleeping")
			_, text := f.call(s, `"v1"`, "ask", `{}`, func(m *jsonrpc.Message) {
				if m.Kind == jsonrpc.KindRequest {
					t.Errorf("a call's stream got %s while two calls of the session are in flight", m.Method)
				}
			})
			want := "NotBridged"
			if listen {
				want = `answered {"roots":"from-get"}`
			}
			if !strings.Contains(text, want) {
				t.Fatalf("the asking call got %q; want %q", text, want)
			}
			if saw.Load() != 0 {
				t.Fatal("the other call's stream got the question")
			}
		})
	}
}

// TestServerCannotReadTollgatesEnvironment: a server running as Tollgate's own user cannot
// read /proc/<Tollgate>/environ (where approver tokens, the admin token, Slack secrets and the
// owner-hash key are): Tollgate is not dumpable once a stdio transport exists. A forwarded
// file-reading tool used to hand it over. Tollgate here is this test binary run again as an
// unprivileged user (nobody when the test runs as root: root's capabilities read any process's
// environment, which run_as answers, TestRunAsDropsUser), its server the test child as the same
// user.
func TestServerCannotReadTollgatesEnvironment(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		t.Skip("the helper itself")
	}
	dir := filepath.Dir(childBin)
	self := filepath.Join(dir, "stdio.test")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(self, b, 0o755); err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(c, self, "-test.run=^TestTollgateAsHelper$", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = []string{helperEnv + "=" + childBin, "TOLLGATE_ADMIN_TOKEN=secret-admin-token-of-the-test", "PATH=" + os.Getenv("PATH")}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the helper: %v\n%s", err, out)
	}
	got := string(out)
	if strings.Contains(got, "the server read:") || !strings.Contains(got, "permission denied") {
		t.Fatalf("the server read Tollgate's environment:\n%s", got)
	}
}

// helperEnv names the test child for TestTollgateAsHelper (set only in the helper's run).
const helperEnv = "TOLLGATE_STDIO_TEST_HELPER"

// TestTollgateAsHelper is Tollgate for TestServerCannotReadTollgatesEnvironment: it runs a
// server that reads its parent's environment and prints what it got.
func TestTollgateAsHelper(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("run by TestServerCannotReadTollgatesEnvironment only")
	}
	f := start(t, Options{})
	s := f.open()
	_, got := f.call(s, "1", "parent-environ", `{}`, nil)
	if strings.HasPrefix(got, "error:") {
		fmt.Println("the server was refused:", got)
	} else {
		fmt.Println("the server read:", got)
	}
}

// TestServerInheritsNoDescriptors: a descriptor Tollgate holds without close-on-exec (one it
// inherited, say) does not reach a server: it gets stdin, stdout and stderr only.
func TestServerInheritsNoDescriptors(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "inherited-marker")
	if err := os.WriteFile(marker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Open(marker, syscall.O_RDONLY, 0) // no O_CLOEXEC, as an inherited one
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	f := start(t, Options{})
	s := f.open()
	_, got := f.call(s, "1", "fds", `{}`, nil)
	if strings.Contains(got, marker) || strings.HasPrefix(got, "error:") {
		t.Fatalf("the server's descriptors: %s; want none of Tollgate's beyond 0-2", got)
	}
	if !strings.Contains(got, "0=pipe:") || !strings.Contains(got, "1=pipe:") {
		t.Fatalf("the server's descriptors: %s; want stdin and stdout pipes", got)
	}
}

// TestRunAsDropsUser: with RunAs the server runs as that user and group with no supplementary
// groups, and cannot read Tollgate's environment even when Tollgate is root. Needs root (only
// root may start a process as another user).
func TestRunAsDropsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("run_as needs Tollgate to run as root; this test runs as uid " + strconv.Itoa(os.Geteuid()))
	}
	f := start(t, Options{RunAs: &Credential{UID: 65534, GID: 65534}, Env: []string{"ONLY=listed"}})
	s := f.open()
	if _, got := f.call(s, "1", "whoami", `{}`, nil); got != "uid=65534 gid=65534 groups=[]" {
		t.Fatalf("the server runs as %q", got)
	}
	if _, got := f.call(s, "2", "parent-environ", `{}`, nil); !strings.HasPrefix(got, "error:") {
		t.Fatalf("the server read Tollgate's environment: %q", got)
	}
	if _, got := f.call(s, "3", "env", `{"text":"ONLY"}`, nil); got != "listed" {
		t.Fatalf("the listed variable: %q", got)
	}
}

// TestBusyProcessesSharedAcrossSources: processes are in-flight capacity shared by source.
// One source whose calls never answer held every process and every other source got 503
// UpstreamBusy for as long as they lasted; now, with every process busy, a source holding at
// least two more than the newcomer's gives way (its call fails UpstreamExited), and a source
// cannot take from one holding as many as it (or one fewer).
func TestBusyProcessesSharedAcrossSources(t *testing.T) {
	f := start(t, Options{MaxProcesses: 3})
	open := func(src string) (*upstream.Session, error) {
		return f.up.Handshake(source.NewContext(ctx(t), src), json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`), "2025-11-25")
	}
	type result struct {
		rep *upstream.Reply
		err error
	}
	var results []chan result
	for i := range 3 { // A: three calls that do not answer, one per process
		s, err := open("ip:A")
		if err != nil {
			t.Fatal(err)
		}
		ch := make(chan result, 1)
		results = append(results, ch)
		go func() {
			rep, err := f.up.Call(ctx(t), s.Header(), callBody(fmt.Sprint(i), "sleep", `{"n":60000}`), nil)
			ch <- result{rep, err}
		}()
	}
	f.waitLogCount("line=sleeping", 3)
	if _, err := open("ip:A"); err == nil || !strings.Contains(err.Error(), "UpstreamBusy") {
		t.Fatalf("A's fourth session while A's calls hold every process: %v, want UpstreamBusy", err)
	}
	b, err := open("ip:B")
	if err != nil {
		t.Fatalf("B's session while A's calls hold every process: %v, want one of A's to give way", err)
	}
	if _, text := f.call(b, "1", "echo", `{"text":"b runs"}`, nil); text != "b runs" {
		t.Fatalf("B's call: %q", text)
	}
	// One of A's calls failed with the process it was on.
	var r result
	select {
	case r = <-results[0]:
	case r = <-results[1]:
	case r = <-results[2]:
	case <-ctx(t).Done():
		t.Fatal("none of A's calls ended")
	}
	if r.err != nil || r.rep.Msg.Error == nil || jsonrpc.DecodeError(r.rep.Msg.Error).Name() != "UpstreamExited" {
		t.Fatalf("A's call that gave way: %+v %v, want UpstreamExited", r.rep, r.err)
	}
	// A holds 2, B 1, all busy: a difference of one is fair, B may not take another of A's.
	bdone := make(chan struct{})
	go func() {
		defer close(bdone)
		_, _ = f.up.Call(ctx(t), b.Header(), callBody("2", "sleep", `{"n":60000}`), nil)
	}()
	f.waitLogCount("line=sleeping", 4)
	if _, err := open("ip:B"); err == nil || !strings.Contains(err.Error(), "UpstreamBusy") {
		t.Fatalf("B's second session: %v, want UpstreamBusy (A holds only one more than B)", err)
	}
	f.tr.Close()
	<-bdone
}

// TestBackoffPerSource: the restart backoff after processes that died young is the source's
// whose processes died: one source making its server crash again and again (a tool that exits)
// used to delay every source's next process by up to 10s; now only its own.
func TestBackoffPerSource(t *testing.T) {
	f := start(t, Options{})
	open := func(src string) *upstream.Session {
		t.Helper()
		s, err := f.up.Handshake(source.NewContext(ctx(t), src), json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`), "2025-11-25")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for range 2 {
		s := open("ip:A")
		if rep, _ := f.call(s, "1", "die", `{}`, nil); jsonrpc.DecodeError(rep.Msg.Error).Name() != "UpstreamExited" {
			t.Fatalf("die: %s", rep.Msg.Error)
		}
		f.awaitExit()
	}
	f.tr.mu.Lock()
	a, b := f.tr.startDelay("ip:A"), f.tr.startDelay("ip:B")
	f.tr.mu.Unlock()
	if a <= 0 || b != 0 {
		t.Fatalf("next start: A in %v, B in %v; want A's pending, B's none", a, b)
	}
	if _, text := f.call(open("ip:B"), "1", "echo", `{"text":"b"}`, nil); text != "b" {
		t.Fatalf("B: %q", text)
	}
}
