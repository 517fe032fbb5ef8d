package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/slack/slacktest"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Slack's published example ("Verifying requests from Slack", step-by-step walk-through).
const (
	exampleSecret    = "8f742231b10e8888abcd99yyyzzz85a5"
	exampleTimestamp = "1531420618"
	exampleBody      = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	exampleSignature = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
)

func TestSignatureSlackExample(t *testing.T) {
	if got := Sign(exampleSecret, exampleTimestamp, []byte(exampleBody)); got != exampleSignature {
		t.Fatalf("Sign = %s, want Slack's %s", got, exampleSignature)
	}
	at := time.Unix(1531420618, 0)
	for _, tc := range []struct {
		name, secret, ts, sig, body string
		now                         time.Time
		want                        string
	}{
		{"published example", exampleSecret, exampleTimestamp, exampleSignature, exampleBody, at, ""},
		{"4m59s later", exampleSecret, exampleTimestamp, exampleSignature, exampleBody, at.Add(299 * time.Second), ""},
		{"stale: 5m01s later", exampleSecret, exampleTimestamp, exampleSignature, exampleBody, at.Add(301 * time.Second), ReasonStale},
		{"stale: 5m01s early", exampleSecret, exampleTimestamp, exampleSignature, exampleBody, at.Add(-301 * time.Second), ReasonStale},
		{"tampered body", exampleSecret, exampleTimestamp, exampleSignature, exampleBody + "&x=1", at, ReasonBadSignature},
		{"other secret", "bogus", exampleTimestamp, exampleSignature, exampleBody, at, ReasonBadSignature},
		{"other timestamp", exampleSecret, "1531420619", exampleSignature, exampleBody, at, ReasonBadSignature},
		{"upper-case hex", exampleSecret, exampleTimestamp, strings.ToUpper(exampleSignature), exampleBody, at, ReasonBadSignature},
		{"no v0= prefix", exampleSecret, exampleTimestamp, strings.TrimPrefix(exampleSignature, "v0="), exampleBody, at, ReasonBadSignature},
		{"v1", exampleSecret, exampleTimestamp, "v1=" + strings.TrimPrefix(exampleSignature, "v0="), exampleBody, at, ReasonBadSignature},
		{"empty signature", exampleSecret, exampleTimestamp, "", exampleBody, at, ReasonBadSignature},
		{"no timestamp", exampleSecret, "", exampleSignature, exampleBody, at, ReasonStale},
		{"timestamp not a number", exampleSecret, "15314206l8", exampleSignature, exampleBody, at, ReasonStale},
	} {
		if got := Verify(tc.secret, tc.ts, tc.sig, []byte(tc.body), tc.now); got != tc.want {
			t.Errorf("%s: Verify = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// fixture is a Slack channel wired to a recording receiver and a fake decision path.
type fixture struct {
	s    *Slack
	recv *slacktest.Receiver
	reg  *prometheus.Registry
	now  time.Time

	mu      sync.Mutex
	decided []string // "approver approve|reject id"
	err     error    // what Decide returns
	// held is what Lookup returns by task id; an id not listed is a pending "pay" call whose
	// message Tollgate posted at (C1, 1.1).
	held map[string]*tasks.Task
	// cannot is what CannotRun says by task id.
	cannot map[string]*tasks.Unrunnable
	// gone is what NotWaiting says by task id.
	gone map[string]*tasks.NotWaiting
}

const (
	token  = "xoxb-test-0123456789"
	secret = "signing-secret-for-tests"
)

var wf = config.Workflow{Destination: config.Destination{Type: config.DestinationSlack, Channel: "#approvals"},
	RedactFields: []string{"password"}}

func newFixture(t *testing.T) *fixture {
	f := &fixture{recv: slacktest.NewReceiver(t, token), reg: prometheus.NewRegistry(), now: time.Now()}
	f.s = New(Options{
		Workflow: func(name string) (config.Workflow, bool) { return wf, name == "pay" },
		Approver: func(id string) (string, bool) {
			m := map[string]string{"U0ALICE": "alice", "U0BOB": "bob"}
			n, ok := m[id]
			return n, ok
		},
		Decide: func(_ context.Context, id, approver string, approve bool, _ string) (*tasks.Task, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.err != nil {
				return nil, f.err
			}
			verb := "reject"
			if approve {
				verb = "approve"
			}
			f.decided = append(f.decided, approver+" "+verb+" "+id)
			return &tasks.Task{ID: id, Tool: "transfer_funds"}, nil
		},
		Lookup: func(_ context.Context, id string) (*tasks.Task, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if t, ok := f.held[id]; ok {
				if t == nil {
					return nil, tasks.ErrNotFound
				}
				return t.Clone(), nil
			}
			t := heldTask(id)
			t.Messages = []tasks.MessageRef{{Kind: refKind, Channel: "C1", ID: "1.1"}}
			return t, nil
		},
		BotToken: token, SigningSecret: secret, APIURL: f.recv.URL, ConsoleURL: "http://127.0.0.1:7469/approvals",
		Registerer: f.reg, Now: func() time.Time { return f.now },
		CannotRun: func(t *tasks.Task) *tasks.Unrunnable {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.cannot[t.ID]
		},
		NotWaiting: func(t *tasks.Task) *tasks.NotWaiting {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.gone[t.ID]
		},
	})
	f.s.backoff = []time.Duration{time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

func (f *fixture) click(t *testing.T, body []byte, hdr http.Header) int {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, InteractionsPath, bytes.NewReader(body))
	for k, v := range hdr {
		req.Header[k] = v
	}
	w := httptest.NewRecorder()
	f.s.Interactions().ServeHTTP(w, req)
	return w.Code
}

func (f *fixture) decisions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.decided...)
}

func (f *fixture) refused(reason string) float64 {
	return count(f.s.met.refusals.WithLabelValues(reason))
}

// TestInteractionsRefused: forged, stale and replayed callbacks decide nothing, are refused
// with 401 and counted by reason.
func TestInteractionsRefused(t *testing.T) {
	f := newFixture(t)
	body := slacktest.Click("U0ALICE", ActionApprove, "tg_1", "C1", "1.1", f.recv.ResponseURL("a"))

	forged := slacktest.Signed("not-the-secret", f.now, body)
	if c := f.click(t, body, forged); c != http.StatusUnauthorized {
		t.Errorf("forged signature: HTTP %d", c)
	}
	tampered := slacktest.Signed(secret, f.now, body)
	if c := f.click(t, append(append([]byte(nil), body...), "&x=1"...), tampered); c != http.StatusUnauthorized {
		t.Errorf("tampered body: HTTP %d", c)
	}
	stale := slacktest.Signed(secret, f.now.Add(-SignatureWindow-time.Second), body)
	if c := f.click(t, body, stale); c != http.StatusUnauthorized {
		t.Errorf("stale timestamp: HTTP %d", c)
	}
	if got := f.decisions(); len(got) != 0 {
		t.Fatalf("refused callbacks decided %v", got)
	}

	good := slacktest.Signed(secret, f.now, body)
	if c := f.click(t, body, good); c != http.StatusOK {
		t.Fatalf("authentic click: HTTP %d", c)
	}
	f.now = f.now.Add(time.Minute) // still within the window
	if c := f.click(t, body, good); c != http.StatusUnauthorized {
		t.Errorf("replayed click: HTTP %d", c)
	}
	if got := f.decisions(); len(got) != 1 || got[0] != "alice approve tg_1" {
		t.Errorf("decisions %v, want one by alice", got)
	}
	for reason, want := range map[string]float64{ReasonBadSignature: 2, ReasonStale: 1, ReasonReplay: 1} {
		if got := f.refused(reason); got != want {
			t.Errorf("refused{reason=%s} = %v, want %v", reason, got, want)
		}
	}
}

// TestInteractionsDisabledWithoutSecret: no signing secret, no decisions (404).
func TestInteractionsDisabledWithoutSecret(t *testing.T) {
	s := New(Options{Decide: func(context.Context, string, string, bool, string) (*tasks.Task, error) {
		t.Fatal("decided without a signing secret")
		return nil, nil
	}})
	body := slacktest.Click("U0ALICE", ActionApprove, "tg_1", "C1", "1.1", "")
	req := httptest.NewRequest(http.MethodPost, InteractionsPath, bytes.NewReader(body))
	for k, v := range slacktest.Signed("", time.Now(), body) {
		req.Header[k] = v
	}
	w := httptest.NewRecorder()
	s.Interactions().ServeHTTP(w, req)
	if w.Code != http.StatusNotFound {
		t.Errorf("HTTP %d, want 404", w.Code)
	}
}

// TestUnmappedUserRefused: a click by a Slack user no approver lists decides nothing and is
// answered ephemerally through the payload's response_url.
func TestUnmappedUserRefused(t *testing.T) {
	f := newFixture(t)
	body := slacktest.Click("U0MALLORY", ActionApprove, "tg_1", "C1", "1.1", f.recv.ResponseURL("mallory"))
	if c := f.click(t, body, slacktest.Signed(secret, f.now, body)); c != http.StatusOK {
		t.Fatalf("HTTP %d (Slack shows an error for anything but 200)", c)
	}
	resp := f.recv.Wait(t, "response_url", 1)[0].Body
	if resp["response_type"] != "ephemeral" || !strings.Contains(resp["text"].(string), "not a Tollgate approver") {
		t.Errorf("response %v", resp)
	}
	if got := f.decisions(); len(got) != 0 {
		t.Errorf("unmapped user decided %v", got)
	}
	if got := f.refused(ReasonUnmapped); got != 1 {
		t.Errorf("refused{unmapped_user} = %v", got)
	}
}

// TestClickDecides: Approve and Reject decide as the mapped approver; a refusal by the decision
// path (self-approval, already decided) is told to the user ephemerally.
func TestClickDecides(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct{ user, action, id, want string }{
		{"U0ALICE", ActionApprove, "tg_1", "alice approve tg_1"},
		{"U0BOB", ActionReject, "tg_2", "bob reject tg_2"},
	} {
		body := slacktest.Click(tc.user, tc.action, tc.id, "C1", "1.1", f.recv.ResponseURL("x"))
		if c := f.click(t, body, slacktest.Signed(secret, f.now, body)); c != http.StatusOK {
			t.Fatalf("%s: HTTP %d", tc.want, c)
		}
	}
	if got := fmt.Sprint(f.decisions()); got != "[alice approve tg_1 bob reject tg_2]" {
		t.Errorf("decisions %s", got)
	}
	for i, tc := range []struct {
		err    error
		reason string
		text   string
	}{
		{tasks.ErrSelfApproval, ReasonSelf, "someone else must decide"},
		{&tasks.ConflictError{Task: &tasks.Task{Decision: &tasks.Decision{Approved: true, By: "bob"}}}, ReasonNotPending, "already approved by bob"},
	} {
		f.mu.Lock()
		f.err = tc.err
		f.mu.Unlock()
		body := slacktest.Click("U0ALICE", ActionApprove, fmt.Sprintf("tg_x%d", i), "C1", "1.1", f.recv.ResponseURL("x"))
		if c := f.click(t, body, slacktest.Signed(secret, f.now, body)); c != http.StatusOK {
			t.Fatalf("HTTP %d", c)
		}
		r := f.recv.Wait(t, "response_url", i+1)[i].Body
		if !strings.Contains(r["text"].(string), tc.text) || f.refused(tc.reason) != 1 {
			t.Errorf("%v: response %v, refused{%s} %v", tc.err, r, tc.reason, f.refused(tc.reason))
		}
	}
}

func heldTask(id string) *tasks.Task {
	now := time.Now()
	return &tasks.Task{ID: id, Tool: "transfer_funds", Workflow: "pay", State: tasks.AwaitingApproval,
		Arguments:   json.RawMessage(`{"amount": 9007199254740993, "to": "<@U0EVE>", "password": "hunter2"}`),
		RequestedBy: "carol", CreatedAt: now, ApprovalDeadline: now.Add(10 * time.Minute), TTL: time.Hour}
}

// TestMessages: a held call is posted with chat.postMessage (Block Kit, buttons carrying the
// task id, arguments redacted and exact); decided anywhere else, the same message is replaced
// with chat.update showing the outcome and who decided, without buttons. Every request is
// checked against Slack's documented shapes by the receiver.
func TestMessages(t *testing.T) {
	f := newFixture(t)
	held := heldTask("tg_msg")
	f.s.OnTaskChange(tasks.Transition{To: tasks.AwaitingApproval, Task: held})
	post := f.recv.Wait(t, "chat.postMessage", 1)[0].Body
	if post["channel"] != "#approvals" {
		t.Errorf("channel %v", post["channel"])
	}
	text := slacktest.Text(post)
	for _, want := range []string{"Approval needed", "transfer_funds", "carol", "9007199254740993", "[REDACTED]", "&lt;@U0EVE&gt;", "*Expires*"} {
		if !strings.Contains(text, want) {
			t.Errorf("posted message lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "hunter2") {
		t.Error("posted message shows a redacted field")
	}
	acts := slacktest.Blocks(post, "actions")
	if len(acts) != 1 {
		t.Fatalf("actions blocks %d, want 1", len(acts))
	}
	var ids []string
	for _, e := range acts[0]["elements"].([]any) {
		em := e.(map[string]any)
		ids = append(ids, fmt.Sprint(em["action_id"], "=", em["value"], "/", em["style"]))
	}
	if got := strings.Join(ids, " "); got != "tollgate_approve=tg_msg/primary tollgate_reject=tg_msg/danger" {
		t.Errorf("buttons %s", got)
	}

	decided := *held
	decided.State = tasks.Approved
	decided.Decision = &tasks.Decision{Approved: true, By: "bob", At: time.Now()}
	f.s.OnTaskChange(tasks.Transition{From: tasks.AwaitingApproval, To: tasks.Approved, Task: &decided})
	upd := f.recv.Wait(t, "chat.update", 1)[0].Body
	if upd["channel"] != slacktest.ChannelID || upd["ts"] == "" {
		t.Errorf("chat.update channel %v ts %v, want the posted message's", upd["channel"], upd["ts"])
	}
	if got := slacktest.Text(upd); !strings.Contains(got, "Approved by bob") {
		t.Errorf("update lacks the outcome:\n%s", got)
	}
	if len(slacktest.Blocks(upd, "actions")) != 0 {
		t.Error("the updated message still has buttons")
	}

	// Execution progress after the decision is not posted.
	exec := decided
	exec.State = tasks.Executing
	f.s.OnTaskChange(tasks.Transition{From: tasks.Approved, To: tasks.Executing, Task: &exec})
	// Every other way a wait ends updates the message too.
	for i, end := range []struct {
		state tasks.State
		dec   *tasks.Decision
		want  string
	}{
		{tasks.TimedOut, &tasks.Decision{By: tasks.ByTimeout, At: time.Now()}, "timed out: rejected"},
		{tasks.Cancelled, nil, "Cancelled by the requester"},
		{tasks.Expired, nil, "Expired before a decision"},
		{tasks.Rejected, &tasks.Decision{By: "alice", At: time.Now()}, "Rejected by alice"},
	} {
		h := heldTask(fmt.Sprintf("tg_end%d", i))
		f.s.OnTaskChange(tasks.Transition{To: tasks.AwaitingApproval, Task: h})
		e := *h
		e.State, e.Decision = end.state, end.dec
		f.s.OnTaskChange(tasks.Transition{From: tasks.AwaitingApproval, To: end.state, Task: &e})
		u := f.recv.Wait(t, "chat.update", i+2)[i+1].Body
		if got := slacktest.Text(u); !strings.Contains(got, end.want) {
			t.Errorf("%s: update lacks %q:\n%s", end.state, end.want, got)
		}
	}
	if n := len(f.recv.Calls("chat.update")); n != 5 {
		t.Errorf("%d chat.update requests, want 5", n)
	}
}

// TestSlackDownNeverBlocks: Slack answering 500 is retried, then counted as failed and shown
// by ChannelHealth; a full queue drops (counted) instead of blocking the task manager.
func TestSlackDownNeverBlocks(t *testing.T) {
	f := newFixture(t)
	f.recv.FailNext.Store(3)
	f.s.OnTaskChange(tasks.Transition{To: tasks.AwaitingApproval, Task: heldTask("tg_down")})
	f.recv.Wait(t, "chat.postMessage", 3)
	waitFor(t, func() bool { return count(f.s.met.requests.WithLabelValues(methodPost, resultFailed)) == 1 })
	if h, known := f.s.ChannelHealth("#approvals"); !known || h.OK || !strings.Contains(h.Detail, "HTTP 500") {
		t.Errorf("health %+v known %v", h, known)
	}
	// The next message gets through: health recovers.
	f.s.OnTaskChange(tasks.Transition{To: tasks.AwaitingApproval, Task: heldTask("tg_up")})
	f.recv.Wait(t, "chat.postMessage", 4)
	waitFor(t, func() bool { h, _ := f.s.ChannelHealth("#approvals"); return h.OK })

	// No worker: the queue fills and further changes are dropped at once.
	s := New(Options{Workflow: func(string) (config.Workflow, bool) { return wf, true }, BotToken: token, QueueSize: 2})
	for i := range 5 {
		s.OnTaskChange(tasks.Transition{To: tasks.AwaitingApproval, Task: heldTask(fmt.Sprint("tg_q", i))})
	}
	if s.Dropped() != 3 {
		t.Errorf("dropped %d, want 3", s.Dropped())
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatal("condition not met after 10s")
		}
	}
}

func count(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// BenchmarkInteraction: what one signed click costs before any decision (verify, replay
// check, parse): the price of refusing a flood of forged callbacks.
func BenchmarkInteraction(b *testing.B) {
	s := New(Options{SigningSecret: secret, Decide: func(_ context.Context, id, _ string, _ bool, _ string) (*tasks.Task, error) {
		return &tasks.Task{ID: id}, nil
	}, Approver: func(string) (string, bool) { return "alice", true }})
	body := slacktest.Click("U0ALICE", ActionApprove, "tg_1", "C1", "1.1", "")
	forged := slacktest.Signed("wrong", time.Now(), body)
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, InteractionsPath, bytes.NewReader(body))
		req.Header = forged
		w := httptest.NewRecorder()
		s.Interactions().ServeHTTP(w, req)
		if w.Code != http.StatusUnauthorized {
			b.Fatal(w.Code)
		}
	}
}

// FuzzInteraction: any signed body is answered without a panic, and a decision is made only
// for one of Tollgate's two buttons carrying a task id.
func FuzzInteraction(f *testing.F) {
	f.Add(slacktest.Click("U0ALICE", ActionApprove, "tg_1", "C1", "1.1", "http://127.0.0.1:1/x"), "application/x-www-form-urlencoded")
	f.Add([]byte("payload=%7B%22type%22%3A%22block_actions%22%7D"), "application/x-www-form-urlencoded")
	f.Add([]byte("payload=null&payload=1"), "application/x-www-form-urlencoded; charset=utf-8")
	f.Add([]byte(`{"type":"block_actions"}`), "application/json")
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		now := time.Unix(1700000000, 0)
		s := New(Options{SigningSecret: secret, Now: func() time.Time { return now }, QueueSize: 1,
			Approver: func(id string) (string, bool) { return "alice", id == "U0ALICE" },
			Decide: func(_ context.Context, id, _ string, _ bool, _ string) (*tasks.Task, error) {
				if id == "" {
					t.Fatal("decided an empty task id")
				}
				return &tasks.Task{ID: id}, nil
			},
			Workflow: func(name string) (config.Workflow, bool) { return wf, name == "pay" },
			Lookup: func(_ context.Context, id string) (*tasks.Task, error) {
				t := heldTask(id)
				t.Messages = []tasks.MessageRef{{Kind: refKind, Channel: "C1", ID: "1.1"}}
				return t, nil
			}})
		req := httptest.NewRequest(http.MethodPost, InteractionsPath, bytes.NewReader(body))
		req.Header = slacktest.Signed(secret, now, body)
		req.Header.Set("Content-Type", contentType)
		w := httptest.NewRecorder()
		s.Interactions().ServeHTTP(w, req)
		if w.Code != http.StatusOK && w.Code != http.StatusBadRequest && w.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("HTTP %d", w.Code)
		}
	})
}

