package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestParseKinds(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		kind   Kind
		id     string // raw; "" = absent
		method string
		params string
		result string
		errRaw string
	}{
		{"request int id", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, KindRequest, `1`, "tools/call", `{"name":"x"}`, "", ""},
		{"request string id", `{"jsonrpc":"2.0","id":"abc","method":"ping"}`, KindRequest, `"abc"`, "ping", "", "", ""},
		{"id above 2^53 kept as sent", `{"id":9007199254740993,"method":"m"}`, KindRequest, `9007199254740993`, "m", "", "", ""},
		{"negative id", `{"id":-42,"method":"m"}`, KindRequest, `-42`, "m", "", "", ""},
		{"float id", `{"id":1.5e3,"method":"m"}`, KindRequest, `1.5e3`, "m", "", "", ""},
		{"zero id", `{"id":0,"method":"m"}`, KindRequest, `0`, "m", "", "", ""},
		{"negative zero id", `{"id":-0,"method":"m"}`, KindRequest, `-0`, "m", "", "", ""},
		{"escaped string id", `{"id":"a\"b\\c\u00e9","method":"m"}`, KindRequest, `"a\"b\\c\u00e9"`, "m", "", "", ""},
		{"empty string id", `{"id":"","method":"m"}`, KindRequest, `""`, "m", "", "", ""},
		{"null id is a notification", `{"jsonrpc":"2.0","id":null,"method":"notifications/x"}`, KindNotification, `null`, "notifications/x", "", "", ""},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, KindNotification, "", "notifications/initialized", "", "", ""},
		{"notification with params", `{"method":"n","params":[1,2]}`, KindNotification, "", "n", `[1,2]`, "", ""},
		{"result response", `{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`, KindResponse, `7`, "", "", `{"content":[]}`, ""},
		{"null result", `{"id":7,"result":null}`, KindResponse, `7`, "", "", `null`, ""},
		{"error response", `{"jsonrpc":"2.0","id":"x","error":{"code":-32601,"message":"no"}}`, KindResponse, `"x"`, "", "", "", `{"code":-32601,"message":"no"}`},
		{"error response with null id", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}`, KindResponse, `null`, "", "", "", `{"code":-32700,"message":"parse"}`},
		{"members in any order", `{"params":{},"method":"m","id":3,"jsonrpc":"2.0"}`, KindRequest, `3`, "m", `{}`, "", ""},
		{"whitespace everywhere", " \t\r\n{ \"id\" \n:\t 5 ,\r\n \"method\" : \"m\" , \"params\" :\n[ 1 , { } ] } \n\t", KindRequest, `5`, "m", `[ 1 , { } ]`, "", ""},
		{"escaped method", `{"id":1,"method":"tools\/call"}`, KindRequest, `1`, "tools/call", "", "", ""},
		{"unicode-escaped method", `{"id":1,"method":"\u0074ools/call"}`, KindRequest, `1`, "tools/call", "", "", ""},
		{"escaped key", `{"\u0069d":1,"\u006dethod":"m"}`, KindRequest, `1`, "m", "", "", ""},
		{"non-ASCII method", `{"method":"é/ü"}`, KindNotification, "", "é/ü", "", "", ""},
		{"invalid UTF-8 method decoded as encoding/json does", "{\"method\":\"a\xffb\"}", KindNotification, "", "a\uFFFDb", "", "", ""},
		{"duplicate unknown keys are fine", `{"x":1,"x":2,"method":"m"}`, KindNotification, "", "m", "", "", ""},
		{"case variant of unknown key is fine", `{"X":1,"x":2,"method":"m"}`, KindNotification, "", "m", "", "", ""},
		{"nested protocol keys are not top level", `{"id":1,"result":{"id":2,"method":"evil","Method":"x"}}`, KindResponse, `1`, "", "", `{"id":2,"method":"evil","Method":"x"}`, ""},
		{"strings hide brackets", `{"id":1,"method":"m","params":{"a":"}]{[\"","b":["\\"]}}`, KindRequest, `1`, "m", `{"a":"}]{[\"","b":["\\"]}`, "", ""},
		{"literals", `{"id":1,"method":"m","params":[true,false,null,-1.5e-3],"x":true}`, KindRequest, `1`, "m", `[true,false,null,-1.5e-3]`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Parse([]byte(tt.in))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if m.Kind != tt.kind {
				t.Errorf("Kind = %v, want %v", m.Kind, tt.kind)
			}
			if string(m.ID) != tt.id || (tt.id == "") != (m.ID == nil) {
				t.Errorf("ID = %q, want %q", m.ID, tt.id)
			}
			if m.Method != tt.method {
				t.Errorf("Method = %q, want %q", m.Method, tt.method)
			}
			if string(m.Params) != tt.params {
				t.Errorf("Params = %q, want %q", m.Params, tt.params)
			}
			if string(m.Result) != tt.result {
				t.Errorf("Result = %q, want %q", m.Result, tt.result)
			}
			if string(m.Error) != tt.errRaw {
				t.Errorf("Error = %q, want %q", m.Error, tt.errRaw)
			}
			if !bytes.Equal(m.Raw, []byte(tt.in)) {
				t.Errorf("Raw = %q, want the input", m.Raw)
			}
		})
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{KindInvalid: "invalid", KindRequest: "request", KindNotification: "notification", KindResponse: "response", Kind(99): "invalid"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, got, want)
		}
	}
}

func TestParseBatch(t *testing.T) {
	for _, in := range []string{`[]`, `[{"id":1,"method":"tools/call"}]`, " \n[", "\t[{}"} {
		if _, err := Parse([]byte(in)); !errors.Is(err, ErrBatch) {
			t.Errorf("Parse(%q) = %v, want ErrBatch", in, err)
		}
	}
}

// Members a Go upstream (encoding/json: case-insensitive, last duplicate wins) would read
// differently from Tollgate must be refused.
func TestParseRefusesAmbiguousProtocolMembers(t *testing.T) {
	tests := []struct{ name, in string }{
		{"duplicate method", `{"id":1,"method":"tools/list","method":"tools/call"}`},
		{"duplicate id", `{"id":1,"id":2,"method":"m"}`},
		{"duplicate params", `{"id":1,"method":"tools/call","params":{"name":"a"},"params":{"name":"b"}}`},
		{"duplicate result", `{"id":1,"result":1,"result":2}`},
		{"duplicate error", `{"id":1,"error":{},"error":{}}`},
		{"duplicate jsonrpc", `{"jsonrpc":"2.0","jsonrpc":"1.0","method":"m"}`},
		{"duplicate via escape", `{"id":1,"method":"tools/list","\u006dethod":"tools/call"}`},
		{"case variant method", `{"id":1,"method":"tools/list","Method":"tools/call"}`},
		{"case variant method alone", `{"id":1,"METHOD":"tools/call","result":1}`},
		{"case variant id", `{"ID":1,"method":"m"}`},
		{"case variant params", `{"id":1,"method":"tools/call","Params":{"name":"x"}}`},
		{"case variant via escape", `{"id":1,"method":"m","\u0050arams":{}}`},
		{"long s folds to s", `{"id":1,"method":"tools/call","param` + "\u017f" + `":{"name":"x"}}`},
		{"case variant jsonrpc", `{"id":1,"method":"m","jsonrpc":"2.0","JSONRPC":"1"}`},
		{"long s in jsonrpc", `{"id":1,"method":"m","j` + "\u017f" + `onrpc":"1"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if m, err := Parse([]byte(tt.in)); err == nil {
				t.Fatalf("Parse accepted %s as %v %q", tt.in, m.Kind, m.Method)
			}
		})
	}
}

