package jsonrpc

import (
	"bytes"
	"encoding/json"
	"testing"
)

const memoReply = `{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"a","execution":{"taskSupport":"optional"}}]}}`

// memoed returns a memo holding memoReply answered with out (the reply with a marker added).
func memoed(t testing.TB) (*ReplyMemo, []byte) {
	var c ReplyMemo
	m, err := ParseChecked([]byte(memoReply))
	if err != nil {
		t.Fatal(err)
	}
	out := m.WithResult([]byte(`{"rewritten":true}`))
	c.Store(c.Gen(), "t", m, out)
	if c.Len() != 1 {
		t.Fatal("reply not remembered")
	}
	return &c, out
}

// FuzzReplyMemo holds the memo's fast path to the slow one: whenever Lookup answers a reply
// raw to request id q, raw is a well-formed response whose id Parse reads and SameID matches
// to q, and whose bytes are the remembered reply's but for that id; and the answer is the
// remembered answer with q as its id.
func FuzzReplyMemo(f *testing.F) {
	f.Add([]byte(memoReply), []byte(`7`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"x","result":{"tools":[{"name":"a","execution":{"taskSupport":"optional"}}]}}`), []byte(`"x"`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":0x10,"result":{"tools":[{"name":"a","execution":{"taskSupport":"optional"}}]}}`), []byte(`16`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":7.0,"result":{"tools":[{"name":"a","execution":{"taskSupport":"optional"}}]}}`), []byte(`7`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"\u0061","result":{"tools":[{"name":"a","execution":{"taskSupport":"optional"}}]}}`), []byte(`"a"`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"x":2,"result":{"tools":[{"name":"a","execution":{"taskSupport":"optional"}}]}}`), []byte(`1`))
	f.Fuzz(func(t *testing.T, raw, q []byte) {
		c, out := memoed(t)
		pre, post, ok := c.Lookup("t", raw, q)
		if !ok {
			return
		}
		m, err := ParseChecked(raw)
		if err != nil || m.Kind != KindResponse || !m.ValidJSON() || m.Error != nil {
			t.Fatalf("answered a reply that is not a well-formed result: %q", raw)
		}
		if !SameID(m.ID, q) {
			t.Fatalf("answered a reply for id %s to request %s", m.ID, q)
		}
		ref, _ := Parse([]byte(memoReply))
		if !bytes.Equal(raw[:m.id.start], ref.Raw[:ref.id.start]) || !bytes.Equal(raw[m.id.end:], ref.Raw[ref.id.end:]) {
			t.Fatalf("answered a reply that differs from the remembered one: %q", raw)
		}
		om, _ := Parse(out)
		want := om.WithID(json.RawMessage(q))
		if got := bytes.Join([][]byte{pre, q, post}, nil); !bytes.Equal(got, want) {
			t.Fatalf("answer %q, want %q", got, want)
		}
	})
}

func TestReplyMemoBounds(t *testing.T) {
	c, _ := memoed(t)
	// Another tag, or a generation taken before Invalidate, is never mixed in.
	if _, _, ok := c.Lookup("other", []byte(memoReply), []byte(`7`)); ok {
		t.Fatal("hit under another tag")
	}
	gen := c.Gen()
	c.Invalidate()
	if _, _, ok := c.Lookup("t", []byte(memoReply), []byte(`7`)); ok {
		t.Fatal("hit after Invalidate")
	}
	m, _ := ParseChecked([]byte(memoReply))
	c.Store(gen, "t", m, []byte(memoReply))
	if c.Len() != 0 {
		t.Fatal("a result computed before Invalidate was stored after it")
	}
	// At most memoEntries replies.
	for i := range memoEntries + 3 {
		m, _ := ParseChecked([]byte(`{"jsonrpc":"2.0","id":1,"result":{"n":` + string(rune('0'+i)) + `}}`))
		c.Store(c.Gen(), "t", m, m.Raw)
	}
	if c.Len() != memoEntries {
		t.Fatalf("%d replies remembered, bound %d", c.Len(), memoEntries)
	}
}

// BenchmarkReplyMemoLookup is what a repeated 1000-tool tools/list costs the relay once its
// reply is remembered: two byte comparisons and the id check, instead of a parse, a
// well-formedness scan and the rewrite.
func BenchmarkReplyMemoLookup(b *testing.B) {
	var sb bytes.Buffer
	sb.WriteString(`{"jsonrpc":"2.0","id":7,"result":{"tools":[`)
	for i := range 1000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"annotations":{"readOnlyHint":false,"destructiveHint":true,"idempotentHint":false,"openWorldHint":true},` +
			`"description":"Padding tool for the tools/list rewrite benchmark.","inputSchema":{"properties":{"limit":` +
			`{"description":"maximum results","type":"number"},"query":{"description":"what to look up","type":"string"}},` +
			`"required":["query"],"type":"object"},"name":"tool_` + string(rune('a'+i%26)) + `"}`)
	}
	sb.WriteString(`]}}`)
	raw := sb.Bytes()
	var c ReplyMemo
	m, err := ParseChecked(raw)
	if err != nil {
		b.Fatal(err)
	}
	c.Store(c.Gen(), "t", m, raw)
	next := bytes.Replace(raw, []byte(`"id":7`), []byte(`"id":8`), 1)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, ok := c.Lookup("t", next, []byte(`8`)); !ok {
			b.Fatal("miss")
		}
	}
}
