package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// gosdk is the official go-sdk v1.8.0 stateful fixture (test/fixture/gosdk, a module of its
// own) running as a process on loopback. go-sdk refuses a POST without the transport's
// Accept header with HTTP 400, an answer to its own elicitation included.
type gosdk struct {
	url string // http://127.0.0.1:PORT/mcp
}

func startGoSDK(t *testing.T) *gosdk {
	t.Helper()
	return &gosdk{url: startFixtureModule(t, "gosdk", "go-sdk v1.8.0")}
}

// gosdkStats are the fixture's counts: how often each tool ran, and the HTTP statuses its
// POSTs were answered with.
type gosdkStats struct {
	Calls map[string]int `json:"calls"`
	Posts map[string]int `json:"posts"`
}

func (f *gosdk) stats(t *testing.T) gosdkStats {
	t.Helper()
	resp, err := testkit.HTTPClient.Get(strings.TrimSuffix(f.url, "/mcp") + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s gosdkStats
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// startTaskClient connects an mcp-go 2025-11-25 client that declares elicitation and
// sampling (an upstream only asks what the client declared).
func startTaskClient(t *testing.T, url string, opts ...client.ClientOption) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(url)
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: "2025-11-25", ClientInfo: mcp.Implementation{Name: "e2e-gosdk", Version: "1"},
		Capabilities: mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{}, Sampling: &mcp.SamplingCapability{}},
	}}); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAnswersToUpstreamCarryTransportHeaders: Tollgate's own answer to a stateful go-sdk
// upstream's server→client request during an approved call it executes carries what the
// streamable HTTP transport requires (Accept, Content-Type, protocol version, session). It
// used to go without Accept: go-sdk refused it with HTTP 400, the tool never got an answer,
// and the task waited for tasks.execution_timeout instead of ending at once.
func TestAnswersToUpstreamCarryTransportHeaders(t *testing.T) {
	up := startGoSDK(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(up.url, `governance:
  defaults: {action: forward}
  rules:
    - {match: "confirm*", action: approve}
approval:
  default: {timeout: 10m, on_timeout: deny}
approvers:
  - {name: alice, token_env: ALICE_TOKEN}
tasks:
  execution_timeout: 2m
`), approverEnv, nil)
	g.WaitReady(t)
	c := startTaskClient(t, g.MCP)

	res, rpcErr := callWithTask(t, c, "confirm", map[string]any{"what": "drop the table"}, 600000)
	if rpcErr != nil {
		t.Fatal(rpcErr)
	}
	tid := taskIDOf(t, res)
	decide(t, g, tid, "approve")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	result, err := c.TaskResult(ctx, mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: tid}})
	if err != nil {
		t.Fatalf("tasks/result: %v (the upstream must get Tollgate's answer and the task end at once)", err)
	}
	if text := resultText(&mcp.CallToolResult{Content: result.Content}); !strings.HasPrefix(text, "no answer:") {
		t.Fatalf("result %q, want the tool's own outcome of the refused question", text)
	}
	st := up.stats(t)
	if st.Calls["confirm"] != 1 {
		t.Errorf("confirm ran %d times, want 1", st.Calls["confirm"])
	}
	if st.Posts["400"] != 0 {
		t.Errorf("the upstream refused %d POSTs with HTTP 400 (%v): a message Tollgate sent lacks a transport header", st.Posts["400"], st.Posts)
	}
}

// owner answers the upstream's questions as a task's owner would: elicitations with accept
// {ok: true} numbered by arrival, sampling with a fixed text; it records how often it was asked.
type owner struct {
	mu      sync.Mutex
	elicits int
	samples int
}

func (o *owner) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.elicits++
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
		Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"ok": true, "n": o.elicits},
	}}, nil
}

func (o *owner) CreateMessage(_ context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.samples++
	return &mcp.CreateMessageResult{SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.TextContent{Type: "text", Text: "short"}}, Model: "owner-model"}, nil
}

