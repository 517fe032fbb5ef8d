package intercept

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/tasks/store"
	"github.com/tollgate-mcp/tollgate/internal/tasks/store/storetest"
)

// TestUpstreamTaskBindingStoreFirst: two replicas share a Redis store. When the upstream
// hands an id that replica A bound to caller a to caller b through replica B, the store's
// first binding wins on B too: b does not reach a's upstream task through B (B's own table
// used to take b's binding and serve it), and a still does.
func TestUpstreamTaskBindingStoreFirst(t *testing.T) {
	url := storetest.RedisURL(t) // skips loudly without redis-server
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	replica := func() *gwHarness {
		st, err := store.OpenRedis(ctx, url+"?key_prefix=intercept-ut:")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		h := newHarness(t, unitConfig)
		h.modernUpstream()
		h.gw.d.UpstreamTasks = st
		return h
	}
	a, b := replica(), replica()
	created := func(h *gwHarness, cred string) {
		x := modernExchange(t, "tools/call", `{"name":"read_file","arguments":{}}`, tasksCaps, "Authorization", cred)
		applyTransform(t, h.routeModern(x).Forward, x, `{"jsonrpc":"2.0","id":7,"result":{"resultType":"task","taskId":"up-same","status":"working","createdAt":"x","lastUpdatedAt":"x","ttlMs":60000}}`)
	}
	get := func(h *gwHarness, cred string) Result {
		return h.routeModern(modernExchange(t, "tasks/get", `{"taskId":"up-same"}`, tasksCaps, "Authorization", cred))
	}
	created(a, "Bearer a")
	created(b, "Bearer b")
	if r := get(b, "Bearer b"); r.Forward != nil {
		t.Error("replica B bound the id to the second caller: the store's first binding lost")
	}
	for name, h := range map[string]*gwHarness{"A": a, "B": b} {
		if r := get(h, "Bearer a"); r.Forward == nil {
			t.Errorf("replica %s: the first creator does not reach its upstream task: %s", name, r.Reply)
		}
	}
}
