package mcpclient_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/mcpclient"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// rules: the demo's, with the hold budget under test.
func rules(budget string) string {
	return fmt.Sprintf(`governance:
  defaults: {action: forward}
  rules:
    - {match: "read_*", action: forward}
    - {match: "delete_*", action: approve}
    - {match: "drop_*", action: deny}
approval:
  default: {timeout: 10m, on_timeout: deny}
tasks: {sync_approval: hold, hold_budget: %s}
`, budget)
}

type decide struct {
	g    *testkit.Gateway
	verb string // approve or reject
	on   mcpclient.EventKind
	errs chan error
}

// events returns an Event handler that decides the task (through the admin API, in its own
// goroutine) when the event of kind d.on arrives, and records every event.
func (d *decide) events(seen *[]mcpclient.Event) func(mcpclient.Event) {
	done := false
	return func(e mcpclient.Event) {
		*seen = append(*seen, e)
		if e.Kind != d.on || done {
			return
		}
		done = true
		go func() {
			st, _, err := d.g.TryAdminRequest("POST", "/api/v1/approvals/"+e.TaskID+"/"+d.verb, testkit.AdminToken, `{"reason":"test"}`)
			if err == nil && st != http.StatusOK {
				err = fmt.Errorf("%s %s: HTTP %d", d.verb, e.TaskID, st)
			}
			d.errs <- err
		}()
	}
}

func text(t *testing.T, res json.RawMessage) string {
	t.Helper()
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(res, &r); err != nil || len(r.Content) == 0 || r.IsError {
		t.Fatalf("not a successful tool result: %s", res)
	}
	return r.Content[0].Text
}

// TestCall: forward, deny, hold → approve (announced at once, long before the hold budget
// ends), hold → reject, and task mode, against a real Tollgate in front of the demo, in both
// eras.
func TestCall(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	// The budget is far longer than the test may take: the held call must name its task
	// while it is still held (the progress notification), not when the budget runs out.
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, rules("10m")), nil, nil)
	g.WaitReady(t)
	for n, era := range []mcpclient.Era{mcpclient.Legacy, mcpclient.Modern} {
		t.Run(string(era), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			o := mcpclient.Options{URL: g.MCP, Era: era, MaxPoll: 20 * time.Millisecond}

			out, err := mcpclient.Call(ctx, o, "read_file", json.RawMessage(`{"path":"/etc/motd"}`), nil)
			if err != nil || out.Err != nil || !strings.Contains(text(t, out.Result), "Welcome") {
				t.Fatalf("forward: %v %+v", err, out)
			}

			out, err = mcpclient.Call(ctx, o, "drop_table", json.RawMessage(`{"table":"orders"}`), nil)
			if err != nil || out.Err == nil || out.Err.Code != -32003 || out.Err.Name() != "PolicyDenied" || out.Err.DataString("rule") != "drop_*" {
				t.Fatalf("deny: %v %+v", err, out)
			}

			for _, tc := range []struct {
				name string
				task bool
				verb string
				user string
			}{
				// The demo has u-001…u-004; each is deleted once.
				{"hold approve", false, "approve", fmt.Sprintf("u-00%d", 1+n)},
				{"hold reject", false, "reject", fmt.Sprintf("u-10%d", n)},
				{"task approve", true, "approve", fmt.Sprintf("u-00%d", 3+n)},
				{"task reject", true, "reject", fmt.Sprintf("u-20%d", n)},
			} {
				t.Run(tc.name, func(t *testing.T) {
					before := d.Calls("delete_user")
					dec := &decide{g: g, verb: tc.verb, on: mcpclient.Held, errs: make(chan error, 1)}
					var seen []mcpclient.Event
					o := o
					o.Task = tc.task
					out, err := mcpclient.Call(ctx, o, "delete_user", json.RawMessage(`{"user_id":"`+tc.user+`"}`), dec.events(&seen))
					if err != nil {
						t.Fatalf("call: %v (events %+v)", err, seen)
					}
					if err := <-dec.errs; err != nil {
						t.Fatal(err)
					}
					if len(seen) == 0 || seen[0].Kind != mcpclient.Held || !strings.HasPrefix(seen[0].TaskID, "tg_") || out.TaskID != seen[0].TaskID {
						t.Fatalf("events %+v, outcome task %q", seen, out.TaskID)
					}
					if !tc.task && seen[0].ConsoleURL != g.Admin+"/approvals" {
						t.Errorf("console URL %q", seen[0].ConsoleURL)
					}
					switch tc.verb {
					case "approve":
						if out.Err != nil || !strings.Contains(text(t, out.Result), tc.user) || d.Calls("delete_user") != before+1 {
							t.Fatalf("approved: %+v %s (calls %d)", out.Err, out.Result, d.Calls("delete_user")-before)
						}
					case "reject":
						if out.Err == nil || out.Err.Code != -32007 || d.Calls("delete_user") != before {
							t.Fatalf("rejected: %+v %s", out.Err, out.Result)
						}
					}
				})
			}
		})
	}
}

