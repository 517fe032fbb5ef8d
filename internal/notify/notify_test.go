package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/disclose"
	"github.com/tollgate-mcp/tollgate/internal/mrkdwn"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	secret  = "hunter2-s3cr3t"
	apiKey  = "AKIA-EXAMPLE-KEY"
	console = "http://127.0.0.1:7469/approvals"
)

// args holds values every workflow below redacts; they must never leave the process.
var args = json.RawMessage(`{"path":"/srv/a <b> & c","password":"` + secret + `","credentials":{"api_key":"` + apiKey + `","user":"bob"}}`)

var redact = []string{"password", "credentials.api_key"}

// delivery is one request a receiver got.
type delivery struct {
	header http.Header
	body   []byte
}

// receiver is an httptest server that records deliveries; status picks the answer to the
// n-th request (1-based), nil = 200.
type receiver struct {
	srv    *httptest.Server
	got    chan delivery
	hits   atomic.Int32
	status func(n int) (code int, retryAfter string)
}

func newReceiver(t *testing.T, status func(n int) (int, string)) *receiver {
	t.Helper()
	r := &receiver{got: make(chan delivery, 100), status: status}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n := int(r.hits.Add(1))
		b, _ := io.ReadAll(req.Body)
		code, ra := http.StatusOK, ""
		if r.status != nil {
			code, ra = r.status(n)
		}
		if ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		w.WriteHeader(code)
		r.got <- delivery{header: req.Header.Clone(), body: b}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// next waits (bounded) for the next delivery.
func (r *receiver) next(t *testing.T) delivery {
	t.Helper()
	select {
	case d := <-r.got:
		return d
	case <-time.After(5 * time.Second):
		t.Fatal("no delivery within 5s")
		return delivery{}
	}
}

// testClient has its own transport so idle connections can be closed for goleak.
func testClient(t *testing.T, timeout time.Duration) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: timeout}
}

type fixture struct {
	n   *Notifier
	reg *prometheus.Registry
	log *bytes.Buffer
	mu  *sync.Mutex
}

func (f fixture) logs() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.log.String()
}

