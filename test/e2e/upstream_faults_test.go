package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// faultSecret is text a misbehaving upstream sends in its error pages; it must never reach the
// client (it stands for a stack trace or internal detail).
const faultSecret = "internal-stack-trace-7f3a"

// upstreamFault is how the raw upstream answers one request; id is the request's raw id.
type upstreamFault func(w http.ResponseWriter, id json.RawMessage)

func replyJSON(status int, body string) upstreamFault {
	return func(w http.ResponseWriter, id json.RawMessage) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprint(w, strings.ReplaceAll(body, "ID", string(id)))
	}
}

func replyPlain(status int, ctype, body string) upstreamFault {
	return func(w http.ResponseWriter, _ json.RawMessage) {
		if ctype != "" {
			w.Header().Set("Content-Type", ctype)
		}
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}
}

// replySSE writes the events (ID replaced by the request id) and ends the stream.
func replySSE(events string) upstreamFault {
	return func(w http.ResponseWriter, id json.RawMessage) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, strings.ReplaceAll(events, "ID", string(id)))
	}
}

const progressEvent = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n"

// faultCase is one upstream misbehaviour and what the client must get instead.
type faultCase struct {
	name   string
	answer upstreamFault
	// For a fault: the HTTP status and data.error of Tollgate's JSON-RPC error. For a
	// well-formed reply (wantName ""): the client gets the upstream's bytes, its id restored.
	wantStatus int
	wantName   string
	sse        bool   // the answer is an event stream
	passBody   string // for well-formed replies: the exact response message expected (ID = client id)
	header     string // a response header that must reach the client ("Name: value")
}

