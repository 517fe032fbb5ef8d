// Package era decides, for each POST, which MCP era it speaks — legacy (an initialize
// handshake and a session, 2025-11-25 and earlier) or modern (2026-07-28: version, client
// identity and capabilities in every request's _meta, no session) — and applies the modern
// transport's request checks. Both eras are served on the one /mcp endpoint (spec 2026-07-28
// basic/versioning "Backward Compatibility": a dual-era server selects its behaviour from how
// the client opens).
package era

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
)

// Protocol versions.
const (
	// Modern is the stateless revision Tollgate serves per request.
	Modern = "2026-07-28"
	// LatestLegacy is the newest version an initialize handshake can negotiate.
	LatestLegacy = "2025-11-25"
)

// Supported lists every version Tollgate serves, newest first: the modern one per request,
// the legacy ones through initialize. It is the -32022 "supported" list and server/discover's
// supportedVersions.
var Supported = []string{Modern, LatestLegacy, "2025-06-18", "2025-03-26"}

// Keys of the request _meta (spec 2026-07-28 basic/index "_meta") and the tasks extension id.
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"
	MetaLogLevel           = "io.modelcontextprotocol/logLevel"
	TasksExtension         = "io.modelcontextprotocol/tasks"
)

// HTTP headers of the modern transport (spec 2026-07-28 transports/streamable-http
// "Request Metadata").
const (
	HeaderProtocolVersion = "Mcp-Protocol-Version"
	HeaderMethod          = "Mcp-Method"
	HeaderName            = "Mcp-Name"
	// HeaderSessionID is the legacy transport's session header (spec 2025-11-25 transports
	// "Session Management").
	HeaderSessionID = "Mcp-Session-Id"
)

// singleHeaders may appear at most once in a request of either era. Readers disagree on a
// repeated header — Go's Header.Get and most frameworks take the first value, Node joins them
// with ", ", a proxy may keep the last — so Tollgate and the upstream could read different
// versions, methods, names or sessions (a legacy version first and a modern one second used to
// be classified legacy while both values went upstream).
var singleHeaders = []string{HeaderProtocolVersion, HeaderMethod, HeaderName, HeaderSessionID}

// Error codes the modern revision defines (schema.ts: HEADER_MISMATCH,
// MISSING_REQUIRED_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION).
const (
	CodeHeaderMismatch     = -32020
	CodeMissingCapability  = -32021
	CodeUnsupportedVersion = jsonrpc.CodeUnsupportedProtocol
)

// IsModern reports whether a version string belongs to the modern era. Versions are dates, so
// a string comparison is enough, and unknown later ones count as modern (then refused with
// -32022 rather than mistaken for legacy).
func IsModern(v string) bool { return v >= Modern }

// Request is what Tollgate learned about one modern request from its _meta.
type Request struct {
	Version string
	// Capabilities is the client's io.modelcontextprotocol/clientCapabilities, as sent.
	Capabilities json.RawMessage
	// Tasks: the request declared the io.modelcontextprotocol/tasks extension (tasks
	// extension "Capability Negotiation": per request, never remembered).
	Tasks bool
}

// Rejection is a modern request refused before any handler runs: the HTTP status and the
// JSON-RPC error to answer with.
type Rejection struct {
	Status int
	Err    *jsonrpc.Error
}

// Classify decides the era of one JSON-RPC message. It returns nil, nil for a legacy message
// (served as before), a Request for a valid modern request, or a Rejection.
//
// A message is modern when its MCP-Protocol-Version header or its _meta protocol version names
// 2026-07-28 or later, when its _meta names a version that is not a known legacy one, or when
// it is server/discover (a method only the modern revision has). Either source alone makes it
// modern, so a header that says legacy cannot smuggle a modern body past the checks below, nor
// the other way round.
//
// In both eras a protocol header that appears more than once, or a version header holding a
// list (what an intermediary makes of a repeated header, RFC 9110 §5.3), is refused with
// -32020 HeaderMismatch (HTTP 400) before anything else.
func Classify(h http.Header, m *jsonrpc.Message) (*Request, *Rejection) {
	if rej := repeated(h); rej != nil {
		return nil, rej
	}
	headerV := h.Get(HeaderProtocolVersion)
	var params json.RawMessage
	if m.Kind == jsonrpc.KindRequest || m.Kind == jsonrpc.KindNotification {
		params = m.Params
	}
	metaV, _ := stringMember(jsonrpc.Member(params, "_meta"), MetaProtocolVersion)
	modern := IsModern(headerV) || IsModern(metaV) || (metaV != "" && !knownLegacy(metaV)) ||
		m.Method == "server/discover"
	if !modern {
		return nil, nil
	}
	switch m.Kind {
	case jsonrpc.KindRequest:
	case jsonrpc.KindNotification:
		// This revision defines no client notifications over HTTP (transports "Sending
		// Messages" note); one is passed on like any other.
		return &Request{Version: headerV}, nil
	default:
		// transports "Sending Messages" 4: the client MUST NOT send JSON-RPC responses.
		return nil, reject(http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "InvalidRequest",
			"Invalid request: protocol "+Modern+" clients do not send JSON-RPC responses")
	}
	return classifyRequest(h, m, headerV)
}