// TestGoSDKQuestionsDuringApprovedTask: a stateful go-sdk upstream's tools that elicit once,
// elicit twice and sample during an approved 2025-11-25 task: each question reaches the
// owner (mcp-go client) on its tasks/result stream, each answer reaches the upstream, the
// task completes with the tool's result, and each tool ran once.
func TestGoSDKQuestionsDuringApprovedTask(t *testing.T) {
	up := startGoSDK(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(up.url, `governance:
  defaults: {action: approve}
approval:
  default: {timeout: 10m, on_timeout: deny}
approvers:
  - {name: alice, token_env: ALICE_TOKEN}
`), approverEnv, nil)
	g.WaitReady(t)
	o := &owner{}
	c := startTaskClient(t, g.MCP, client.WithElicitationHandler(o), client.WithSamplingHandler(o))

	for _, tc := range []struct {
		tool, arg, want  string
		elicits, samples int
	}{
		{"confirm", "what", "answer accept map[n:1 ok:true]", 1, 0},
		{"confirm_twice", "what", "answers accept map[n:2 ok:true] / accept map[n:3 ok:true]", 2, 0},
		{"summarize", "text", "summary short", 0, 1},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			o.mu.Lock()
			e0, s0 := o.elicits, o.samples
			o.mu.Unlock()
			res, rpcErr := callWithTask(t, c, tc.tool, map[string]any{tc.arg: "drop the table"}, 600000)
			if rpcErr != nil {
				t.Fatal(rpcErr)
			}
			tid := taskIDOf(t, res)
			decide(t, g, tid, "approve")
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			result, err := c.TaskResult(ctx, mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: tid}})
			if err != nil {
				t.Fatalf("tasks/result: %v", err)
			}
			if text := resultText(&mcp.CallToolResult{Content: result.Content}); result.IsError || text != tc.want {
				t.Fatalf("result isError=%v %q, want %q", result.IsError, text, tc.want)
			}
			o.mu.Lock()
			asked := fmt.Sprintf("%d/%d", o.elicits-e0, o.samples-s0)
			o.mu.Unlock()
			if want := fmt.Sprintf("%d/%d", tc.elicits, tc.samples); asked != want {
				t.Errorf("owner asked %s elicitations/samplings, want %s", asked, want)
			}
			if n := up.stats(t).Calls[tc.tool]; n != 1 {
				t.Errorf("%s ran %d times, want 1", tc.tool, n)
			}
		})
	}
}

// TestGoSDKQuestionsDuringHeldPlainCall: a plain call (mcp-go client without tasks) held for
// approval (tasks.sync_approval: hold) whose go-sdk tools ask after the approval: each question
// reaches the caller on the held call's own stream, as a direct proxy would relay it, and the
// answers reach the upstream; the call ends with the tool's result and the tool ran once.
func TestGoSDKQuestionsDuringHeldPlainCall(t *testing.T) {
	up := startGoSDK(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(up.url, `governance:
  defaults: {action: approve}
approval:
  default: {timeout: 10m, on_timeout: deny}
approvers:
  - {name: alice, token_env: ALICE_TOKEN}
`), approverEnv, nil)
	g.WaitReady(t)
	o := &owner{}
	c := startTaskClient(t, g.MCP, client.WithElicitationHandler(o), client.WithSamplingHandler(o))
	for _, tc := range []struct{ tool, arg, want string }{
		{"confirm_twice", "what", "answers accept map[n:1 ok:true] / accept map[n:2 ok:true]"},
		{"summarize", "text", "summary short"},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			type answer struct {
				r   *mcp.CallToolResult
				err error
			}
			done := make(chan answer, 1)
			go func() {
				r, err := callTool(c, tc.tool, map[string]any{tc.arg: "drop the table"})
				done <- answer{r, err}
			}()
			waitFor(t, "the held call's approval", func() bool { return len(pendingApprovals(t, g)) == 1 })
			decide(t, g, pendingApprovals(t, g)[0], "approve")
			a := <-done
			if a.err != nil || a.r.IsError || resultText(a.r) != tc.want {
				t.Fatalf("held call: %+v %v, want %q", a.r, a.err, tc.want)
			}
			if n := up.stats(t).Calls[tc.tool]; n != 1 {
				t.Errorf("%s ran %d times, want 1", tc.tool, n)
			}
		})
	}
}