// TestCallAfterHoldBudget: undecided when the hold budget runs out, the client keeps waiting
// on the same task (2025-11-25: the same call again attaches to it; 2026-07-28: tasks/get, as
// an anonymous caller's retry would be a task of its own) and returns its one execution.
func TestCallAfterHoldBudget(t *testing.T) {
	d, upURL := testkit.StartDemo(t)
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, rules("50ms")), nil, nil)
	g.WaitReady(t)
	for i, era := range []mcpclient.Era{mcpclient.Legacy, mcpclient.Modern} {
		t.Run(string(era), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			before := d.Calls("delete_user")
			dec := &decide{g: g, verb: "approve", on: mcpclient.StillWaiting, errs: make(chan error, 1)}
			var seen []mcpclient.Event
			user := fmt.Sprintf("u-00%d", i+1)
			o := mcpclient.Options{URL: g.MCP, Era: era, MaxPoll: 20 * time.Millisecond}
			out, err := mcpclient.Call(ctx, o, "delete_user", json.RawMessage(`{"user_id":"`+user+`"}`), dec.events(&seen))
			if err != nil {
				t.Fatalf("call: %v (events %+v)", err, seen)
			}
			if err := <-dec.errs; err != nil {
				t.Fatal(err)
			}
			if out.Err != nil || !strings.Contains(text(t, out.Result), user) || d.Calls("delete_user") != before+1 {
				t.Fatalf("outcome %+v %s, calls %d", out.Err, out.Result, d.Calls("delete_user")-before)
			}
			ids := map[string]bool{}
			for _, e := range seen {
				if e.TaskID != "" {
					ids[e.TaskID] = true
				}
			}
			if len(ids) != 1 || !ids[out.TaskID] {
				t.Fatalf("more than one task, or another one's outcome: %+v, outcome %s", seen, out.TaskID)
			}
			if n := pending(t, g); n != 0 {
				t.Fatalf("%d approvals left pending (a retry made a second one)", n)
			}
		})
	}
}

func pending(t *testing.T, g *testkit.Gateway) int {
	t.Helper()
	st, m := g.AdminRequest(t, "GET", "/api/v1/approvals", testkit.AdminToken, "")
	if st != http.StatusOK {
		t.Fatalf("approvals: HTTP %d", st)
	}
	items, _ := m["approvals"].([]any)
	return len(items)
}

// TestCallErrors: what is not an answer is an error, not an outcome.
func TestCallErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := mcpclient.Call(ctx, mcpclient.Options{URL: "http://127.0.0.1:1/mcp"}, "x", nil, nil); err == nil {
		t.Error("no server: no error")
	}
	if _, err := mcpclient.Call(ctx, mcpclient.Options{URL: "http://127.0.0.1:1/mcp", Era: "2024"}, "x", nil, nil); err == nil || !strings.Contains(err.Error(), "era") {
		t.Errorf("bad era: %v", err)
	}
}