// CheckHeaders is the part of Classify that needs no body: a GET or DELETE on the endpoint
// must not carry a repeated protocol or session header either (first-value-wins readers would
// pick a different session than the upstream).
func CheckHeaders(h http.Header) *Rejection { return repeated(h) }

// repeated refuses a protocol header sent more than once (any case of its name counts: net/http
// canonicalises them into one key), and a version header with a comma-separated list.
func repeated(h http.Header) *Rejection {
	for _, name := range singleHeaders {
		if len(h.Values(name)) > 1 {
			return mismatch(name + " header must appear once")
		}
	}
	if strings.Contains(h.Get(HeaderProtocolVersion), ",") {
		return mismatch(HeaderProtocolVersion + " header must name one version")
	}
	return nil
}

func classifyRequest(h http.Header, m *jsonrpc.Message, headerV string) (*Request, *Rejection) {
	params := m.Params
	if len(params) == 0 || string(params) == "null" {
		return nil, invalidMeta("params with _meta are required")
	}
	// Different decoders must not read the request differently (duplicate keys): governance
	// and the upstream have to see the same name, arguments and version.
	if !jsontext.Value(params).IsValid() || firstByte(params) != '{' {
		return nil, invalidMeta("params must be a strictly valid JSON object (no duplicate member names)")
	}
	meta := jsonrpc.Member(params, "_meta")
	if firstByte(meta) != '{' {
		// basic/index "_meta": every modern request MUST carry _meta.
		return nil, invalidMeta("_meta is required")
	}
	metaV, ok := stringMember(meta, MetaProtocolVersion)
	if !ok || metaV == "" {
		return nil, invalidMeta("_meta[\"" + MetaProtocolVersion + "\"] (a string) is required")
	}
	caps := jsonrpc.Member(meta, MetaClientCapabilities)
	if firstByte(caps) != '{' {
		return nil, invalidMeta("_meta[\"" + MetaClientCapabilities + "\"] (an object) is required")
	}
	// transports "Protocol Version Header": MUST be present and MUST match _meta, else 400
	// HeaderMismatch. Checked before support, so a mismatch is reported as one.
	if vs := h.Values(HeaderProtocolVersion); len(vs) != 1 || vs[0] == "" {
		return nil, mismatch(HeaderProtocolVersion + " header is required (exactly once) and must equal _meta " + MetaProtocolVersion)
	}
	if headerV != metaV {
		return nil, mismatch(HeaderProtocolVersion + " header " + quote(headerV) + " does not match _meta " + MetaProtocolVersion + " " + quote(metaV))
	}
	// basic/versioning "Protocol Version Negotiation": an unsupported version MUST get
	// UnsupportedProtocolVersionError listing the supported ones (400 on HTTP).
	if metaV != Modern {
		return nil, UnsupportedVersion(metaV)
	}
	// transports "Standard Request Headers" and "Server Validation".
	method, rej := header(h, HeaderMethod)
	if rej != nil {
		return nil, rej
	}
	if method != m.Method {
		return nil, mismatch(HeaderMethod + " header " + quote(method) + " does not match body method " + quote(m.Method))
	}
	if field := nameField(m.Method); field != "" {
		body, _ := stringMember(params, field)
		name, rej := header(h, HeaderName)
		if rej != nil {
			return nil, rej
		}
		if name != body {
			return nil, mismatch(HeaderName + " header does not match body params." + field)
		}
	}
	return &Request{Version: metaV, Capabilities: caps, Tasks: declares(caps, TasksExtension)}, nil
}

// nameField is the params member Mcp-Name mirrors: params.name (tools/call, prompts/get),
// params.uri (resources/read), params.taskId (tasks/get|update|cancel: tasks extension
// "Streamable HTTP: Routing Headers" — the client MUST set it).
func nameField(method string) string {
	switch method {
	case "tools/call", "prompts/get":
		return "name"
	case "resources/read":
		return "uri"
	case "tasks/get", "tasks/update", "tasks/cancel":
		return "taskId"
	}
	return ""
}

