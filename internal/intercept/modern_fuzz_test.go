package intercept

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
)

// FuzzModernRewrites: every byte edit of the 2026-07-28 paths (bridging a body either way,
// stamping subscription ids, merging an acknowledgement, adding resultType and cache hints)
// yields a message that still parses, with the request's id and method unchanged.
func FuzzModernRewrites(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":1}}}`)
	f.Add(`{"jsonrpc":"2.0","id":"a","method":"tools/list"}`)
	f.Add(`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"taskIds":["u"]}}}`)
	f.Add(`{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"=?base64?eA==?=","_meta":null}}`)
	f.Fuzz(func(t *testing.T, body string) {
		m, err := jsonrpc.Parse([]byte(body))
		if err != nil {
			return
		}
		check := func(what string, out []byte) {
			o, err := jsonrpc.Parse(out)
			if err != nil {
				t.Fatalf("%s of %s: %v\n%s", what, body, err, out)
			}
			if o.Method != m.Method || !bytes.Equal(o.ID, m.ID) {
				t.Fatalf("%s changed id or method: %s → %s", what, body, out)
			}
		}
		if m.Kind == jsonrpc.KindRequest {
			check("legacyBody", legacyBody(m))
			if out, _, err := modernBody(m, nil); err == nil {
				check("modernBody", out)
			}
		}
		if m.Kind == jsonrpc.KindNotification && json.Valid(m.Params) {
			check("mergeAck", mergeAck(m, &listener{tools: true, tasks: map[string]bool{"tg_1": true}}))
		}
		if p := m.Params; len(p) > 0 && p[0] == '{' && json.Valid(p) { // modern params were checked strictly (era.Classify)
			for _, out := range [][]byte{withSubscription(p, json.RawMessage(`7`)), withResultType(p), withCacheHints(p, "private")} {
				if !json.Valid(out) {
					t.Fatalf("object edit of %s is not JSON: %s", p, out)
				}
			}
		}
	})
}