// TestGoSDKQuestionOnSessionStream: with no tasks/result open, the question of an approved
// 2025-11-25 task goes to the owner's session GET stream (mcp-go client listening
// continuously) with the related-task _meta; the answer reaches the upstream and the task
// completes.
func TestGoSDKQuestionOnSessionStream(t *testing.T) {
	up := startGoSDK(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(up.url, `governance:
  defaults: {action: approve}
approval:
  default: {timeout: 10m, on_timeout: deny}
approvers:
  - {name: alice, token_env: ALICE_TOKEN}
`), approverEnv, nil)
	g.WaitReady(t)
	o := &owner{}
	tr, err := transport.NewStreamableHTTP(g.MCP, transport.WithContinuousListening())
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithElicitationHandler(o), client.WithSamplingHandler(o))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: "2025-11-25", ClientInfo: mcp.Implementation{Name: "e2e-gosdk-get", Version: "1"},
		Capabilities: mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{}, Sampling: &mcp.SamplingCapability{}},
	}}); err != nil {
		t.Fatal(err)
	}
	res, rpcErr := callWithTask(t, c, "confirm", map[string]any{"what": "drop the table"}, 600000)
	if rpcErr != nil {
		t.Fatal(rpcErr)
	}
	tid := taskIDOf(t, res)
	decide(t, g, tid, "approve")
	waitFor(t, "the task to complete without tasks/result", func() bool {
		got, err := c.GetTask(ctx, mcp.GetTaskRequest{Params: mcp.GetTaskParams{TaskId: tid}})
		return err == nil && got.Status == mcp.TaskStatusCompleted
	})
	result, err := c.TaskResult(ctx, mcp.TaskResultRequest{Params: mcp.TaskResultParams{TaskId: tid}})
	if err != nil {
		t.Fatal(err)
	}
	if text := resultText(&mcp.CallToolResult{Content: result.Content}); text != "answer accept map[n:1 ok:true]" {
		t.Fatalf("result %q", text)
	}
	if n := up.stats(t).Calls["confirm"]; n != 1 {
		t.Errorf("confirm ran %d times, want 1", n)
	}
}

// TestGoSDKQuestionTimeout: nobody answers the tool's question (the owner's client declares
// elicitation but never reads its streams): after tasks.input_timeout the upstream gets a
// decline, the tool finishes with it, the task completes, and the timeout is counted.
func TestGoSDKQuestionTimeout(t *testing.T) {
	up := startGoSDK(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(up.url, `governance:
  defaults: {action: approve}
approval:
  default: {timeout: 10m, on_timeout: deny}
approvers:
  - {name: alice, token_env: ALICE_TOKEN}
tasks:
  input_timeout: 300ms
`), approverEnv, nil)
	g.WaitReady(t)
	c := &testkit.RPC{T: t, URL: g.MCP}
	r := c.Post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"e2e-silent","version":"1"}}}`)
	c.Session = r.Header.Get("Mcp-Session-Id")
	c.Post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	tid := c.CallTask(1, "confirm", `{"what":"drop the table"}`)
	decide(t, g, tid, "approve")
	m := c.TaskRPC(2, "tasks/result", tid).Message(t) // on its stream: a question nobody answers, then the result
	content, _ := testkit.Dig(m, "result", "content").([]any)
	if len(content) == 0 || testkit.Dig(content[0], "text") != "answer decline map[]" {
		t.Fatalf("tasks/result: %v, want the tool's result of a declined question", m)
	}
	if n := metricValue(t, g, `tollgate_task_questions_total{outcome="timed_out"}`); n != 1 {
		t.Errorf("timed-out questions counted %v, want 1", n)
	}
	if n := up.stats(t).Calls["confirm"]; n != 1 {
		t.Errorf("confirm ran %d times, want 1", n)
	}
}

// TestGoSDKQuestionAfterPromotion: a forwarded plain call promoted to a task
// (tasks.promote_after) whose tool asks only after the promotion, when the caller's own
// stream has already been answered: the question goes to the task's owner, who sees it in
// tollgate_get_task and answers it with tollgate_answer_question; the upstream gets the
// answer on the call still in flight and the task's result carries it. It used to be kept
// for display only, the tool waiting until the call timed out.
func TestGoSDKQuestionAfterPromotion(t *testing.T) {
	up := startGoSDK(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(up.url, `governance:
  defaults: {action: forward}
tasks:
  promote_after: 200ms
