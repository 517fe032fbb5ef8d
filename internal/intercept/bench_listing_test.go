package intercept

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/governance"
	"github.com/tollgate-mcp/tollgate/internal/identity"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
)

// benchConfig is the load harness's governance without Cedar: forward by default, a few rules
// that the 1000 listed tools do not match, so every tool goes through the whole rule list.
const benchConfig = `schema: 1
sources:
  - {id: upstream, kind: mcp, url: "http://127.0.0.1:1/mcp"}
governance:
  defaults: {action: forward}
  rules:
    - {match: "approve_*", action: approve}
    - {match: "drop_*", action: deny}
    - {match: "{delete,remove}_*", action: approve}
`

// toolsListResponse is a tools/list response shaped like mcp-go's, with n tools.
func toolsListResponse(n int) []byte {
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

func benchGateway(b *testing.B) *Gateway {
	b.Helper()
	cfg, err := config.Parse([]byte(benchConfig), "bench.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	snap, err := governance.Build(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	var h governance.Holder
	h.Store(snap)
	return NewGateway(Deps{Snapshots: &h})
}

// BenchmarkToolsListRewrite measures what Tollgate adds to a tools/list reply: the transform
// the proxy runs on the upstream's response (annotate every tool, re-encode the envelope).
func BenchmarkToolsListRewrite(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("tools_%d", n), func(b *testing.B) {
			g := benchGateway(b)
			raw := toolsListResponse(n)
			tr := g.toolsList(context.Background(), &Exchange{}).Forward.Transform
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				// The proxy parses the reply envelope anyway; it is part of the cost here.
				m, err := jsonrpc.Parse(raw)
				if err != nil {
					b.Fatal(err)
				}
				if out := tr(&Exchange{}, m); out == nil {
					b.Fatal("reply not rewritten")
				}
			}
		})
	}
}

// BenchmarkRewriteTools isolates the per-tool loop (no envelope parse or replace).
func BenchmarkRewriteTools(b *testing.B) {
	g := benchGateway(b)
	m, err := jsonrpc.Parse(toolsListResponse(1000))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(m.Result)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.rewriteTools(m.Result, true, listView{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRewriteToolsCedarView measures a per-caller listing of 1000 tools that Cedar
// decides, remembered listings forgotten before each (the cost of a view's first listing):
// every tool's forbids partially evaluated for the caller (testdata/contractors.cedar).
func BenchmarkRewriteToolsCedarView(b *testing.B) {
	cfg, err := config.Parse([]byte(`schema: 1
server:
  caller_auth: {type: jwt, issuer: "https://issuer.example"}
sources:
  - {id: upstream, kind: mcp, url: "http://127.0.0.1:1/mcp"}
governance:
  rules:
    - {match: "*", action: policy, policy_id: all}
cedar: {policies: [contractors.cedar]}
`), "testdata/bench.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		b.Fatal(err)
	}
	snap, err := governance.Build(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	var h governance.Holder
	h.Store(snap)
	g := NewGateway(Deps{Snapshots: &h})
	m, err := jsonrpc.Parse(toolsListResponse(1000))
	if err != nil {
		b.Fatal(err)
	}
	x := &Exchange{Subject: "carl", Caller: &identity.Caller{Subject: "carl", Groups: []string{"contractors"}, Verified: true}}
	lv := g.listView(x)
	if lv.cedar == [16]byte{} {
		b.Fatal("no Cedar view")
	}
	// "shared" is the same first listing without a principal (no Cedar hiding), for comparison.
	for name, v := range map[string]listView{"principal": lv, "shared": {}} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				g.forgetLists()
				if _, err := g.rewriteTools(m.Result, true, v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