// The Unicode folds Parse refuses are exactly the ones encoding/json would match.
func TestProtocolKeyFoldingMatchesEncodingJSON(t *testing.T) {
	var target struct {
		Method string `json:"method"`
	}
	for _, key := range []string{"Method", "METHOD", "mEtHoD", "method\u017f", "\u212aethod", "methoD", "meth0d", "methods", "ṁethod"} {
		target.Method = ""
		in := `{"` + key + `":"x"}`
		if err := json.Unmarshal([]byte(in), &target); err != nil {
			t.Fatal(err)
		}
		goSees := target.Method == "x"
		var seen uint8
		refused := checkProtocolKey([]byte(key), &seen) != nil
		if goSees != refused {
			t.Errorf("key %q: encoding/json reads it as method: %v; Parse refuses it: %v", key, goSees, refused)
		}
	}
}

func TestParseMalformed(t *testing.T) {
	tests := []string{
		``, ` `, "\n\t",
		`null`, `1`, `"x"`, `true`,
		`{`, `}`, `{]`, `{"id"`, `{"id":`, `{"id":}`, `{"id" 1}`, `{"id":1`, `{"id":1,}`, `{,}`,
		`{"id":1 "method":"m"}`, `{"id":1}{"id":2}`, `{"id":1} x`, `{"method":"m"}]`,
		`{id:1,"method":"m"}`, `{'id':1}`, `{"id":01,"method":"m"}`, `{"id":1.,"method":"m"}`,
		`{"id":-,"method":"m"}`, `{"id":+1,"method":"m"}`, `{"id":0x1,"method":"m"}`,
		`{"id":NaN,"method":"m"}`, `{"id":tru,"method":"m"}`, `{"id":nul,"method":"m"}`,
		`{"id":1"x":2}`, `{"id":true:1}`,
		`{"id":{"a":1},"method":"m"}`, `{"id":[1],"method":"m"}`, `{"id":true,"method":"m"}`,
		`{"id":"\x","method":"m"}`, "{\"id\":\"a\x01\",\"method\":\"m\"}", `{"id":"\ud8","method":"m"}`,
		"{\"id\":\"a\xff\",\"method\":\"m\"}", "{\"id\":\"\xed\xa0\x80\",\"method\":\"m\"}", // invalid UTF-8
		`{"method":1}`, `{"method":null}`, `{"method":{}}`, `{"method":"\q"}`, "{\"method\":\"a\nb\"}",
		`{"id":1}`, `{"result":1}`, `{"error":{}}`, `{"jsonrpc":"2.0"}`, `{}`, ` { } `,
		`{"id":1,"method":"m","params":{"a":[1,2}`, `{"id":1,"method":"m","params":"abc`,
		`{"id":1,"method":"m","params":["\"]}`, `{"id":1,"method":"m","params":{"a":"\`,
		`{"id":1,"method":"m","params":[[[[`, `{"a\`, `{"a\"`, `{"\u00"}`, `{"\uZZZZ":1,"method":"m"}`,
		"\xef\xbb\xbf{\"method\":\"m\"}", // a BOM is not JSON whitespace
		`{"id":1,"method":"m"}` + "\x00",
	}
	for _, in := range tests {
		m, err := Parse([]byte(in))
		if err == nil {
			t.Errorf("Parse(%q) = %+v, want an error", in, m)
		}
		if errors.Is(err, ErrBatch) {
			t.Errorf("Parse(%q) = ErrBatch for a non-array", in)
		}
	}
}

func TestWithID(t *testing.T) {
	tests := []struct {
		name, in, id, want string
	}{
		{"int to string", `{"jsonrpc":"2.0","id":1,"method":"m"}`, `"tg-1"`, `{"jsonrpc":"2.0","id":"tg-1","method":"m"}`},
		{"string to big int", `{"id":"a","method":"m"}`, `9007199254740993`, `{"id":9007199254740993,"method":"m"}`},
		{"float to negative", `{"method":"m","id":1.0}`, `-7`, `{"method":"m","id":-7}`},
		{"escaped string id", `{"id":"a\"\u00e9","result":{}}`, `"b"`, `{"id":"b","result":{}}`},
		{"restore escaped id byte for byte", `{"id":"b","result":{}}`, `"a\"\u00e9"`, `{"id":"a\"\u00e9","result":{}}`},
		{"whitespace kept", " { \"id\" :\t12 ,\n\"method\" : \"m\" }\r\n", `3`, " { \"id\" :\t3 ,\n\"method\" : \"m\" }\r\n"},
		{"unknown fields kept", `{"x":{"a":[1,2.50,"<&>"]},"id":1,"_meta":{"k":1e2},"method":"m","y":"\u003c"}`, `"z"`,
			`{"x":{"a":[1,2.50,"<&>"]},"id":"z","_meta":{"k":1e2},"method":"m","y":"\u003c"}`},
		{"null id on a notification", `{"id":null,"method":"m"}`, `5`, `{"id":5,"method":"m"}`},
		{"error response", `{"jsonrpc":"2.0","id":"tg-9","error":{"code":1,"message":"x"}}`, `9007199254740993`,
			`{"jsonrpc":"2.0","id":9007199254740993,"error":{"code":1,"message":"x"}}`},
		{"id last, no space", `{"method":"m","id":1}`, `"long-replacement-id"`, `{"method":"m","id":"long-replacement-id"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Parse([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			got := m.WithID(json.RawMessage(tt.id))
			if string(got) != tt.want {
				t.Fatalf("WithID = %q, want %q", got, tt.want)
			}
			if string(m.Raw) != tt.in {
				t.Errorf("WithID modified Raw: %q", m.Raw)
			}
			m2, err := Parse(got)
			if err != nil {
				t.Fatalf("Parse(WithID) = %v", err)
			}
			if string(m2.ID) != tt.id || m2.Method != m.Method || !bytes.Equal(m2.Params, m.Params) ||
				!bytes.Equal(m2.Result, m.Result) || !bytes.Equal(m2.Error, m.Error) {
				t.Errorf("re-parsed %+v, original %+v", m2, m)
			}
		})
	}
}

func TestWithIDNoChange(t *testing.T) {
	t.Run("same id returns Raw itself", func(t *testing.T) {
		m, err := Parse([]byte(`{"id":"a","method":"m"}`))
		if err != nil {
			t.Fatal(err)
		}
		if got := m.WithID(json.RawMessage(`"a"`)); &got[0] != &m.Raw[0] || len(got) != len(m.Raw) {
			t.Errorf("WithID with the same id copied: %q", got)
		}
	})
	t.Run("no id returns Raw", func(t *testing.T) {
		m, err := Parse([]byte(`{"method":"notifications/x"}`))
		if err != nil {
			t.Fatal(err)
		}
		if got := m.WithID(json.RawMessage(`1`)); string(got) != `{"method":"notifications/x"}` {
			t.Errorf("WithID on a notification = %q", got)
		}
	})
}

func TestReplace(t *testing.T) {
	tests := []struct {
		name, in, key, value, want string
	}{
		{"add to empty object", `{}`, "a", `1`, `{"a":1}`},
		{"add to empty object with spaces", " { \n } ", "a", `1`, " { \n \"a\":1} "},
		{"add to non-empty object", `{"x":1}`, "a", `{"b":[]}`, `{"x":1,"a":{"b":[]}}`},
		{"add keeps whitespace and trailing newline", "{ \"x\" : 1 }\n", "a", `true`, "{ \"x\" : 1 ,\"a\":true}\n"},
		{"add key that needs escaping, no HTML escaping", `{"x":1}`, `a"<&>`, `2`, `{"x":1,"a\"<&>":2}`},
		{"replace first", `{"a":1,"b":2}`, "a", `"x"`, `{"a":"x","b":2}`},
		{"replace last", `{"a":1,"b":2}`, "b", `null`, `{"a":1,"b":null}`},
		{"replace keeps neighbours byte for byte", `{"_meta":{"n":1.50},"a" : [1, 2] ,"z":"\u003c"}`, "a", `[]`, `{"_meta":{"n":1.50},"a" : [] ,"z":"\u003c"}`},
		{"replace escaped key", `{"\u0061":1}`, "a", `2`, `{"\u0061":2}`},
		{"replace the last duplicate, as parsers read it", `{"a":1,"a":2}`, "a", `3`, `{"a":1,"a":3}`},
		{"nested key is not top level", `{"x":{"a":1}}`, "a", `2`, `{"x":{"a":1},"a":2}`},
		{"replace with longer value", `{"task":{}}`, "task", `{"ttl":60000,"x":[1,2,3]}`, `{"task":{"ttl":60000,"x":[1,2,3]}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Replace([]byte(tt.in), tt.key, []byte(tt.value))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("Replace = %q, want %q", got, tt.want)
			}
			if !json.Valid(got) {
				t.Errorf("Replace produced invalid JSON %q", got)
			}
			if v := Member(got, tt.key); string(v) != tt.value {
				t.Errorf("Member(%q) after Replace = %q, want %q", tt.key, v, tt.value)
			}
		})
	}
}

func TestReplaceErrors(t *testing.T) {
	for _, in := range []string{``, ` `, `[]`, `1`, `"a"`, `{`, `{"a":}`, `{"a":1,}`, `{"a":1}x`, `{"a":1}}`, `null`} {
		if got, err := Replace([]byte(in), "k", []byte(`1`)); err == nil {
			t.Errorf("Replace(%q) = %q, want an error", in, got)
		}
	}
}

func TestReplaceDoesNotAlias(t *testing.T) {
	in := []byte(`{"a":1,"b":2}`)
	orig := string(in)
	out, err := Replace(in, "a", []byte(`100`))
	if err != nil {
		t.Fatal(err)
	}
	out[1] = 'X'
	if string(in) != orig {
		t.Errorf("Replace result aliases its input: %q", in)
	}
}

func TestMember(t *testing.T) {
	tests := []struct {
		name, in, key string
		want          string // "" = nil
	}{
		{"found", `{"a":1,"b":{"c":2}}`, "b", `{"c":2}`},
		{"string value", ` { "a" : "x\"y" } `, "a", `"x\"y"`},
		{"missing", `{"a":1}`, "b", ""},
		{"nested is not top level", `{"a":{"b":1}}`, "b", ""},
		{"escaped key", `{"\u0062":true}`, "b", `true`},
		{"duplicate: last wins like encoding/json", `{"name":"safe","name":"evil"}`, "name", `"evil"`},
		{"null value", `{"a":null}`, "a", `null`},
		{"not an object", `[{"a":1}]`, "a", ""},
		{"empty", ``, "a", ""},
		{"case matters", `{"Name":"x"}`, "name", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Member([]byte(tt.in), tt.key)
			if string(got) != tt.want || (tt.want == "") != (got == nil) {
				t.Errorf("Member = %q, want %q", got, tt.want)
			}
		})
	}
}

// Member agrees with encoding/json on duplicates (the reason it returns the last one).
func TestMemberAgreesWithEncodingJSON(t *testing.T) {
	in := []byte(`{"name":"a","arguments":{},"name":"b"}`)
	var v struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(in, &v); err != nil {
		t.Fatal(err)
	}
	var s string
	if err := json.Unmarshal(Member(in, "name"), &s); err != nil || s != v.Name {
		t.Errorf("Member reads %q, encoding/json reads %q", s, v.Name)
	}
}

func TestBuilders(t *testing.T) {
	tests := []struct {
		name string
		got  []byte
		want string
		kind Kind
	}{
		{"request", Request(json.RawMessage(`9007199254740993`), "tools/call", json.RawMessage(`{"name":"x","arguments":{"a":"<&>"}}`)),
			`{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/call","params":{"name":"x","arguments":{"a":"<&>"}}}`, KindRequest},
		{"request without params", Request(json.RawMessage(`"a"`), "ping", nil), `{"jsonrpc":"2.0","id":"a","method":"ping"}`, KindRequest},
		{"request method needing escapes", Request(json.RawMessage(`1`), "a\"b<c>", nil), `{"jsonrpc":"2.0","id":1,"method":"a\"b<c>"}`, KindRequest},
		{"notification", Notification("notifications/tasks/status", json.RawMessage(`{"taskId":"tg_1"}`)),
			`{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"tg_1"}}`, KindNotification},
		{"notification without params", Notification("notifications/initialized", nil), `{"jsonrpc":"2.0","method":"notifications/initialized"}`, KindNotification},
		{"result response", ResultResponse(json.RawMessage(`"a\u00e9"`), json.RawMessage(`{"content":[{"type":"text","text":"<b>"}]}`)),
			`{"jsonrpc":"2.0","id":"a\u00e9","result":{"content":[{"type":"text","text":"<b>"}]}}`, KindResponse},
		{"result response null id", ResultResponse(nil, json.RawMessage(`{}`)), `{"jsonrpc":"2.0","id":null,"result":{}}`, KindResponse},
		{"error response keeps big id", ErrorResponse(json.RawMessage(`9007199254740993`), &Error{Code: CodePolicyDenied, Message: "denied <x>"}),
			`{"jsonrpc":"2.0","id":9007199254740993,"error":{"code":-32003,"message":"denied <x>"}}`, KindResponse},
		{"error response keeps escaped string id", ErrorResponse(json.RawMessage(`"a\"\u00e9"`), &Error{Code: CodeInvalidParams, Message: "m", Data: map[string]any{"error": "X"}}),
			`{"jsonrpc":"2.0","id":"a\"\u00e9","error":{"code":-32602,"message":"m","data":{"error":"X"}}}`, KindResponse},
		{"error response null id", ErrorResponse(nil, &Error{Code: CodeParseError, Message: "parse"}),
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}`, KindResponse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if string(tt.got) != tt.want {
				t.Fatalf("got  %s\nwant %s", tt.got, tt.want)
			}
			m, err := Parse(tt.got)
			if err != nil {
				t.Fatal(err)
			}
			if m.Kind != tt.kind {
				t.Errorf("Kind = %v, want %v", m.Kind, tt.kind)
			}
		})
	}
}

// Every id Parse accepts can be echoed by ErrorResponse: it re-encodes the id and would return
// nothing for one that is not valid JSON.
func TestErrorResponseEchoesEveryAcceptedID(t *testing.T) {
	for _, id := range []string{`1`, `-1`, `1.5`, `1e400`, `9007199254740993`, `"a"`, `"\u0000"`, `"\ud800"`, `""`, `null`} {
		m, err := Parse([]byte(`{"id":` + id + `,"method":"m"}`))
		if err != nil {
			t.Errorf("Parse refused id %s: %v", id, err)
			continue
		}
		out := ErrorResponse(m.ID, &Error{Code: CodeInternalError, Message: "x"})
		r, err := Parse(out)
		if err != nil {
			t.Errorf("id %s: ErrorResponse = %q: %v", id, out, err)
			continue
		}
		if !bytes.Equal(r.ID, m.ID) {
			t.Errorf("id %s came back as %s", id, r.ID)
		}
	}
}

func TestParseLargeResult(t *testing.T) {
	msg := largeResult(1 << 20)
	m, err := Parse(msg)
	if err != nil {
		t.Fatal(err)
	}
	if m.Kind != KindResponse || string(m.ID) != `42` || !json.Valid(m.Result) {
		t.Fatalf("Kind %v ID %s, result valid %v", m.Kind, m.ID, json.Valid(m.Result))
	}
	out := m.WithID(json.RawMessage(`"client-7"`))
	if !bytes.Equal(out[len(out)-len(m.Result)-1:len(out)-1], m.Result) {
		t.Error("WithID changed the result")
	}
}

func TestParseDeepNesting(t *testing.T) {
	// Nested values are skipped without recursion; depth costs nothing.
	deep := strings.Repeat("[", 1<<20) + strings.Repeat("]", 1<<20)
	m, err := Parse([]byte(`{"id":1,"method":"m","params":` + deep + `}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Params) != len(deep) {
		t.Errorf("params length %d, want %d", len(m.Params), len(deep))
	}
}

// largeResult builds a tools/call result of about n bytes with escapes, numbers and nesting.
func largeResult(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":42,"result":{"content":[`)
	for i := 0; b.Len() < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"type":"text","text":"line with \"quotes\", \\ and <html> \u00e9 {[ brackets ]}","n":[1,-2.5e3,true,null]}`)
	}
	b.WriteString(`],"isError":false}}`)
	return b.Bytes()
}