var faultCases = []faultCase{
	{name: "http500_text", answer: replyPlain(500, "text/plain", "panic: "+faultSecret), wantStatus: 200, wantName: "UpstreamHTTPError"},
	{name: "http502_html", answer: replyPlain(502, "text/html", "<html>"+faultSecret+"</html>"), wantStatus: 200, wantName: "UpstreamHTTPError"},
	{name: "http404_text", answer: replyPlain(404, "text/plain", "no such session "+faultSecret), wantStatus: 404, wantName: "UpstreamHTTPError"},
	{name: "http401_challenge", answer: func(w http.ResponseWriter, _ json.RawMessage) {
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="https://up.example/.well-known/oauth-protected-resource"`)
		w.WriteHeader(401)
		fmt.Fprint(w, faultSecret)
	}, wantStatus: 401, wantName: "UpstreamHTTPError", header: `Www-Authenticate: Bearer resource_metadata="https://up.example/.well-known/oauth-protected-resource"`},
	{name: "http200_garbage", answer: replyPlain(200, "application/json", "<html>"+faultSecret+"</html>"), wantStatus: 200, wantName: "UpstreamInvalidReply"},
	{name: "http200_text", answer: replyPlain(200, "text/plain", faultSecret), wantStatus: 200, wantName: "UpstreamInvalidReply"},
	{name: "http200_empty", answer: replyPlain(200, "application/json", ""), wantStatus: 200, wantName: "UpstreamInvalidReply"},
	{name: "http202_to_request", answer: replyPlain(202, "", ""), wantStatus: 200, wantName: "UpstreamInvalidReply"},
	{name: "json_truncated", answer: replyJSON(200, `{"jsonrpc":"2.0","id":ID,"result":{"content":[{"type":"text","text":"`+faultSecret), wantStatus: 200, wantName: "UpstreamInvalidReply"},
	{name: "json_inner_garbage", answer: replyJSON(200, `{"jsonrpc":"2.0","id":ID,"result":{"content":[{"type":"text","text":tru}]}}`), wantStatus: 200, wantName: "UpstreamInvalidReply"},
	{name: "json_not_a_response", answer: replyJSON(200, `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"`+faultSecret+`"}}`), wantStatus: 200, wantName: "UpstreamInvalidReply"},
	{name: "error_string", answer: replyJSON(200, `{"jsonrpc":"2.0","id":ID,"error":"`+faultSecret+`"}`), wantStatus: 200, wantName: "UpstreamInvalidReply"},
	{name: "error_without_code", answer: replyJSON(200, `{"jsonrpc":"2.0","id":ID,"error":{"message":"`+faultSecret+`"}}`), wantStatus: 200, wantName: "UpstreamInvalidReply"},
	{name: "error_code_string", answer: replyJSON(200, `{"jsonrpc":"2.0","id":ID,"error":{"code":"-32000","message":"`+faultSecret+`"}}`), wantStatus: 200, wantName: "UpstreamInvalidReply"},
	{name: "error_code_fraction", answer: replyJSON(200, `{"jsonrpc":"2.0","id":ID,"error":{"code":-32000.5,"message":"`+faultSecret+`"}}`), wantStatus: 200, wantName: "UpstreamInvalidReply"},
	{name: "error_and_result", answer: replyJSON(200, `{"jsonrpc":"2.0","id":ID,"result":{},"error":{"code":-1,"message":"`+faultSecret+`"}}`), wantStatus: 200, wantName: "UpstreamInvalidReply"},
	{name: "wrong_id", answer: replyJSON(200, `{"jsonrpc":"2.0","id":"someone-else","result":{"content":[{"type":"text","text":"`+faultSecret+`"}]}}`), wantStatus: 200, wantName: "UpstreamInvalidReply"},
	{name: "wrong_id_type", answer: replyJSON(200, `{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`), wantStatus: 200, wantName: "UpstreamInvalidReply"},
	{name: "null_id_result", answer: replyJSON(200, `{"jsonrpc":"2.0","id":null,"result":{"content":[]}}`), wantStatus: 200, wantName: "UpstreamInvalidReply"},
	{name: "sse_truncated", answer: replySSE(progressEvent), sse: true, wantStatus: 200, wantName: "UpstreamStreamEnded"},
	{name: "sse_cut_mid_event", answer: replySSE(progressEvent + `data: {"jsonrpc":"2.0","id":ID,"result":{"content":[`), sse: true, wantStatus: 200, wantName: "UpstreamStreamEnded"},
	{name: "sse_wrong_id", answer: replySSE(progressEvent + "data: {\"jsonrpc\":\"2.0\",\"id\":\"other\",\"result\":{}}\n\n"), sse: true, wantStatus: 200, wantName: "UpstreamInvalidReply"},
	{name: "sse_malformed_error", answer: replySSE(progressEvent + "data: {\"jsonrpc\":\"2.0\",\"id\":ID,\"error\":{\"code\":-1}}\n\n"), sse: true, wantStatus: 200, wantName: "UpstreamInvalidReply"},
	{name: "sse_inner_garbage", answer: replySSE(progressEvent + "data: {\"jsonrpc\":\"2.0\",\"id\":ID,\"result\":{\"x\":tru}}\n\n"), sse: true, wantStatus: 200, wantName: "UpstreamInvalidReply"},
	{name: "sse_http500", answer: func(w http.ResponseWriter, _ json.RawMessage) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(500)
		fmt.Fprint(w, "data: "+faultSecret+"\n\n")
	}, wantStatus: 200, wantName: "UpstreamHTTPError"},

	// Well-formed replies pass untouched (only the id goes back to the client's bytes).
	{name: "valid_error", answer: replyJSON(200, `{"jsonrpc":"2.0","id":ID,"error":{"code":-32602,"message":"bad arg","data":"free-form"}}`),
		wantStatus: 200, passBody: `{"jsonrpc":"2.0","id":ID,"error":{"code":-32602,"message":"bad arg","data":"free-form"}}`},
	{name: "valid_error_http500", answer: replyJSON(500, `{"jsonrpc":"2.0","id":ID,"error":{"code":-32603,"message":"tool crashed","data":{"k":[1]}}}`),
		wantStatus: 500, passBody: `{"jsonrpc":"2.0","id":ID,"error":{"code":-32603,"message":"tool crashed","data":{"k":[1]}}}`},
	{name: "valid_error_null_id", answer: replyJSON(200, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`),
		wantStatus: 200, passBody: `{"jsonrpc":"2.0","id":ID,"error":{"code":-32700,"message":"Parse error"}}`},
	{name: "valid_result_reencoded_id", answer: replyJSON(200, `{"jsonrpc":"2.0","id":"fault-1","result":{"content":[],"x-extra":1.50}}`),
		wantStatus: 200, passBody: `{"jsonrpc":"2.0","id":ID,"result":{"content":[],"x-extra":1.50}}`},
	{name: "sse_valid_error", answer: replySSE(progressEvent + "data: {\"jsonrpc\":\"2.0\",\"id\":ID,\"error\":{\"code\":-32602,\"message\":\"nope\"}}\n\n"), sse: true,
		wantStatus: 200, passBody: `{"jsonrpc":"2.0","id":ID,"error":{"code":-32602,"message":"nope"}}`},
	// SEP-1699 (spec 2025-11-25): after an event id the server may close the stream before its
	// answer; the client resumes with Last-Event-ID, so Tollgate must not invent an error.
	{name: "sse_resumable_close", answer: replySSE("id: ev-1\ndata: \n\n"), sse: true, wantStatus: 200},
}

// faultUpstream answers initialize and tools/list normally and every other request with the
// fault its tool name (tools/call) or resource uri (resources/read) names.
func faultUpstream(t *testing.T) *testkit.RawUpstream {
	byName := map[string]upstreamFault{}
	var tools []string
	for _, fc := range faultCases {
		byName[fc.name] = fc.answer
		tools = append(tools, `{"name":"`+fc.name+`","inputSchema":{"type":"object"}}`)
	}
	return testkit.NewRawUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
				URI  string `json:"uri"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &m)
		switch {
		case r.Method != http.MethodPost:
			w.WriteHeader(http.StatusMethodNotAllowed)
		case handshake(w, body):
		case m.Method == "tools/list":
			replyJSON(200, `{"jsonrpc":"2.0","id":ID,"result":{"tools":[`+strings.Join(tools, ",")+`]}}`)(w, m.ID)
		case m.Method == "tools/call" && byName[m.Params.Name] != nil:
			byName[m.Params.Name](w, m.ID)
		case m.Method == "resources/read" && byName[strings.TrimPrefix(m.Params.URI, "fault://")] != nil:
			byName[strings.TrimPrefix(m.Params.URI, "fault://")](w, m.ID)
		case strings.HasPrefix(m.Method, "notifications/"):
			replyPlain(500, "text/plain", faultSecret)(w, nil)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	})
}

// TestUpstreamFaults: every way an upstream can answer a forwarded request badly becomes a
// JSON-RPC error for that request (client id byte for byte, data.error, correlation_id), and
// well-formed replies, errors included, pass untouched. Each path that forwards runs the table:
// a plain request (resources/read), a plain tools/call (sync forward timeout), and a tools/call
// that could be promoted to a task (tasks.promote_after).
func TestUpstreamFaults(t *testing.T) {
	up := faultUpstream(t)
	plain := testkit.StartGateway(t, testkit.BasicConfig(up.URL(), ""), nil, nil)
	promotable := testkit.StartGateway(t, testkit.BasicConfig(up.URL(), "tasks:\n  promote_after: 1h\n"), nil, nil)
	plain.WaitReady(t)
	promotable.WaitReady(t)
	const clientID = `"f\u0061ult-1"` // decodes to "fault-1"; must come back in exactly these bytes
	paths := []struct {
		name string
		g    *testkit.Gateway
		body func(fault string) string
	}{
		{"resources_read", plain, func(f string) string {
			return `{"jsonrpc":"2.0","id":` + clientID + `,"method":"resources/read","params":{"uri":"fault://` + f + `"}}`
		}},
		{"tools_call", plain, func(f string) string {
			return `{"jsonrpc":"2.0","id":` + clientID + `,"method":"tools/call","params":{"name":"` + f + `","arguments":{}}}`
		}},
		{"tools_call_promotable", promotable, func(f string) string {
			return `{"jsonrpc":"2.0","id":` + clientID + `,"method":"tools/call","params":{"name":"` + f + `","arguments":{}}}`
		}},
	}
	for _, p := range paths {
		c := p.g.NewClient(t)
		for _, fc := range faultCases {
			t.Run(p.name+"/"+fc.name, func(t *testing.T) {
				r := c.Post(p.body(fc.name))
				if r.Status != fc.wantStatus {
					t.Errorf("HTTP status %d, want %d\n%s", r.Status, fc.wantStatus, r.Body)
				}
				if bytes.Contains(r.Body, []byte(faultSecret)) {
					t.Errorf("the upstream's fault text reached the client:\n%s", r.Body)
				}
				if isSSE := strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream"); isSSE != fc.sse {
					t.Errorf("Content-Type %q, want an event stream: %v", r.Header.Get("Content-Type"), fc.sse)
				}
				if fc.sse && !bytes.Contains(r.Body, []byte(`"method":"notifications/progress"`)) && fc.name != "sse_resumable_close" {
					t.Errorf("events before the fault were not relayed:\n%s", r.Body)
				}
				if fc.header != "" {
					k, v, _ := strings.Cut(fc.header, ": ")
					if r.Header.Get(k) != v {
						t.Errorf("header %s = %q, want %q", k, r.Header.Get(k), v)
					}
				}
				switch {
				case fc.wantName != "":
					msg := r.ResponseBytes(t)
					if !bytes.Contains(msg, []byte(`"id":`+clientID+`,`)) {
						t.Errorf("reply does not carry the client's id %s byte for byte: %s", clientID, msg)
					}
					m := r.Message(t)
					code, name := testkit.ErrorOf(m)
					if code != -32000 || name != fc.wantName {
						t.Errorf("error %v %q, want -32000 %q: %s", code, name, fc.wantName, msg)
					}
					corr, _ := testkit.Dig(m, "error", "data", "correlation_id").(string)
					if corr == "" || corr != r.Header.Get("X-Request-Id") {
						t.Errorf("correlation_id %q, X-Request-Id %q", corr, r.Header.Get("X-Request-Id"))
					}
					if fc.wantName == "UpstreamHTTPError" && testkit.Dig(m, "error", "data", "status") == nil {
						t.Errorf("data.status missing: %s", msg)
					}
				case fc.passBody != "":
					want := strings.ReplaceAll(fc.passBody, "ID", clientID)
					if got := string(r.ResponseBytes(t)); got != want {
						t.Errorf("well-formed reply changed:\n got %s\nwant %s", got, want)
					}
				default: // a resumable stream closed early: relayed as is, nothing invented
					if bytes.Contains(r.Body, []byte(`"error"`)) || !bytes.Contains(r.Body, []byte("id: ev-1")) {
						t.Errorf("resumable stream not relayed as it was:\n%s", r.Body)
					}
				}
			})
			if fc.wantStatus == http.StatusNotFound {
				// spec 2025-11-25 transports: a 404 ends the session, and Tollgate forgets it;
				// the client starts a new one.
				c = p.g.NewClient(t)
			}
		}
	}

	// A notification has no id to answer; an upstream 5xx for it is a 502 with a JSON-RPC error
	// (null id), never the upstream's page.
	c := plain.NewClient(t)
	r := c.Post(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	if r.Status != http.StatusBadGateway || bytes.Contains(r.Body, []byte(faultSecret)) {
		t.Fatalf("notification answered by a failing upstream: HTTP %d %s", r.Status, r.Body)
	}
	if _, name := testkit.ErrorOf(r.Message(t)); name != "UpstreamHTTPError" {
		t.Errorf("notification fault: %s", r.Body)
	}
}

// TestPromotedCallUpstreamFault: a tools/call promoted to a task whose upstream then answers
// garbage fails the task with a JSON-RPC error instead of storing the garbage as its result.
func TestPromotedCallUpstreamFault(t *testing.T) {
	release := make(chan struct{})
	up := toolUpstream(t, "slow_garbage", func(w http.ResponseWriter, r *http.Request, id json.RawMessage) {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		replyJSON(200, `{"jsonrpc":"2.0","id":"not-yours","result":{"content":[]}}`)(w, id)
	})
	g := testkit.StartGateway(t, testkit.BasicConfig(up.URL(), "tasks:\n  promote_after: 100ms\n"), nil, nil)
	g.WaitReady(t)
	c := g.NewClient(t)
	tid := promotedCall(t, c, 1, "slow_garbage")
	close(release)
	res := c.Call(2, "tollgate_get_task_result", map[string]any{"task_id": tid, "timeout_ms": 10000}, 0)
	out, _ := json.Marshal(res)
	if !strings.Contains(string(out), "UpstreamInvalidReply") {
		t.Fatalf("promoted task's result after a wrong-id reply: %s", out)
	}
}

// toolUpstream is a raw upstream with one tool whose calls onCall answers; it performs the
// handshake, lists the tool and accepts every other message.
func toolUpstream(t *testing.T, tool string, onCall func(w http.ResponseWriter, r *http.Request, id json.RawMessage)) *testkit.RawUpstream {
	return testkit.NewRawUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		switch {
		case handshake(w, body):
		case m.Method == "tools/list":
			replyJSON(200, `{"jsonrpc":"2.0","id":ID,"result":{"tools":[{"name":"`+tool+`","inputSchema":{"type":"object"}}]}}`)(w, m.ID)
		case m.Method == "tools/call":
			onCall(w, r, m.ID)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	})
}

// promotedCall makes a plain call that tasks.promote_after turns into a task; it returns the
// task id the answer names.
func promotedCall(t *testing.T, c *testkit.RPC, id int, tool string) string {
	t.Helper()
	text, _ := json.Marshal(c.Call(id, tool, map[string]any{}, 0))
	tid := taskIDRe.FindString(string(text))
	if tid == "" {
		t.Fatalf("call was not promoted: %s", text)
	}
	return tid
}
