package gwtools

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// FuzzCall feeds arbitrary arguments to every tool: each call must give a JSON object result
// (or a JSON-RPC error) and never panic or block.
func FuzzCall(f *testing.F) {
	for _, seed := range []string{``, `null`, `{}`, `[]`, `"x"`, `{"task_id":"tg_wait"}`,
		`{"task_id":"tg_done","timeout_ms":0}`, `{"status":"working","limit":2}`, `{"timeout_ms":1e300}`,
		`{"timeout_ms":-0.5}`, `{"task_id":null}`, `{"include_finished":null}`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, args string) {
		_, _, _, g := setup()
		g.opts.MaxAwait = time.Millisecond
		for _, name := range g.Names() {
			raw, rpcErr := g.Call(context.Background(), alice, name, json.RawMessage(args))
			if rpcErr != nil {
				continue
			}
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(raw, &obj); err != nil {
				t.Fatalf("%s(%q): result %s is not an object: %v", name, args, raw, err)
			}
			if _, ok := obj["content"]; !ok {
				t.Fatalf("%s(%q): result without content: %s", name, args, raw)
			}
		}
	})
}