// lockedWriter serialises log writes from the worker and the test.
type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// newFixture builds a Notifier with the given workflows; start runs its worker until the
// test ends.
func newFixture(t *testing.T, wfs map[string]config.Workflow, start bool, mod ...func(*Options)) fixture {
	t.Helper()
	f := fixture{reg: prometheus.NewRegistry(), log: &bytes.Buffer{}, mu: &sync.Mutex{}}
	o := Options{
		Workflow:   func(name string) (config.Workflow, bool) { w, ok := wfs[name]; return w, ok },
		ConsoleURL: console,
		Client:     testClient(t, 2*time.Second),
		Logger:     slog.New(slog.NewJSONHandler(lockedWriter{f.mu, f.log}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Registerer: f.reg,
	}
	for _, m := range mod {
		m(&o)
	}
	f.n = New(o)
	f.n.backoff = []time.Duration{time.Millisecond, 2 * time.Millisecond}
	f.n.maxRetryAfter = 5 * time.Millisecond
	if start {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); f.n.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
	}
	return f
}

func (f fixture) count(dest, result string) float64 {
	var m dto.Metric
	if err := f.n.met.total.WithLabelValues(dest, result).Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

func hook(url string) config.Workflow {
	return config.Workflow{Destination: config.Destination{Type: config.DestinationWebhook, URL: url}, RedactFields: redact}
}

func slack(url string) config.Workflow {
	return config.Workflow{Destination: config.Destination{Type: config.DestinationSlack, URL: url}, RedactFields: redact}
}

var created = time.Date(2025, 11, 25, 10, 0, 0, 0, time.UTC)

// task builds a task in state s of workflow wf, decided when s needs a decision.
func task(wf string, s tasks.State) *tasks.Task {
	t := &tasks.Task{
		ID: "tg_0b5e1f7e-2d0c-4c53-9a55-6a3f2b1c0d9e", Owner: "session-abc", SessionID: "session-abc",
		RequestedBy: "carol", Tool: "delete_file", Arguments: args, ArgsHash: tasks.CanonicalHash([]byte("notify-test-key"), "delete_file", args),
		Workflow: wf, State: s, StatusMessage: "Awaiting approval (" + wf + ")",
		CreatedAt: created, UpdatedAt: created, TTL: time.Hour, ApprovalDeadline: created.Add(10 * time.Minute),
	}
	switch s {
	case tasks.Approved:
		t.Decision = &tasks.Decision{Approved: true, By: "alice", Reason: "ok <go>", At: created.Add(time.Minute)}
		t.StatusMessage = "Approved by alice"
	case tasks.Rejected:
		t.Decision = &tasks.Decision{Approved: false, By: "alice", Reason: "no", At: created.Add(time.Minute)}
		t.StatusMessage = "Rejected by alice"
	case tasks.TimedOut:
		t.Decision = &tasks.Decision{Approved: false, By: tasks.ByTimeout, Reason: "approval timed out (on_timeout: deny)", At: created.Add(10 * time.Minute)}
		t.StatusMessage = "Approval timed out"
	}
	return t
}

func TestEventFor(t *testing.T) {
	decided := func(s tasks.State) *tasks.Task {
		tk := task("w", s)
		tk.Decision = &tasks.Decision{Approved: true, By: "alice"}
		return tk
	}
	accel := task("w", tasks.Approved)
	accel.Accelerated = true
	tests := []struct {
		name string
		t    *tasks.Task
		want string
	}{
		{"created awaiting", task("w", tasks.AwaitingApproval), EventRequested},
		{"approved", task("w", tasks.Approved), EventDecided},
		{"rejected", task("w", tasks.Rejected), EventDecided},
		{"timed out", task("w", tasks.TimedOut), EventDecided},
		{"cancelled while waiting", task("w", tasks.Cancelled), EventCancelled},
		{"expired while waiting", task("w", tasks.Expired), EventExpired},
		{"cancelled after approval", decided(tasks.Cancelled), ""},
		{"expired after approval", decided(tasks.Expired), ""},
		{"executing", decided(tasks.Executing), ""},
		{"completed", decided(tasks.Completed), ""},
		{"failed", decided(tasks.Failed), ""},
		{"accelerated", accel, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := eventFor(moved(tt.t)); got != tt.want {
				t.Errorf("eventFor(%s) = %q, want %q", tt.t.State, got, tt.want)
			}
		})
	}
}

func TestWebhookSchema(t *testing.T) {
	r := newReceiver(t, nil)
	f := newFixture(t, map[string]config.Workflow{"ops": hook(r.srv.URL + "/hook")}, true)

	wantKeys := []string{"version", "event", "delivery_id", "task_id", "tool", "workflow", "arguments", "args_hash",
		"state", "status", "status_message", "requested_by", "owner", "created_at", "approval_deadline", "decision", "console_url",
		"approvals", "required_approvals"}
	slices.Sort(wantKeys)

	tests := []struct {
		state     tasks.State
		event     string
		status    string
		decision  map[string]any
		wantDelay bool
	}{
		{tasks.AwaitingApproval, EventRequested, "working", nil, true},
		{tasks.Approved, EventDecided, "working", map[string]any{"approved": true, "by": "alice", "reason": "ok <go>", "at": "2025-11-25T10:01:00.000Z"}, true},
		{tasks.Rejected, EventDecided, "failed", map[string]any{"approved": false, "by": "alice", "reason": "no", "at": "2025-11-25T10:01:00.000Z"}, true},
		{tasks.Cancelled, EventCancelled, "cancelled", nil, false},
	}
	for _, tt := range tests {
		t.Run(string(tt.state), func(t *testing.T) {
			tk := task("ops", tt.state)
			if !tt.wantDelay {
				tk.ApprovalDeadline = time.Time{}
			}
			f.n.OnTaskChange(moved(tk))
			d := r.next(t)
			if ct := d.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			if ev := d.header.Get("X-Tollgate-Event"); ev != tt.event {
				t.Errorf("X-Tollgate-Event = %q, want %q", ev, tt.event)
			}
			var got map[string]any
			if err := json.Unmarshal(d.body, &got); err != nil {
				t.Fatalf("body is not JSON: %v", err)
			}
			keys := make([]string, 0, len(got))
			for k := range got {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			if !slices.Equal(keys, wantKeys) {
				t.Errorf("keys = %v\nwant %v", keys, wantKeys)
			}
			want := map[string]any{
				"version": float64(1), "event": tt.event, "delivery_id": tk.ID + "/" + string(tt.state),
				"task_id": tk.ID, "tool": "delete_file", "workflow": "ops", "args_hash": tk.ArgsHash,
				"state": string(tt.state), "status": tt.status, "status_message": tk.StatusMessage,
				"requested_by": "carol", "owner": disclose.OwnerHash("session-abc"),
				"created_at": "2025-11-25T10:00:00.000Z", "console_url": console,
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %#v, want %#v", k, got[k], v)
				}
			}
			if tt.wantDelay && got["approval_deadline"] != "2025-11-25T10:10:00.000Z" {
				t.Errorf("approval_deadline = %#v", got["approval_deadline"])
			}
			if !tt.wantDelay && got["approval_deadline"] != nil {
				t.Errorf("approval_deadline = %#v, want null", got["approval_deadline"])
			}
			if tt.decision == nil && got["decision"] != nil {
				t.Errorf("decision = %#v, want null", got["decision"])
			}
			if tt.decision != nil {
				dm, _ := got["decision"].(map[string]any)
				for k, v := range tt.decision {
					if dm[k] != v {
						t.Errorf("decision.%s = %#v, want %#v", k, dm[k], v)
					}
				}
			}
			a, _ := got["arguments"].(map[string]any)
			creds, _ := a["credentials"].(map[string]any)
			if a["password"] != disclose.Redacted || creds["api_key"] != disclose.Redacted || creds["user"] != "bob" || a["path"] != "/srv/a <b> & c" {
				t.Errorf("arguments = %#v, want password and credentials.api_key redacted, the rest kept", a)
			}
			if owner := "session-abc"; bytes.Contains(d.body, []byte(owner)) {
				t.Error("body holds the raw owner (session id)")
			}
		})
	}
	waitCount(t, f, "webhook", "sent", float64(len(tests)))
}

// TestNoSecretInAnyBody: for every event and both destination types, values named by
// redact_fields never leave the process.
func TestNoSecretInAnyBody(t *testing.T) {
	r := newReceiver(t, nil)
	f := newFixture(t, map[string]config.Workflow{"h": hook(r.srv.URL), "s": slack(r.srv.URL)}, true)
	states := []tasks.State{tasks.AwaitingApproval, tasks.Approved, tasks.Rejected, tasks.TimedOut, tasks.Cancelled, tasks.Expired}
	for _, wf := range []string{"h", "s"} {
		for _, s := range states {
			f.n.OnTaskChange(moved(task(wf, s)))
			d := r.next(t)
			for _, v := range []string{secret, apiKey} {
				if bytes.Contains(d.body, []byte(v)) {
					t.Errorf("workflow %s, state %s: body contains redacted value %q", wf, s, v)
				}
			}
			if !bytes.Contains(d.body, []byte(disclose.Redacted)) {
				t.Errorf("workflow %s, state %s: body has no %s marker", wf, s, disclose.Redacted)
			}
		}
	}
	for _, v := range []string{secret, apiKey, "path"} {
		if strings.Contains(f.logs(), v) {
			t.Errorf("logs contain %q", v)
		}
	}
}

func TestRedactedArgsNotJSON(t *testing.T) {
	tk := task("h", tasks.AwaitingApproval)
	tk.Arguments = json.RawMessage(`{"password":` + secret) // truncated: not JSON
	got := redactedArgs(tk, config.Workflow{RedactFields: redact})
	if strings.Contains(string(got), secret) || !json.Valid(got) {
		t.Errorf("redactedArgs(invalid) = %s", got)
	}
	tk.Arguments = nil
	if got := redactedArgs(tk, config.Workflow{RedactFields: redact}); string(got) != "{}" {
		t.Errorf("redactedArgs(nil) = %s, want {}", got)
	}
}

func TestSlackBody(t *testing.T) {
	big := task("s", tasks.AwaitingApproval)
	big.Arguments = json.RawMessage(`{"blob":"` + strings.Repeat("x", 5000) + "`" + `"}`)
	tests := []struct {
		name      string
		t         *tasks.Task
		title     string
		truncated bool
	}{
		{"requested", task("s", tasks.AwaitingApproval), "Approval needed", false},
		{"approved", task("s", tasks.Approved), "Approved by alice", false},
		{"rejected", task("s", tasks.Rejected), "Rejected by alice", false},
		{"timed out", task("s", tasks.TimedOut), "Approval timed out", false},
		{"big arguments", big, "Approval needed", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			it := item{event: eventFor(moved(tt.t)), task: tt.t, wf: slack("http://x")}
			b, err := slackBody(it, console)
			if err != nil {
				t.Fatal(err)
			}
			var raw map[string]json.RawMessage
			if err := json.Unmarshal(b, &raw); err != nil {
				t.Fatal(err)
			}
			if len(raw) != 2 || raw["text"] == nil || raw["blocks"] == nil {
				t.Errorf("top-level keys: %s, want exactly text and blocks", b)
			}
			var s Slack
			if err := json.Unmarshal(b, &s); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(s.Text, tt.title) || !strings.Contains(s.Text, "delete_file") {
				t.Errorf("text = %q, want the title %q and the tool", s.Text, tt.title)
			}
			var types []string
			for _, bl := range s.Blocks {
				types = append(types, bl.Type)
			}
			if !slices.Equal(types, []string{"section", "section", "section", "context"}) {
				t.Errorf("block types = %v", types)
			}
			if bytes.Contains(b, []byte(`"actions"`)) || bytes.Contains(b, []byte(`"button"`)) {
				t.Error("Slack body has interactive elements")
			}
			argsText := s.Blocks[2].Text.Text
			if !strings.Contains(argsText, "```") || strings.Count(argsText, "```") != 2 {
				t.Errorf("arguments block is not one code block: %q", argsText)
			}
			if len(argsText) > slackArgsMax+100 {
				t.Errorf("arguments block is %d bytes, want about %d at most", len(argsText), slackArgsMax)
			}
			if tt.truncated != strings.Contains(argsText, "(truncated)") {
				t.Errorf("truncated marker present = %v, want %v", !tt.truncated, tt.truncated)
			}
			if !tt.truncated && (!strings.Contains(argsText, "&lt;b&gt; &amp; c") || strings.Contains(argsText, "<b>")) {
				t.Errorf("arguments not escaped for mrkdwn: %q", argsText)
			}
			link := s.Blocks[3].Elements[0].Text
			if !strings.Contains(link, "<"+console+"|") {
				t.Errorf("console link = %q", link)
			}
			fields := ""
			for _, fl := range s.Blocks[1].Fields {
				fields += fl.Text + "\n"
			}
			if it.event == EventRequested && !strings.Contains(fields, "*Deadline*\n2025-11-25T10:10:00.000Z") {
				t.Errorf("fields lack the deadline: %q", fields)
			}
		})
	}
}

