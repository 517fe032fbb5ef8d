package era

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
)

const okMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func modernHdr(method string, more ...string) http.Header {
	return hdr(append([]string{"MCP-Protocol-Version", Modern, "Mcp-Method", method}, more...)...)
}

// TestClassify pins each MUST of the 2026-07-28 transport and versioning pages (file and
// section in each case's spec field) and the era rule of basic/versioning.
func TestClassify(t *testing.T) {
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"greet","arguments":{}, ` + okMeta + `}}`
	cases := []struct {
		name, spec string
		h          http.Header
		body       string
		modern     bool // a Request comes back
		status     int  // a Rejection with this status (0 = none)
		code       int
	}{
		{"legacy request stays legacy", "basic/versioning §Backward Compatibility: initialize selects legacy",
			hdr("MCP-Protocol-Version", "2025-11-25"), `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, false, 0, 0},
		{"no version at all is legacy", "transports §Protocol Version Header: MAY treat as 2025-03-26",
			hdr(), `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, false, 0, 0},
		{"valid modern tools/call", "transports §Standard Request Headers",
			modernHdr("tools/call", "Mcp-Name", "greet"), call, true, 0, 0},
		{"Mcp-Name surrounding whitespace is not part of the value", "RFC 9110 §5.5 (conformance ServerAcceptsWhitespaceHeaderValue)",
			modernHdr("tools/call", "Mcp-Name", "  greet\t"), call, true, 0, 0},
		{"Mcp-Name Base64 sentinel is decoded before comparing", "transports §Value Encoding: servers MUST decode",
			modernHdr("tools/call", "Mcp-Name", "=?base64?Z3JlZXQ=?="), call, true, 0, 0},
		{"Mcp-Name missing", "transports §Server Validation: required standard header missing → 400 -32020",
			modernHdr("tools/call"), call, false, 400, CodeHeaderMismatch},
		{"Mcp-Name differs from params.name", "transports §Server Validation: values MUST match",
			modernHdr("tools/call", "Mcp-Name", "rm_rf"), call, false, 400, CodeHeaderMismatch},
		{"Mcp-Name twice", "transports §Server Validation (ambiguous header)",
			modernHdr("tools/call", "Mcp-Name", "greet", "Mcp-Name", "greet"), call, false, 400, CodeHeaderMismatch},
		{"Mcp-Name with a control character", "transports §Server Validation: invalid characters",
			modernHdr("tools/call", "Mcp-Name", "gr\x01eet"), call, false, 400, CodeHeaderMismatch},
		{"Mcp-Name bad Base64", "transports §Value Encoding",
			modernHdr("tools/call", "Mcp-Name", "=?base64?!!!?="), call, false, 400, CodeHeaderMismatch},
		{"Mcp-Method missing", "transports §Standard Request Headers: REQUIRED on all requests",
			hdr("MCP-Protocol-Version", Modern, "Mcp-Name", "greet"), call, false, 400, CodeHeaderMismatch},
		{"Mcp-Method differs from body method", "transports §Server Validation: no header/body split",
			modernHdr("tools/list", "Mcp-Name", "greet"), call, false, 400, CodeHeaderMismatch},
		{"version header missing", "transports §Protocol Version Header: every POST MUST include it",
			hdr("Mcp-Method", "tools/call", "Mcp-Name", "greet"), call, false, 400, CodeHeaderMismatch},
		{"legacy header with a modern body", "transports §Protocol Version Header: MUST match _meta (no era split)",
			hdr("MCP-Protocol-Version", "2025-11-25", "Mcp-Method", "tools/call", "Mcp-Name", "greet"), call, false, 400, CodeHeaderMismatch},
		{"modern header with a legacy body", "basic/index §_meta: every modern request MUST carry _meta",
			modernHdr("tools/call", "Mcp-Name", "greet"), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet"}}`, false, 400, jsonrpc.CodeInvalidParams},
		{"missing params", "basic/index §_meta",
			modernHdr("tools/list"), `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, false, 400, jsonrpc.CodeInvalidParams},
		{"_meta without clientCapabilities", "basic/index §_meta (conformance missing-client-capabilities → -32602)",
			modernHdr("server/discover"), `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, false, 400, jsonrpc.CodeInvalidParams},
		{"_meta without protocolVersion", "basic/index §_meta (conformance missing-protocol-version → -32602)",
			modernHdr("server/discover"), `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}}`, false, 400, jsonrpc.CodeInvalidParams},
		{"duplicate member names", "transports §Server Validation: one source of truth",
			modernHdr("tools/call", "Mcp-Name", "greet"), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","name":"rm", ` + okMeta + `}}`, false, 400, jsonrpc.CodeInvalidParams},
		{"unknown later version", "basic/versioning §Protocol Version Negotiation: MUST answer UnsupportedProtocolVersionError",
			hdr("MCP-Protocol-Version", "v999.0.0", "Mcp-Method", "server/discover"),
			`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"v999.0.0","io.modelcontextprotocol/clientCapabilities":{}}}}`, false, 400, CodeUnsupportedVersion},
		{"unknown old version in _meta", "basic/versioning §Protocol Version Negotiation",
			hdr("MCP-Protocol-Version", "1900-01-01", "Mcp-Method", "server/discover"),
			`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"1900-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}`, false, 400, CodeUnsupportedVersion},
		{"header/meta mismatch is reported before support", "transports §Protocol Version Header (conformance HttpServerHeaderMismatch400)",
			modernHdr("server/discover"),
			`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"v999.0.0","io.modelcontextprotocol/clientCapabilities":{}}}}`, false, 400, CodeHeaderMismatch},
		{"server/discover is modern even without headers", "server/discover exists only in the modern revision",
			hdr(), `{"jsonrpc":"2.0","id":1,"method":"server/discover"}`, false, 400, jsonrpc.CodeInvalidParams},
		{"tasks/get needs Mcp-Name = taskId", "tasks extension §Streamable HTTP: Routing Headers",
			modernHdr("tasks/get", "Mcp-Name", "tg_other"), `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"tg_a", ` + okMeta + `}}`, false, 400, CodeHeaderMismatch},
		{"tasks/get with matching Mcp-Name", "tasks extension §Streamable HTTP: Routing Headers",
			modernHdr("tasks/get", "Mcp-Name", "tg_a"), `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"tg_a", ` + okMeta + `}}`, true, 0, 0},
		{"resources/read mirrors params.uri", "transports §Standard Request Headers",
			modernHdr("resources/read", "Mcp-Name", "file:///a"), `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a", ` + okMeta + `}}`, true, 0, 0},
		{"client response in the modern era", "transports §Sending Messages 4: MUST NOT send responses",
			modernHdr(""), `{"jsonrpc":"2.0","id":1,"result":{}}`, false, 400, jsonrpc.CodeInvalidRequest},
		// A repeated protocol header is refused in both eras: readers disagree on which value
		// counts (Go takes the first, Node joins them), so Tollgate and the upstream could see
		// different versions, methods, names or sessions.
		{"version header twice, legacy then modern", "transports §Protocol Version Header (one value)",
			hdr("MCP-Protocol-Version", "2025-11-25", "MCP-Protocol-Version", Modern), `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, false, 400, CodeHeaderMismatch},
		{"version header twice, same legacy value", "transports §Protocol Version Header (one value)",
			hdr("MCP-Protocol-Version", "2025-11-25", "mcp-protocol-version", "2025-11-25"), `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, false, 400, CodeHeaderMismatch},
		{"version header twice, modern then legacy", "transports §Protocol Version Header (one value)",
			hdr("MCP-Protocol-Version", Modern, "MCP-Protocol-Version", "2025-11-25", "Mcp-Method", "tools/call", "Mcp-Name", "greet"), call, false, 400, CodeHeaderMismatch},
		{"version header as a list", "RFC 9110 §5.3: a list is a repeated header",
			hdr("MCP-Protocol-Version", "2025-11-25, "+Modern), `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, false, 400, CodeHeaderMismatch},
		{"Mcp-Method twice in a legacy request", "one value per protocol header, both eras",
			hdr("MCP-Protocol-Version", "2025-11-25", "Mcp-Method", "tools/list", "Mcp-Method", "tools/call"), `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, false, 400, CodeHeaderMismatch},
		{"Mcp-Name twice in a legacy request", "one value per protocol header, both eras",
			hdr("Mcp-Name", "greet", "Mcp-Name", "rm_rf"), `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet"}}`, false, 400, CodeHeaderMismatch},
		{"Mcp-Session-Id twice", "2025-11-25 transports §Session Management (one session per request)",
			hdr("Mcp-Session-Id", "a", "Mcp-Session-Id", "b"), `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, false, 400, CodeHeaderMismatch},
		{"Mcp-Session-Id twice in a modern request", "one value per protocol header, both eras",
			modernHdr("tools/call", "Mcp-Name", "greet", "Mcp-Session-Id", "a", "Mcp-Session-Id", "b"), call, false, 400, CodeHeaderMismatch},
		{"modern notification passes", "transports §Sending Messages 5",
			hdr("MCP-Protocol-Version", Modern), `{"jsonrpc":"2.0","method":"notifications/x"}`, true, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := jsonrpc.Parse([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req, rej := Classify(tc.h, m)
			switch {
			case tc.status != 0:
				if rej == nil {
					t.Fatalf("%s: accepted (%+v), want HTTP %d code %d", tc.spec, req, tc.status, tc.code)
				}
				if rej.Status != tc.status || rej.Err.Code != tc.code {
					t.Fatalf("%s: got HTTP %d code %d (%s), want %d %d", tc.spec, rej.Status, rej.Err.Code, rej.Err.Message, tc.status, tc.code)
				}
			case rej != nil:
				t.Fatalf("%s: rejected: %d %s", tc.spec, rej.Err.Code, rej.Err.Message)
			case tc.modern != (req != nil):
				t.Fatalf("%s: modern = %v, want %v", tc.spec, req != nil, tc.modern)
			}
		})
	}
}

// TestUnsupportedVersionData: basic/versioning §Protocol Version Negotiation — the error lists
// the supported versions and echoes the requested one.
func TestUnsupportedVersionData(t *testing.T) {
	r := UnsupportedVersion("v9")
	b, _ := json.Marshal(r.Err)
	var e struct {
		Code int
		Data struct {
			Supported []string
			Requested string
		}
	}
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	if e.Code != -32022 || e.Data.Requested != "v9" || len(e.Data.Supported) == 0 || e.Data.Supported[0] != Modern {
		t.Fatalf("error = %s", b)
	}
}

// TestTasksDeclared: tasks extension §Capability Negotiation — declared per request in
// _meta clientCapabilities.extensions.
func TestTasksDeclared(t *testing.T) {
	for _, tc := range []struct {
		caps string
		want bool
	}{
		{`{}`, false},
		{`{"extensions":{}}`, false},
		{`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`, true},
		{`{"extensions":{"io.modelcontextprotocol/tasks":null}}`, false},
		{`{"extensions":[]}`, false},
	} {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + tc.caps + `}}}`
		m, _ := jsonrpc.Parse([]byte(body))
		req, rej := Classify(modernHdr("tools/list"), m)
		if rej != nil {
			t.Fatalf("%s: %s", tc.caps, rej.Err.Message)
		}
		if req.Tasks != tc.want {
			t.Errorf("%s: Tasks = %v", tc.caps, req.Tasks)
		}
	}
}

func TestHeaderValueRoundTrip(t *testing.T) {
	for _, v := range []string{"greet", "Hello, 世界", " padded ", "line1\nline2", "=?base64?literal?=", ""} {
		enc := EncodeHeaderValue(v)
		got := enc
		if d, ok := DecodeHeaderValue(enc); ok {
			got = d
		}
		if got != v {
			t.Errorf("%q → %q → %q", v, enc, got)
		}
		if strings.ContainsAny(enc, "\r\n") {
			t.Errorf("%q encodes to an unsafe header %q", v, enc)
		}
	}
}

func TestHTTPStatus(t *testing.T) {
	for code, want := range map[int]int{-32601: 404, -32020: 400, -32021: 400, -32022: 400, -32602: 400, -32003: 200, -32000: 200} {
		if got := HTTPStatus(code); got != want {
			t.Errorf("HTTPStatus(%d) = %d, want %d", code, got, want)
		}
	}
}

// FuzzClassify: any header/body pair either classifies or rejects, never panics, and an
// accepted modern tools/call always has an Mcp-Name equal to its params.name.
func FuzzClassify(f *testing.F) {
	f.Add("2026-07-28", "tools/call", "greet", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet",`+okMeta+`}}`)
	f.Add("", "", "", `{"jsonrpc":"2.0","id":1,"method":"server/discover"}`)
	f.Add("2025-11-25", "tools/call", "=?base64?eA==?=", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`)
	f.Fuzz(func(t *testing.T, version, method, name, body string) {
		m, err := jsonrpc.Parse([]byte(body))
		if err != nil {
			return
		}
		h := hdr("MCP-Protocol-Version", version, "Mcp-Method", method, "Mcp-Name", name)
		req, rej := Classify(h, m)
		if req != nil && rej != nil {
			t.Fatal("both accepted and rejected")
		}
		if req != nil && m.Kind == jsonrpc.KindRequest && m.Method == "tools/call" {
			body, _ := stringMember(m.Params, "name")
			got, r := header(h, HeaderName)
			if r != nil || got != body {
				t.Fatalf("accepted tools/call with Mcp-Name %q for params.name %q", got, body)
			}
		}
	})
}
