package upstream

import (
	"fmt"
	"strings"
	"testing"
)

// benchList is a 1000-tool tools/list reply shaped like mcp-go's (≈ 400 KB).
func benchList(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"jsonrpc":"2.0","id":7,"result":{"tools":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"annotations":{"readOnlyHint":false,"destructiveHint":true,"idempotentHint":false,"openWorldHint":true},`+
			`"description":"Padding tool tool_%04d for the tools/list rewrite benchmark.",`+
			`"inputSchema":{"properties":{"limit":{"description":"maximum results","type":"number"},`+
			`"query":{"description":"what to look up","type":"string"}},"required":["query"],"type":"object"},"name":"tool_%04d"}`, i, i)
	}
	b.WriteString(`]}}`)
	return []byte(b.String())
}

// BenchmarkParseReply is the relay's check of every forwarded reply: envelope, id, and that
// the whole message is well-formed JSON.
func BenchmarkParseReply(b *testing.B) {
	for _, bm := range []struct {
		name string
		msg  []byte
	}{
		{"tools_list_1000", benchList(1000)},
		{"text_result_1MiB", []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + strings.Repeat("0123456789abcdef", 1<<16) + `"}]}}`)},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.SetBytes(int64(len(bm.msg)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseReply(bm.msg, []byte(`7`)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