func TestSlackNoConsoleLink(t *testing.T) {
	b, err := slackBody(item{event: EventRequested, task: task("s", tasks.AwaitingApproval), wf: slack("http://x")}, "")
	if err != nil {
		t.Fatal(err)
	}
	var s Slack
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Blocks) != 3 {
		t.Errorf("%d blocks without a console URL, want 3", len(s.Blocks))
	}
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{strings.Repeat("a", 30), 20, "aaaaa… (truncated)"},
		{strings.Repeat("é", 15), 20, "éé… (truncated)"}, // never cuts a rune
	}
	for _, tt := range tests {
		if got := mrkdwn.Truncate(tt.in, tt.n); got != tt.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

func TestRetries(t *testing.T) {
	tests := []struct {
		name     string
		status   func(n int) (int, string)
		hits     int
		result   string
		notCount string
	}{
		{"503 then success", func(n int) (int, string) {
			if n == 1 {
				return http.StatusServiceUnavailable, ""
			}
			return http.StatusNoContent, ""
		}, 2, "sent", "failed"},
		{"429 with Retry-After then success", func(n int) (int, string) {
			if n == 1 {
				return http.StatusTooManyRequests, "30" // capped to maxRetryAfter
			}
			return http.StatusOK, ""
		}, 2, "sent", "failed"},
		{"400 is final", func(int) (int, string) { return http.StatusBadRequest, "" }, 1, "failed", "sent"},
		{"404 is final", func(int) (int, string) { return http.StatusNotFound, "" }, 1, "failed", "sent"},
		{"500 three times", func(int) (int, string) { return http.StatusInternalServerError, "" }, 3, "failed", "sent"},
		{"redirect is not followed", func(int) (int, string) { return http.StatusTemporaryRedirect, "" }, 1, "failed", "sent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newReceiver(t, tt.status)
			f := newFixture(t, map[string]config.Workflow{"h": hook(r.srv.URL)}, true, func(o *Options) { o.Client = nil })
			t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
			f.n.OnTaskChange(moved(task("h", tasks.AwaitingApproval)))
			first := r.next(t)
			for i := 1; i < tt.hits; i++ {
				if d := r.next(t); !bytes.Equal(d.body, first.body) {
					t.Error("a retry sent a different body")
				}
			}
			waitCount(t, f, "webhook", tt.result, 1)
			if got := int(r.hits.Load()); got != tt.hits {
				t.Errorf("attempts = %d, want %d", got, tt.hits)
			}
			if got := f.count("webhook", tt.notCount); got != 0 {
				t.Errorf("%s = %v, want 0", tt.notCount, got)
			}
		})
	}
}