// TestVoteKeepsButtons: a call that needs two approvals (min_approvals) stays decidable in
// Slack after the first: the vote refreshes the same message with "1 of 2 approvals: alice"
// and the buttons, and the final decision still replaces it with the outcome. The message
// used to be replaced by a button-less outcome at the first vote and then forgotten.
func TestVoteKeepsButtons(t *testing.T) {
	f := newFixture(t)
	held := heldTask("tg_two")
	held.RequiredApprovals = 2
	f.s.OnTaskChange(tasks.Transition{To: tasks.AwaitingApproval, Task: held})
	post := f.recv.Wait(t, "chat.postMessage", 1)[0].Body
	if got := slacktest.Text(post); !strings.Contains(got, "0 of 2 approvals") {
		t.Errorf("posted message lacks the approvals needed:\n%s", got)
	}

	voted := *held
	voted.Approvals = []tasks.Vote{{By: "alice", At: time.Now()}}
	f.s.OnTaskChange(tasks.Transition{From: tasks.AwaitingApproval, To: tasks.AwaitingApproval, Task: &voted})
	upd := f.recv.Wait(t, "chat.update", 1)[0].Body
	if got := slacktest.Text(upd); !strings.Contains(got, "1 of 2 approvals: alice") || !strings.Contains(got, "Approval needed") {
		t.Errorf("the vote's update lacks the votes so far:\n%s", got)
	}
	if len(slacktest.Blocks(upd, "actions")) != 1 {
		t.Error("after one of two approvals the message lost its buttons")
	}

	done := voted
	done.State = tasks.Approved
	done.Approvals = append(done.Approvals, tasks.Vote{By: "bob", At: time.Now()})
	done.Decision = &tasks.Decision{Approved: true, By: "bob", At: time.Now()}
	f.s.OnTaskChange(tasks.Transition{From: tasks.AwaitingApproval, To: tasks.Approved, Task: &done})
	final := f.recv.Wait(t, "chat.update", 2)[1].Body
	if upd["ts"] != final["ts"] || upd["channel"] != final["channel"] {
		t.Errorf("updates went to %v/%v and %v/%v, want one message", upd["channel"], upd["ts"], final["channel"], final["ts"])
	}
	got := slacktest.Text(final)
	if !strings.Contains(got, "Approved by bob") || !strings.Contains(got, "2 of 2 approvals: alice, bob") {
		t.Errorf("the final update lacks the outcome and both approvers:\n%s", got)
	}
	if len(slacktest.Blocks(final, "actions")) != 0 {
		t.Error("the decided message still has buttons")
	}
}

