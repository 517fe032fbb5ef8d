package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/mcpclient"
)

// hostileServer is an MCP endpoint (2025-11-25) whose answers to tools/call carry terminal
// escapes, a carriage return and bidirectional controls: result holds the tools/call result,
// or rpcErr the error.
func hostileServer(t *testing.T, result, rpcErr string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		if m.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Mcp-Session-Id", "s1")
		switch {
		case m.Method == "initialize":
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"x","version":"1"}}}`)
		case rpcErr != "":
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"error":`+rpcErr+`}`)
		default:
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":`+result+`}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// TestCallQuotesServerControls: what `tollgate call` prints from the server reaches the
// terminal with its control characters quoted (as `tollgate approvals` does): no ESC, no C1
// CSI, no carriage return, no bidirectional override; a tool's newlines and tabs are kept, and
// --json output keeps its meaning with the controls escaped.
func TestCallQuotesServerControls(t *testing.T) {
	const evil = `\u001b]52;c;cHduZWQ=\u0007\u001b[2J\u009b31mred\r\u202eevil`
	// JSON may also carry DEL, C1 controls and bidirectional controls raw inside a string.
	const raw = "\u009b31mred\x7f\u202eevil"
	tests := []struct {
		name, result, rpcErr string
		args                 []string
		want                 string // must appear, quoted
	}{
		{"text", `{"content":[{"type":"text","text":"line1\n\tline2 ` + evil + `"}]}`, "", nil, `line1` + "\n\t" + `line2 \x1b]52;c;cHduZWQ=\x07\x1b[2J\u009b31mred\x0d\u202eevil`},
		{"tool error", `{"content":[{"type":"text","text":"` + evil + `"}],"isError":true}`, "", nil, `\x1b]52`},
		{"structured", `{"content":[],"structuredContent":{"k":"` + raw + `"}}`, "", nil, `\u009b31mred\x7f\u202eevil`},
		{"content type", `{"content":[{"type":"` + evil + `"}]}`, "", nil, `[\x1b]52`},
		{"rpc error", "", `{"code":-32000,"message":"` + evil + `","data":{"error":"` + evil + `"}}`, nil, `\x1b[2J`},
		{"denied", "", `{"code":-32003,"message":"PolicyDenied: ` + evil + `","data":{"error":"PolicyDenied","rule":"` + evil + `"}}`, nil, `\u202eevil`},
		{"json", `{"content":[{"type":"text","text":"` + evil + raw + `"}]}`, "", []string{"--json"}, `\u009b31mred\u007f\u202eevil`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := hostileServer(t, tt.result, tt.rpcErr)
			var stdout, stderr bytes.Buffer
			cmdCall(context.Background(), append([]string{"read_x", "--url", url}, tt.args...), &stdout, &stderr)
			out := stdout.String() + stderr.String()
			for _, bad := range []string{"\x1b", "\x07", "\u009b", "\r", "\u202e", "\x7f"} {
				if strings.Contains(out, bad) {
					t.Errorf("output holds %q raw:\n%s", bad, out)
				}
			}
			if !strings.Contains(out, tt.want) {
				t.Errorf("output lacks %q:\n%s", tt.want, out)
			}
			if tt.name == "json" {
				var v map[string]any
				if err := json.Unmarshal(stdout.Bytes(), &v); err != nil {
					t.Fatalf("--json output is not JSON: %v\n%s", err, stdout.String())
				}
				b, _ := json.Marshal(v["result"])
				if !strings.Contains(string(b), `red\r`) || !strings.Contains(string(b), raw) {
					t.Errorf("--json changed the result's meaning: %s", b)
				}
			}
		})
	}
}

// TestDenialNamesPolicy: a call a Cedar policy denied is reported with the policy's id, as the
// API's data.policies names it; a rule's denial still names the rule.
func TestDenialNamesPolicy(t *testing.T) {
	for _, tc := range []struct {
		name string
		data map[string]any
		want string
	}{
		{"rule", map[string]any{"error": "PolicyDenied", "rule": "drop_*", "tool": "drop_table"},
			`denied by rule "drop_*": `},
		{"cedar", map[string]any{"error": "PolicyDenied", "rule": "delete_*", "tool": "delete_file", "policies": []string{"forbid-etc"}},
			`denied by Cedar policy "forbid-etc" under rule "delete_*": `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, _ := json.Marshal(tc.data)
			var b bytes.Buffer
			printError(&b, "x", &mcpclient.RPCError{Code: -32003, Message: "PolicyDenied: tool is denied", Data: data})
			if !strings.HasPrefix(b.String(), tc.want) {
				t.Fatalf("got %q, want prefix %q", b.String(), tc.want)
			}
		})
	}
}