// waitCount waits (bounded) until tollgate_notifications_total{dest,result} reaches want.
func waitCount(t *testing.T, f fixture, dest, result string, want float64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for f.count(dest, result) < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s = %v, want %v", dest, result, f.count(dest, result), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestNetworkErrorsRetriedAndURLNotLogged: a receiver that drops every connection gets three
// attempts; the logs name only scheme and host, never the secret path or query.
func TestNetworkErrorsRetriedAndURLNotLogged(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })

	url := "http://" + ln.Addr().String() + "/services/T0SECRETPATH?token=SECRETQUERY"
	f := newFixture(t, map[string]config.Workflow{"h": hook(url)}, true)
	f.n.OnTaskChange(moved(task("h", tasks.AwaitingApproval)))
	waitCount(t, f, "webhook", "failed", 1)
	if got := accepted.Load(); got != maxAttempts {
		t.Errorf("connections = %d, want %d", got, maxAttempts)
	}
	logs := f.logs()
	if !strings.Contains(logs, "notification failed") || !strings.Contains(logs, "http://"+ln.Addr().String()) {
		t.Errorf("logs lack the failure with its target:\n%s", logs)
	}
	for _, s := range []string{"SECRETPATH", "SECRETQUERY", secret} {
		if strings.Contains(logs, s) {
			t.Errorf("logs contain %q:\n%s", s, logs)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0}, {"2", 2 * time.Second}, {"-1", 0}, {"soon", 0}, {"99999", time.Hour},
		{"Mon, 02 Jan 2006 15:04:05 GMT", 0}, // in the past
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.in); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestScrub(t *testing.T) {
	u := mustURL(t, "https://hooks.example.com/services/T0/B0/XYZ?sig=abc")
	got := scrub(`Post "https://hooks.example.com/services/T0/B0/XYZ?sig=abc": EOF`, u)
	if strings.Contains(got, "XYZ") || strings.Contains(got, "sig=abc") || !strings.Contains(got, "https://hooks.example.com") {
		t.Errorf("scrub = %q", got)
	}
}