// TestPlaceKeptWithTask: a posted message's place is handed to Options.Remember; when the wait
// ended while the message was being posted, the message shows the outcome at once and the
// change's own update, queued behind, sends nothing more. A message known only from the copy
// kept with the task (posted before a restart) is updated from it.
func TestPlaceKeptWithTask(t *testing.T) {
	f := newFixture(t)
	var kept []tasks.MessageRef
	var mu sync.Mutex
	f.s.opts.Remember = func(_ context.Context, id string, ref tasks.MessageRef) (*tasks.Task, error) {
		mu.Lock()
		defer mu.Unlock()
		kept = append(kept, ref)
		d := heldTask(id)
		d.State, d.Decision = tasks.Rejected, &tasks.Decision{By: "alice", At: time.Now()}
		return d, nil
	}
	held := heldTask("tg_race")
	f.s.OnTaskChange(tasks.Transition{To: tasks.AwaitingApproval, Task: held})
	rejected := *held
	rejected.State, rejected.Decision = tasks.Rejected, &tasks.Decision{By: "alice", At: time.Now()}
	f.s.OnTaskChange(tasks.Transition{From: tasks.AwaitingApproval, To: tasks.Rejected, Task: &rejected})
	upd := f.recv.Wait(t, "chat.update", 1)[0].Body
	if got := slacktest.Text(upd); !strings.Contains(got, "Rejected by alice") || len(slacktest.Blocks(upd, "actions")) != 0 {
		t.Errorf("update of a message posted while its wait ended:\n%s", got)
	}
	mu.Lock()
	if len(kept) != 1 || kept[0].Kind != "slack" || kept[0].Channel != slacktest.ChannelID || kept[0].ID != upd["ts"] {
		t.Errorf("kept %+v, want the posted message (ts %v)", kept, upd["ts"])
	}
	mu.Unlock()

	// Posted before a restart: this process knows it only from the task.
	before := heldTask("tg_before")
	before.State, before.Decision = tasks.Approved, &tasks.Decision{Approved: true, By: "bob", At: time.Now()}
	before.Messages = []tasks.MessageRef{{Kind: "slack", Channel: "C0OTHER", ID: "1600000000.000009"}}
	f.s.OnTaskChange(tasks.Transition{From: tasks.AwaitingApproval, To: tasks.Approved, Task: before})
	u := f.recv.Wait(t, "chat.update", 2)[1].Body
	if u["channel"] != "C0OTHER" || u["ts"] != "1600000000.000009" || !strings.Contains(slacktest.Text(u), "Approved by bob") {
		t.Errorf("update from the place kept with the task: %v", u)
	}
	if n := len(f.recv.Calls("chat.update")); n != 2 {
		t.Errorf("%d chat.update requests, want 2 (the queued update of tg_race sends nothing)", n)
	}

	// Resume posts only pending tasks of a Slack workflow with no message kept.
	unsent, sent, other := heldTask("tg_unsent"), heldTask("tg_sent"), heldTask("tg_other")
	sent.Messages = before.Messages
	other.Workflow = "console-only"
	if n := f.s.Resume([]*tasks.Task{unsent, sent, other}); n != 1 {
		t.Fatalf("Resume queued %d posts, want 1", n)
	}
	if got := buttonOf(t, f.recv.Wait(t, "chat.postMessage", 2)[1].Body); got != "tg_unsent" {
		t.Errorf("resumed post is for %q, want tg_unsent", got)
	}
}