`), nil, nil)
	g.WaitReady(t)
	c := &testkit.RPC{T: t, URL: g.MCP}
	r := c.Post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"e2e-promoted","version":"1"}}}`)
	c.Session = r.Header.Get("Mcp-Session-Id")
	c.Post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	m := c.Call(1, "slow_confirm", map[string]any{"what": "drop the table"}, 0)
	tid := taskIDRe.FindString(fmt.Sprint(testkit.Dig(m, "result", "content")))
	if tid == "" {
		t.Fatalf("not promoted: %v", m)
	}
	var qid string
	waitFor(t, "the question on the promoted task", func() bool { qid = pendingQuestion(t, c, tid); return qid != "" })
	if _, isErr := ownTool(t, c, 3, "tollgate_answer_question", map[string]any{"task_id": tid, "question_id": qid,
		"answer": map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}); isErr {
		t.Fatal("the owner's answer was refused")
	}
	m = c.Call(4, "tollgate_get_task_result", map[string]any{"task_id": tid, "timeout_ms": 15000}, 0)
	if got := fmt.Sprint(testkit.Dig(m, "result", "content")); !strings.Contains(got, "answer accept map[ok:true]") {
		t.Fatalf("result: %v", m)
	}
	if n := up.stats(t).Calls["slow_confirm"]; n != 1 {
		t.Errorf("slow_confirm ran %d times, want 1", n)
	}
}

// TestGoSDKQuestionsModernTask: the tasks-extension requester (2026-07-28) in front of the
// go-sdk upstream: after the approval each question of the tool (one, then two in turn) shows
// in tasks/get inputRequests with input_required; tasks/update answers it; the task completes
// with the tool's result and the tool ran once.
func TestGoSDKQuestionsModernTask(t *testing.T) {
	up := startGoSDK(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(up.url, `governance:
  defaults: {action: approve}
approval:
  default: {timeout: 10m, on_timeout: deny}
approvers:
  - {name: alice, token_env: ALICE_TOKEN}
`), approverEnv, nil)
	g.WaitReady(t)
	c := &modernClient{t: t, url: g.MCP, tasks: true, hdr: http.Header{"Authorization": {"Bearer owner"}}, caps: map[string]any{"elicitation": map[string]any{}}}
	for _, tc := range []struct {
		tool, want string
		questions  int
	}{
		{"confirm", "answer accept map[n:1 ok:true]", 1},
		{"confirm_twice", "answers accept map[n:1 ok:true] / accept map[n:2 ok:true]", 2},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			c.t = t
			m := c.call(1, "tools/call", map[string]any{"name": tc.tool, "arguments": map[string]any{"what": "drop the table"}})
			tid, _ := testkit.Dig(m, "result", "taskId").(string)
			if !strings.HasPrefix(tid, "tg_") {
				t.Fatalf("tools/call: %v", m)
			}
			decide(t, g, tid, "approve")
			for n := 1; n <= tc.questions; n++ {
				var reqs map[string]any
				waitFor(t, fmt.Sprintf("question %d", n), func() bool {
					got := c.call(2, "tasks/get", map[string]any{"taskId": tid})
					reqs, _ = testkit.Dig(got, "result", "inputRequests").(map[string]any)
					return testkit.Dig(got, "result", "status") == "input_required" && len(reqs) == 1 && reqs[fmt.Sprintf("tollgate-question-q%d", n)] != nil
				})
				answer := map[string]any{fmt.Sprintf("tollgate-question-q%d", n): map[string]any{"action": "accept", "content": map[string]any{"ok": true, "n": n}}}
				if r := c.call(3, "tasks/update", map[string]any{"taskId": tid, "inputResponses": answer}); testkit.Dig(r, "error") != nil {
					t.Fatalf("tasks/update: %v", r)
				}
			}
			var done map[string]any
			waitFor(t, "the task to complete", func() bool {
				done = c.call(4, "tasks/get", map[string]any{"taskId": tid})
				return testkit.Dig(done, "result", "status") == "completed"
			})
			content, _ := testkit.Dig(done, "result", "result", "content").([]any)
			if len(content) == 0 || testkit.Dig(content[0], "text") != tc.want {
				t.Fatalf("completed task: %v, want %q", done, tc.want)
			}
			if n := up.stats(t).Calls[tc.tool]; n != 1 {
				t.Errorf("%s ran %d times, want 1", tc.tool, n)
			}
		})
	}
}
