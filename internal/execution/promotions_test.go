package execution

import (
	"context"
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
// upstream (the Runner has none here); server→client requests that arrived meanwhile are
// pending for the task's session only, and are gone once the call answered.
func TestPromotions(t *testing.T) {
	p := NewPromotions()
	r := New(Options{Promotions: p})
	sink := p.Begin("tg_a", "s1")
	p.Begin("tg_b", "s2").Other(msg(t, `{"jsonrpc":"2.0","id":"x","method":"roots/list"}`))
	sink.Other(msg(t, `{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`)) // not a request: not kept
	sink.Other(msg(t, `{"jsonrpc":"2.0","id":"q1","method":"elicitation/create","params":{}}`))

	_, got := p.PendingFor("s1", "")
	if len(got) != 1 || jsonrpc.Member(got[0], "method") == nil || string(jsonrpc.Member(got[0], "id")) != `"q1"` {
		t.Fatalf("pending for s1 = %s, want the one elicitation", got)
	}
	if _, got := p.PendingFor("s1", "tg_b"); len(got) != 1 {
		t.Errorf("pending for task tg_b = %s, want its roots/list", got)
	}
	if _, got := p.PendingFor("s3", ""); len(got) != 0 {
		t.Errorf("another session sees %s", got)
	}

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
