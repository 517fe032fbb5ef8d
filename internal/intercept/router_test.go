package intercept

import (
	"context"
	"testing"
)

// TestRouteTransport: the router, not the proxy, knows which methods may be resent, may block
// upstream, open a session, or are bounded by which setting.
func TestRouteTransport(t *testing.T) {
	tests := []struct {
		msg                               string
		replayable, noHeaderTimeout, open bool
		setting                           string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, true, false, false, "server.request_timeout"},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, false, false, false, "TOLLGATE_SYNC_FORWARD_TIMEOUT_SECS"},
		{`{"jsonrpc":"2.0","id":1,"method":"tasks/result","params":{"taskId":"up-1"}}`, true, true, false, "server.request_timeout"},
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, true, false, true, "server.request_timeout"},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, true, true, false, "server.request_timeout"},
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, true, true, false, "server.request_timeout"},
	}
	var nilRouter *Router // pure passthrough
	for _, tc := range tests {
		t.Run(tc.msg, func(t *testing.T) {
			res := nilRouter.Route(context.Background(), exchange(t, nil, tc.msg))
			f := res.Forward
			if f == nil {
				t.Fatalf("not forwarded: %+v", res)
			}
			if f.Replayable != tc.replayable || f.NoHeaderTimeout != tc.noHeaderTimeout || f.AdoptSession != tc.open || f.TimeoutSetting != tc.setting {
				t.Errorf("Forward = replayable %v, no header timeout %v, adopt %v, setting %q; want %v %v %v %q",
					f.Replayable, f.NoHeaderTimeout, f.AdoptSession, f.TimeoutSetting, tc.replayable, tc.noHeaderTimeout, tc.open, tc.setting)
			}
			if f == Passthrough.Forward {
				t.Error("Route returned the shared Passthrough forward itself")
			}
		})
	}
}
