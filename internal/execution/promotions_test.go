package execution

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

func msg(t *testing.T, raw string) *jsonrpc.Message {
	t.Helper()
	m, err := jsonrpc.Parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestPromotions: a promoted task's execution gets the in-flight call's answer, never calls
// upstream (the Runner has none here); server→client requests that arrive after the promotion
// go to the execution (which relays them to the task's owner), beyond a bound they are only
// shown pending for the task's session; all is gone once the call answered.
func TestPromotions(t *testing.T) {
	p := NewPromotions()
	r := New(Options{Promotions: p})
	sink := p.Begin("tg_a", "s1")
	sink.Other(msg(t, `{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`)) // not a request: not kept
	sink.Other(msg(t, `{"jsonrpc":"2.0","id":"q1","method":"elicitation/create","params":{}}`))
	asked := make(chan string, 1)
	answer := make(chan json.RawMessage, 1)
	go func() {
		res, _ := p.await(context.Background(), "tg_a", func(m *jsonrpc.Message) { asked <- m.Method + " " + string(m.ID) })
		answer <- res
	}()
	if got := <-asked; got != `elicitation/create "q1"` {
		t.Fatalf("the execution was handed %q, want the elicitation", got)
	}
	sink.Done(msg(t, `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`), nil)
	if res := <-answer; string(res) != `{"content":[]}` {
		t.Fatalf("await = %s, want the in-flight call's result", res)
	}

	sink = p.Begin("tg_b", "s2")
	for i := range maxPendingPerTask + 1 { // nobody takes them: the last one is only shown
		sink.Other(msg(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"roots/list"}`, i)))
	}
	if _, got := p.PendingFor("s2", "tg_b"); len(got) != 1 || string(jsonrpc.Member(got[0], "id")) != fmt.Sprint(maxPendingPerTask) {
		t.Errorf("pending for task tg_b = %s, want the one beyond the bound", got)
	}
	if _, got := p.PendingFor("s3", ""); len(got) != 0 {
		t.Errorf("another session sees %s", got)
	}

	sink = p.Begin("tg_a", "s1")
	sink.Done(msg(t, `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`), nil)
	if _, got := p.PendingFor("s1", "tg_a"); len(got) != 0 {
		t.Errorf("pending after the answer: %s", got)
	}
	res, e := r.Execute(context.Background(), &tasks.Task{ID: "tg_a", Promoted: true, Accelerated: true})
	if e != nil || string(res) != `{"content":[]}` {
		t.Fatalf("Execute = %s, %v; want the in-flight call's result", res, e)
	}
	// Taken once: a second execution (never happens: at most once) finds nothing.
	if _, e := r.Execute(context.Background(), &tasks.Task{ID: "tg_a", Promoted: true}); e == nil || e.Name() != "PromotionLost" {
		t.Errorf("second Execute: %v, want PromotionLost", e)
	}

	// An upstream error answer is the task's error as sent.
	sink = p.Begin("tg_c", "s1")
	sink.Done(msg(t, `{"jsonrpc":"2.0","id":1,"error":{"code":-32050,"message":"no","data":"raw"}}`), nil)
	_, e = r.Execute(context.Background(), &tasks.Task{ID: "tg_c", Promoted: true})
	if e == nil || e.Code != -32050 || string(e.RawData) != `"raw"` {
		t.Errorf("Execute of an error answer = %+v", e)
	}

	// The task's budget ends before the answer.
	p.Begin("tg_d", "s1")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, e := r.Execute(ctx, &tasks.Task{ID: "tg_d", Promoted: true}); e == nil || e.Name() != "UpstreamTimeout" {
		t.Errorf("Execute past its budget: %v, want UpstreamTimeout", e)
	}
}
