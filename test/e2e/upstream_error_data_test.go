package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// TestTaskRelaysUpstreamErrorData: a well-formed JSON-RPC error whose data is not an object
// (JSON-RPC 2.0 §5.1 allows any value) ends a task as the upstream sent it — code, message
// and data unchanged — both for a task Tollgate executes itself and for a promoted slow call.
// It used to become -32603 UpstreamError carrying the raw error text.
func TestTaskRelaysUpstreamErrorData(t *testing.T) {
	release := make(chan struct{})
	datas := map[string]string{
		"quota_string": `"quota exhausted for <tenant> & co"`,
		"quota_number": `42`,
		"quota_array":  `["a",{"b":1}]`,
		"slow_string":  `"slow tool gave up"`,
	}
	up := testkit.NewRawUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &m)
		w.Header().Set("Content-Type", "application/json")
		switch m.Method {
		case "initialize":
			w.Header().Set("Mcp-Session-Id", "raw-errdata")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"0"}}}`, m.ID)
		case "tools/list":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"quota_string","inputSchema":{"type":"object"}},{"name":"quota_number","inputSchema":{"type":"object"}},{"name":"quota_array","inputSchema":{"type":"object"}},{"name":"slow_string","inputSchema":{"type":"object"}}]}}`, m.ID)
		case "tools/call":
			if m.Params.Name == "slow_string" {
				select { // answered once the call was promoted
				case <-release:
				case <-r.Context().Done():
					return
				}
			}
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32050,"message":"tool refused","data":%s}}`, m.ID, datas[m.Params.Name])
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	})
	g := testkit.StartGateway(t, testkit.BasicConfig(up.URL(), `governance:
  defaults: {action: forward}
  rules:
    - {match: "quota_*", action: approve}
approval:
  default: {timeout: 10m, on_timeout: deny}
approvers:
  - {name: alice, token_env: ALICE_TOKEN}
tasks:
  promote_after: 150ms
`), approverEnv, nil)
	g.WaitReady(t)
	c := g.NewClient(t)
	c.Initialize()

	wantError := func(t *testing.T, tid, tool string) {
		t.Helper()
		m := c.TaskRPC(90, "tasks/result", tid).Message(t)
		e, _ := m["error"].(map[string]any)
		got, _ := json.Marshal(e["data"])
		var want any
		_ = json.Unmarshal([]byte(datas[tool]), &want)
		wantB, _ := json.Marshal(want)
		if e["code"] != float64(-32050) || e["message"] != "tool refused" || string(got) != string(wantB) {
			t.Fatalf("tasks/result of %s: %v, want code -32050, message \"tool refused\", data %s", tool, m, datas[tool])
		}
	}
	// An approved task-augmented call: Tollgate executes it once approved.
	for i, tool := range []string{"quota_string", "quota_number", "quota_array"} {
		t.Run(tool, func(t *testing.T) {
			tid := c.CallTask(10+i, tool, `{}`)
			decide(t, g, tid, "approve")
			wantError(t, tid, tool)
		})
	}
	t.Run("promoted", func(t *testing.T) {
		tid := promotedCall(t, c, 20, "slow_string")
		close(release)
		wantError(t, tid, "slow_string")
	})
}