func TestQueueFullDrops(t *testing.T) {
	f := newFixture(t, map[string]config.Workflow{"h": hook("http://127.0.0.1:1/x"), "s": slack("http://127.0.0.1:1/x")}, false,
		func(o *Options) { o.QueueSize = 2 })
	for range 5 {
		f.n.OnTaskChange(moved(task("h", tasks.AwaitingApproval)))
	}
	f.n.OnTaskChange(moved(task("s", tasks.AwaitingApproval)))
	if got := f.n.Dropped(); got != 4 {
		t.Errorf("Dropped() = %d, want 4", got)
	}
	if got := f.count("webhook", "dropped"); got != 3 {
		t.Errorf("webhook dropped = %v, want 3", got)
	}
	if got := f.count("slack", "dropped"); got != 1 {
		t.Errorf("slack dropped = %v, want 1", got)
	}
	if n := strings.Count(f.logs(), "notification queue full"); n != 1 {
		t.Errorf("%d queue-full WARNs, want 1 (rate-limited)", n)
	}
}

// TestIgnored: console workflows, unknown workflows and non-events queue nothing.
func TestIgnored(t *testing.T) {
	f := newFixture(t, map[string]config.Workflow{
		"c": {Destination: config.Destination{Type: config.DestinationConsole}},
		"h": hook("http://127.0.0.1:1/x"),
	}, false, func(o *Options) { o.QueueSize = 1 })
	for _, tk := range []*tasks.Task{task("c", tasks.AwaitingApproval), task("gone", tasks.AwaitingApproval), task("h", tasks.Executing), nil} {
		f.n.OnTaskChange(moved(tk))
	}
	if len(f.n.queue) != 0 {
		t.Errorf("queue holds %d events, want 0", len(f.n.queue))
	}
	New(Options{}).OnTaskChange(moved(task("h", tasks.AwaitingApproval))) // no Workflow func: no panic
}