// header reads a required single-valued header: surrounding whitespace is not part of a field
// value (RFC 9110 §5.5), the Base64 sentinel is decoded (transports "Value Encoding": servers
// MUST decode before comparing), and control characters are refused.
func header(h http.Header, name string) (string, *Rejection) {
	vs := h.Values(name)
	if len(vs) == 0 {
		return "", mismatch(name + " header is required")
	}
	if len(vs) > 1 {
		return "", mismatch(name + " header must appear once")
	}
	v := strings.Trim(vs[0], " \t")
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f || c >= 0x80 {
			return "", mismatch(name + " header contains invalid characters")
		}
	}
	if d, ok := DecodeHeaderValue(v); ok {
		return d, nil
	} else if strings.HasPrefix(v, base64Prefix) && strings.HasSuffix(v, base64Suffix) {
		return "", mismatch(name + " header has an invalid Base64 value")
	}
	return v, nil
}

const (
	base64Prefix = "=?base64?"
	base64Suffix = "?="
)

// DecodeHeaderValue decodes a value in the Base64 sentinel form "=?base64?…?=" (markers
// case-sensitive). ok is false when v is not in that form or does not decode to UTF-8.
func DecodeHeaderValue(v string) (string, bool) {
	if len(v) < len(base64Prefix)+len(base64Suffix) || !strings.HasPrefix(v, base64Prefix) || !strings.HasSuffix(v, base64Suffix) {
		return "", false
	}
	b, err := base64.StdEncoding.DecodeString(v[len(base64Prefix) : len(v)-len(base64Suffix)])
	if err != nil || !utf8.Valid(b) {
		return "", false
	}
	return string(b), true
}

// EncodeHeaderValue is the inverse for values Tollgate sends upstream: plain when the value is
// visible ASCII without surrounding whitespace and not itself sentinel-shaped, else Base64.
func EncodeHeaderValue(v string) string {
	plain := v != "" && v[0] != ' ' && v[len(v)-1] != ' ' &&
		!(strings.HasPrefix(v, base64Prefix) && strings.HasSuffix(v, base64Suffix))
	for i := 0; plain && i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e {
			plain = false
		}
	}
	if plain {
		return v
	}
	return base64Prefix + base64.StdEncoding.EncodeToString([]byte(v)) + base64Suffix
}

// UnsupportedVersion is the -32022 error for a requested version (HTTP 400).
func UnsupportedVersion(requested string) *Rejection {
	return &Rejection{Status: http.StatusBadRequest, Err: jsonrpc.NewError(CodeUnsupportedVersion,
		"UnsupportedProtocolVersion", "Unsupported protocol version "+quote(requested)+"; supported: "+strings.Join(Supported, ", "),
		"supported", slices.Clone(Supported), "requested", requested)}
}

// MissingTasksCapability is the -32021 error for a request that needs the tasks extension
// the client did not declare (tasks extension "Capability Negotiation").
func MissingTasksCapability(message string) *jsonrpc.Error {
	return jsonrpc.NewError(CodeMissingCapability, "MissingRequiredClientCapability", message,
		"requiredCapabilities", map[string]any{"extensions": map[string]any{TasksExtension: map[string]any{}}})
}

// HTTPStatus is the status a modern reply carrying a JSON-RPC error with code gets (transports
// "Protocol Version Header": unknown method 404; header, capability, version and params
// errors 400; anything else is a normal 200 response).
func HTTPStatus(code int) int {
	switch code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case CodeHeaderMismatch, CodeMissingCapability, CodeUnsupportedVersion,
		jsonrpc.CodeInvalidRequest, jsonrpc.CodeInvalidParams, jsonrpc.CodeParseError:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

func reject(status, code int, name, msg string) *Rejection {
	return &Rejection{Status: status, Err: jsonrpc.NewError(code, name, msg)}
}

func mismatch(msg string) *Rejection {
	return reject(http.StatusBadRequest, CodeHeaderMismatch, "HeaderMismatch", "Header mismatch: "+msg)
}

func invalidMeta(msg string) *Rejection {
	return reject(http.StatusBadRequest, jsonrpc.CodeInvalidParams, "InvalidParams", "Invalid params: "+msg)
}

func knownLegacy(v string) bool {
	return slices.Contains(Supported, v) || v == "2024-11-05"
}

// declares reports whether capabilities.extensions has key.
func declares(caps json.RawMessage, key string) bool {
	ext := jsonrpc.Member(caps, "extensions")
	if firstByte(ext) != '{' {
		return false
	}
	v := jsonrpc.Member(ext, key)
	return len(v) > 0 && string(v) != "null"
}

// stringMember returns obj[key] when it is a JSON string.
func stringMember(obj json.RawMessage, key string) (string, bool) {
	v := jsonrpc.Member(obj, key)
	if firstByte(v) != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

func firstByte(b []byte) byte {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

func quote(s string) string {
	b, _ := jsonrpc.Marshal(s)
	return string(b)
}