func buttonOf(t *testing.T, post map[string]any) string {
	t.Helper()
	acts := slacktest.Blocks(post, "actions")
	if len(acts) != 1 {
		t.Fatalf("actions blocks %d", len(acts))
	}
	return fmt.Sprint(acts[0]["elements"].([]any)[0].(map[string]any)["value"])
}

// TestClickMustComeFromTollgatesMessage: a click decides only when the clicked message is one
// Tollgate posted for that task — its channel and ts are the ones recorded when it posted
// (in memory, or kept with the task) — in a workflow that posts to Slack. Any other place,
// another task's message, an empty place or a non-Slack workflow is refused, counted as
// foreign_message, and decides nothing; the clicked place is never recorded as the task's.
func TestClickMustComeFromTollgatesMessage(t *testing.T) {
	f := newFixture(t)
	posted := heldTask("tg_posted") // posted by this process: its place is in memory only
	f.held = map[string]*tasks.Task{"tg_posted": posted}
	f.s.OnTaskChange(tasks.Transition{To: tasks.AwaitingApproval, Task: posted})
	f.recv.Wait(t, "chat.postMessage", 1)
	deadline := time.Now().Add(10 * time.Second) // a bound on the wait, never a measurement
	for {
		if _, ok := f.s.msgs.get("tg_posted"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the posted message's place was never recorded")
		}
		time.Sleep(time.Millisecond)
	}
	other := heldTask("tg_other")
	other.Messages = []tasks.MessageRef{{Kind: refKind, Channel: "C1", ID: "2.2"}}
	webhook := heldTask("tg_webhook")
	webhook.Workflow = "ops" // not a Slack workflow
	webhook.Messages = []tasks.MessageRef{{Kind: refKind, Channel: "C1", ID: "3.3"}}
	f.mu.Lock()
	f.held["tg_other"], f.held["tg_webhook"] = other, webhook
	f.mu.Unlock()

	refused := []struct{ name, id, channel, ts string }{
		{"wrong ts", "tg_1", "C1", "9.9"},
		{"wrong channel", "tg_1", "C2", "1.1"},
		{"another task's message", "tg_other", "C1", "1.1"},
		{"a message of the right task, another channel", "tg_posted", "C1", "1700000000.000001"},
		{"no place", "tg_1", "", ""},
		{"not a Slack workflow", "tg_webhook", "C1", "3.3"},
	}
	for i, tc := range refused {
		body := slacktest.Click("U0ALICE", ActionApprove, tc.id, tc.channel, tc.ts, f.recv.ResponseURL("x"))
		if c := f.click(t, body, slacktest.Signed(secret, f.now, body)); c != http.StatusOK {
			t.Fatalf("%s: HTTP %d", tc.name, c)
		}
		if got := f.refused(ReasonForeignMessage); got != float64(i+1) {
			t.Errorf("%s: foreign_message = %v, want %d", tc.name, got, i+1)
		}
		if r := f.recv.Wait(t, "response_url", i+1)[i].Body; !strings.Contains(r["text"].(string), "Nothing was decided") {
			t.Errorf("%s: told %v", tc.name, r)
		}
	}
	if d := f.decisions(); len(d) != 0 {
		t.Fatalf("refused clicks decided %v", d)
	}
	if ref, _ := f.s.msgs.get("tg_1"); ref != (msgRef{}) {
		t.Errorf("a refused click recorded its place %v as the task's message", ref)
	}
	// The places Tollgate recorded decide: in memory (posted here) and kept with the task.
	for _, tc := range []struct{ id, channel, ts string }{
		{"tg_posted", slacktest.ChannelID, "1700000000.000001"},
		{"tg_other", "C1", "2.2"},
	} {
		body := slacktest.Click("U0BOB", ActionApprove, tc.id, tc.channel, tc.ts, f.recv.ResponseURL("x"))
		if c := f.click(t, body, slacktest.Signed(secret, f.now, body)); c != http.StatusOK {
			t.Fatalf("HTTP %d", c)
		}
	}
	if got := fmt.Sprint(f.decisions()); got != "[bob approve tg_posted bob approve tg_other]" {
		t.Errorf("decisions %s", got)
	}
}