// TestHungReceiver: with a receiver that never answers, OnTaskChange still returns at once
// (events beyond the queue are dropped) and Run stops when its context ends.
func TestHungReceiver(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case entered <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs before srv.Close

	f := newFixture(t, map[string]config.Workflow{"h": hook(srv.URL)}, false, func(o *Options) {
		o.QueueSize = 4
		o.Client = testClient(t, time.Minute)
	})
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { defer close(runDone); f.n.Run(ctx) }()

	f.n.OnTaskChange(moved(task("h", tasks.AwaitingApproval)))
	select {
	case <-entered: // the worker is now stuck in the first attempt
	case <-time.After(5 * time.Second):
		t.Fatal("receiver never reached")
	}
	callsDone := make(chan struct{})
	go func() {
		defer close(callsDone)
		for range 100 {
			f.n.OnTaskChange(moved(task("h", tasks.AwaitingApproval)))
		}
	}()
	select {
	case <-callsDone:
	case <-time.After(5 * time.Second):
		t.Fatal("OnTaskChange blocked behind a hung receiver")
	}
	if got := f.n.Dropped(); got != 96 {
		t.Errorf("Dropped() = %d, want 96 (queue of 4)", got)
	}
	cancel()
	select {
	case <-runDone:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop when its context ended")
	}
	if got := f.count("webhook", "failed"); got != 0 {
		t.Errorf("failed = %v, want 0: an attempt abandoned at shutdown is not a destination failure", got)
	}
}

// TestRunAfterCancelSendsNothing: events still queued when ctx ends are not sent.
func TestRunAfterCancelSendsNothing(t *testing.T) {
	r := newReceiver(t, nil)
	f := newFixture(t, map[string]config.Workflow{"h": hook(r.srv.URL)}, false)
	for range 10 {
		f.n.OnTaskChange(moved(task("h", tasks.AwaitingApproval)))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f.n.Run(ctx)
	if got := r.hits.Load(); got != 0 {
		t.Errorf("%d requests after the context ended, want 0", got)
	}
}

func TestMetricsRegistered(t *testing.T) {
	reg := prometheus.NewRegistry()
	New(Options{Registerer: reg})
	New(Options{Registerer: reg}) // a second Notifier reuses the collector
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		if mf.GetName() == "tollgate_notifications_total" {
			n += len(mf.GetMetric())
		}
	}
	if n != 6 {
		t.Errorf("%d series, want 6 (2 destinations × 3 results, present from the start)", n)
	}
}
