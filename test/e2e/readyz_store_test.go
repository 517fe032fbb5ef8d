package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/tasks/store/storetest"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// TestReadyzTaskStore: /readyz tells the truth about a Redis task store. With a real
// redis-server stopped, it stays 200 (forwarded calls still work) but says the store does not
// answer; with Redis started again without persistence, it says the store came back without
// its data and the log has an ERROR line. Fails on main: /readyz said "ready" throughout.
func TestReadyzTaskStore(t *testing.T) {
	rs := storetest.StartRedis(t)
	_, up := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(up, approvalRules+"tasks:\n  store: {type: redis, url: \""+rs.URL()+"?key_prefix=readyz:\"}\n"), approverEnv, nil)
	g.WaitReady(t)
	readyz := func() (int, string) {
		resp, err := testkit.HTTPClient.Get(g.Admin + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := readyz(); code != http.StatusOK || strings.Contains(body, "task store") {
		t.Fatalf("before the outage: %d %q", code, body)
	}
	// A held call's task is in the store: the restart below loses it.
	c := g.NewClient(t)
	c.CallTask(1, "delete_user", `{"user_id":"u-1"}`)

	rs.Stop()
	var body string
	waitForLong(t, "/readyz to report the store down", func() bool {
		var code int
		code, body = readyz()
		if code != http.StatusOK {
			t.Fatalf("/readyz %d with only the task store down (forwarded calls work): %q", code, body)
		}
		return strings.Contains(body, "degraded: task store: not answering")
	})
	if !strings.Contains(body, "approvals cannot be created or decided") {
		t.Errorf("/readyz does not say what the outage stops: %q", body)
	}

	rs.Start() // empty: no persistence
	waitForLong(t, "/readyz to report the store's data lost", func() bool {
		_, body = readyz()
		return strings.Contains(body, "degraded: task store: came back without its data")
	})
	if strings.Contains(body, "not answering") {
		t.Errorf("/readyz still says the store does not answer: %q", body)
	}
	if !strings.Contains(g.Logs.String(), `"level":"ERROR","msg":"TASK STORE LOST ITS DATA`) {
		t.Errorf("no ERROR line for the lost data in the log")
	}
}

// waitForLong is waitFor for conditions the background store probe (every 5 s) decides.
func waitForLong(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}