// TestTruncatedCallHasNoButtons: when the message cannot show the call whole (redacted
// arguments past Block Kit's limit), it carries no Approve/Reject buttons but a link to the
// console, and a click on the task from Slack is refused as truncated.
func TestTruncatedCallHasNoButtons(t *testing.T) {
	f := newFixture(t)
	big := heldTask("tg_big")
	big.Arguments = json.RawMessage(`{"to":"acct-1","memo":"` + strings.Repeat("m", argsMax) + `","amount":1}`)
	big.Messages = []tasks.MessageRef{{Kind: refKind, Channel: "C1", ID: "1.1"}}
	f.held = map[string]*tasks.Task{"tg_big": big}
	f.s.OnTaskChange(tasks.Transition{To: tasks.AwaitingApproval, Task: big})
	post := f.recv.Wait(t, "chat.postMessage", 1)[0].Body
	raw, _ := json.Marshal(post)
	if strings.Contains(string(raw), ActionApprove) || strings.Contains(string(raw), ActionReject) {
		t.Errorf("a truncated call was posted with buttons:\n%s", raw)
	}
	if text := slacktest.Text(post); !strings.Contains(text, "approvals console") || !strings.Contains(text, "cannot be decided in Slack") {
		t.Errorf("the message does not send approvers to the console:\n%s", text)
	}
	body := slacktest.Click("U0ALICE", ActionApprove, "tg_big", "C1", "1.1", f.recv.ResponseURL("x"))
	if c := f.click(t, body, slacktest.Signed(secret, f.now, body)); c != http.StatusOK {
		t.Fatalf("HTTP %d", c)
	}
	if d := f.decisions(); len(d) != 0 || f.refused(ReasonTruncated) != 1 {
		t.Errorf("decisions %v, truncated %v", d, f.refused(ReasonTruncated))
	}
	// A call that fits keeps its buttons.
	small := heldTask("tg_small")
	f.s.OnTaskChange(tasks.Transition{To: tasks.AwaitingApproval, Task: small})
	raw, _ = json.Marshal(f.recv.Wait(t, "chat.postMessage", 2)[1].Body)
	if !strings.Contains(string(raw), ActionApprove) {
		t.Errorf("a call shown whole lost its buttons:\n%s", raw)
	}
}
