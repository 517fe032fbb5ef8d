package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/test/fixture/modern"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// TestModernHeldPlainCallQuestion: a 2026-07-28 plain call held for approval (sync_approval:
// hold) whose modern upstream tool asks for confirmation (MRTR input_required) once approved.
// The held call answers the caller with an InputRequiredResult naming the question
// (requestState: the task); the caller's retry with inputResponses gives the answer to the
// upstream (its retry round) and gets the tool's result; nothing runs twice.
func TestModernHeldPlainCallQuestion(t *testing.T) {
	up := modern.New(modern.Options{FailDelay: -1})
	ts := httptest.NewServer(up)
	t.Cleanup(func() {
		ts.Close()
		up.Close()
	})
	g := testkit.StartGateway(t, testkit.BasicConfig(ts.URL+"/mcp", `governance:
  defaults: {action: forward}
  rules:
    - {match: "confirm_delete", action: approve}
approval:
  default: {timeout: 10m, on_timeout: deny}
approvers:
  - {name: alice, token_env: ALICE_TOKEN}
`), approverEnv, nil)
	g.WaitReady(t)
	c := &modernClient{t: t, url: g.MCP, hdr: http.Header{"Authorization": {"Bearer caller-one"}}, caps: map[string]any{"elicitation": map[string]any{}}}
	args := map[string]any{"filename": "held.txt"}

	held := make(chan testkit.Reply, 1)
	go func() {
		// Off the test goroutine: the request is built here and sent with TryPost.
		held <- c.tryDo(1, "tools/call", map[string]any{"name": "confirm_delete", "arguments": args})
	}()
	waitFor(t, "the held call's approval", func() bool { return len(pendingApprovals(t, g)) == 1 })
	tid := pendingApprovals(t, g)[0]
	decide(t, g, tid, "approve")
	m := (<-held).Message(t)
	reqs, _ := testkit.Dig(m, "result", "inputRequests").(map[string]any)
	if testkit.Dig(m, "result", "resultType") != "input_required" || len(reqs) != 1 || testkit.Dig(m, "result", "requestState") != tid {
		t.Fatalf("held call after the approval: %v, want an InputRequiredResult for task %s", m, tid)
	}
	var key string
	for k, v := range reqs {
		key = k
		if msg, _ := testkit.Dig(v, "params", "message").(string); testkit.Dig(v, "method") != "elicitation/create" || !strings.Contains(msg, "held.txt") {
			t.Fatalf("input request %s: %v", k, v)
		}
	}
	answer := map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}}
	m = c.call(2, "tools/call", map[string]any{"name": "confirm_delete", "arguments": args, "inputResponses": answer, "requestState": tid})
	if testkit.Dig(m, "result", "resultType") != "complete" || toolText(t, m) != "Deleted held.txt" {
		t.Fatalf("retry with inputResponses: %v", m)
	}
	if n := up.Calls("confirm_delete"); n != 2 {
		t.Errorf("confirm_delete ran %d times, want 2 (the round that asked, the retry with the answer)", n)
	}
}

// TestModernTaskQuestionFromLegacyUpstream: a 2026-07-28 tg_ task in front of a legacy-only
// mcp-go v0.44.0 upstream, which asks its elicitation on the bridged session's GET stream
// only. Once approved, the task shows input_required with the question in tasks/get
// inputRequests; another caller's tasks/update does not answer it; the owner's tasks/update
// does, the upstream gets the answer and the task completes with the tool's result.
func TestModernTaskQuestionFromLegacyUpstream(t *testing.T) {
	up := startLegacy044(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(up.url, `governance:
  defaults: {action: forward}
  rules:
    - {match: "confirm", action: approve}
approval:
  default: {timeout: 10m, on_timeout: deny}
approvers:
  - {name: alice, token_env: ALICE_TOKEN}
`), approverEnv, nil)
	g.WaitReady(t)
	c := &modernClient{t: t, url: g.MCP, tasks: true, hdr: http.Header{"Authorization": {"Bearer owner"}}}
	other := &modernClient{t: t, url: g.MCP, tasks: true, hdr: http.Header{"Authorization": {"Bearer other"}}}
	m := c.call(1, "tools/call", map[string]any{"name": "confirm", "arguments": map[string]any{"what": "drop the table"}})
	tid, _ := testkit.Dig(m, "result", "taskId").(string)
	if !strings.HasPrefix(tid, "tg_") {
		t.Fatalf("tools/call: %v", m)
	}
	decide(t, g, tid, "approve")
	got := c.waitTask(tid)
	reqs, _ := testkit.Dig(got, "result", "inputRequests").(map[string]any)
	if testkit.Dig(got, "result", "status") != "input_required" || len(reqs) != 1 {
		t.Fatalf("tasks/get after the approval: %v, want input_required with the tool's question", got)
	}
	var key string
	for k, v := range reqs {
		key = k
		if msg, _ := testkit.Dig(v, "params", "message").(string); testkit.Dig(v, "method") != "elicitation/create" || !strings.Contains(msg, "drop the table") {
			t.Fatalf("input request %s: %v", k, v)
		}
	}
	answer := map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"ok": true}}}
	if r := other.call(2, "tasks/update", map[string]any{"taskId": tid, "inputResponses": answer}); testkit.Dig(r, "error") == nil {
		t.Fatalf("another caller's tasks/update: %v, want not found", r)
	}
	if again := c.call(3, "tasks/get", map[string]any{"taskId": tid}); testkit.Dig(again, "result", "status") != "input_required" {
		t.Fatalf("after another caller's update: %v", again)
	}
	if r := c.call(4, "tasks/update", map[string]any{"taskId": tid, "inputResponses": answer}); testkit.Dig(r, "error") != nil {
		t.Fatalf("owner's tasks/update: %v", r)
	}
	var done map[string]any
	waitFor(t, "the task to complete", func() bool {
		done = c.call(5, "tasks/get", map[string]any{"taskId": tid})
		s := testkit.Dig(done, "result", "status")
		return s != "working" && s != "input_required"
	})
	content, _ := testkit.Dig(done, "result", "result", "content").([]any)
	if testkit.Dig(done, "result", "status") != "completed" || len(content) == 0 || !strings.Contains(fmt.Sprint(content[0]), "answer accept map[ok:true]") {
		t.Fatalf("completed task: %v", done)
	}
}
