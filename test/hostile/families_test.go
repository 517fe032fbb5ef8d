package hostile

import (
	"fmt"
	"net/http"
	"strings"
)

// The generated families of the corpus: parametrised hostile inputs, each with the outcome
// Tollgate must produce. Names say family/variant so a failure points at the input.

// refused is a /mcp case answered locally with a JSON-RPC error that the upstream never sees.
func refused(name, body string, status int, code, errName string) hcase {
	return hcase{name: name, body: []byte(body), status: status, code: code, errName: errName, upstream: "never"}
}

// toolsCall is a tools/call request body with raw params.
func toolsCall(params string) string {
	return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":` + params + `}`
}

// foldPairs are member names encoding/json binds to one struct field while a case-sensitive
// reader (Cedar, rules, JavaScript) sees two: ASCII case and Unicode simple folding.
var foldPairs = []struct{ label, a, b string }{
	{"Amount", "amount", "Amount"},
	{"AMOUNT", "amount", "AMOUNT"},
	{"mixed", "amount", "aMoUnT"},
	{"text", "text", "Text"},
	{"kelvin", "kind", "\u212aind"},                 // KELVIN SIGN folds to k
	{"kelvin-escaped", "kind", `\u212aind`},         // the same, JSON-escaped
	{"long-s", "secret", "\u017fecret"},             // LATIN SMALL LETTER LONG S folds to s
	{"sigma", "\u03c3", "\u03c2"},                   // σ and final ς
	{"dz", "\u01c6x", "\u01c5x"},                    // ǆ and title-case ǅ
	{"sharp-s", "stra\u00dfe", "stra\u1e9ee"},       // ß and capital ẞ
	{"micro", "\u00b5", "\u03bc"},                   // MICRO SIGN and Greek mu
	{"escaped-ascii", "amount", `\u0041\u006dount`}, // "Amount" spelled with escapes
}

func generated() []hcase {
	var out []hcase
	add := func(cs ...hcase) { out = append(out, cs...) }

	// Case-colliding member names at several depths, in the arguments of a forwarded tool,
	// of a Cedar-governed one (task-augmented), and in _meta.
	for _, p := range foldPairs {
		pair := fmt.Sprintf(`"%s":10,"%s":100000`, p.a, p.b)
		for _, pl := range []struct{ where, args string }{
			{"top", `{"text":"{{marker}}",` + pair + `}`},
			{"nested", `{"text":"{{marker}}","o":{` + pair + `}}`},
			{"in-array", `{"text":"{{marker}}","list":[1,{"x":{` + pair + `}}]}`},
			{"depth-6", `{"text":"{{marker}}","a":{"b":{"c":{"d":{"e":{` + pair + `}}}}}}`},
		} {
			add(refused("fold/"+pl.where+"/"+p.label, toolsCall(`{"name":"echo","arguments":`+pl.args+`}`), 200, "-32602", "InvalidParams"))
		}
		add(refused("fold/cedar/"+p.label, toolsCall(`{"name":"transfer_funds","arguments":{"currency":"USD","from_account":"a","to_account":"{{marker}}",`+pair+`},"task":{"ttl":60000}}`), 200, "-32602", "InvalidParams"))
	}
	for _, p := range foldPairs[:4] {
		add(refused("fold/meta/"+p.label, toolsCall(`{"name":"echo","arguments":{"text":"{{marker}}"},"_meta":{"`+p.a+`":1,"`+p.b+`":2}}`), 200, "-32602", "InvalidParams"))
	}

	// Duplicate member names: different parsers keep different ones.
	for _, d := range []struct{ label, params string }{
		{"args-top", `{"name":"echo","arguments":{"text":"{{marker}}","text":"other"}}`},
		{"args-nested", `{"name":"echo","arguments":{"text":"{{marker}}","o":{"a":1,"a":2}}}`},
		{"args-array", `{"name":"echo","arguments":{"text":"{{marker}}","l":[{"a":1,"a":2}]}}`},
		{"args-escaped", `{"name":"echo","arguments":{"text":"{{marker}}","\u0074ext":"other"}}`},
		{"name", `{"name":"echo","name":"drop_table","arguments":{"text":"{{marker}}"}}`},
		{"name-escaped", `{"name":"echo","n\u0061me":"drop_table","arguments":{"text":"{{marker}}"}}`},
		{"arguments", `{"name":"echo","arguments":{"text":"{{marker}}"},"arguments":{"text":"x"}}`},
		{"task", `{"name":"delete_record","arguments":{"text":"{{marker}}"},"task":{"ttl":60000},"task":null}`},
		{"meta", `{"name":"echo","arguments":{"text":"{{marker}}"},"_meta":{"a":1,"a":2}}`},
		{"case-name", `{"name":"echo","Name":"drop_table","arguments":{"text":"{{marker}}"}}`},
		{"case-name-alone", `{"NAME":"drop_table","arguments":{"text":"{{marker}}"}}`},
		{"case-arguments", `{"name":"echo","Arguments":{"text":"{{marker}}"}}`},
	} {
		add(refused("dup/"+d.label, toolsCall(d.params), 200, "-32602", "InvalidParams"))
	}

	// Governed methods sent as notifications (no id, id null): refused, never forwarded.
	for _, m := range []string{"tools/call", "tools/list", "tasks/get", "tasks/result", "tasks/cancel", "tasks/list",
		"initialize", "resources/list", "resources/read", "tasks/update", "server/discover"} {
		params := `{"name":"drop_table","taskId":"{{marker}}","uri":"{{marker}}","arguments":{"text":"{{marker}}"}}`
		for _, id := range []struct{ label, member string }{{"no-id", ``}, {"id-null", `"id":null,`}} {
			add(refused("notification/"+id.label+"/"+m, `{"jsonrpc":"2.0",`+id.member+`"method":"`+m+`","params":`+params+`}`,
				http.StatusBadRequest, "-32600", "IdRequired"))
		}
	}

	// Invalid UTF-8 in the name, argument names and values, and _meta: strict JSON refuses it
	// (decoders disagree on what it reads as).
	for _, b := range []struct{ label, bytes string }{
		{"ff", "\xff"}, {"fe", "\xfe"}, {"overlong-nul", "\xc0\x80"}, {"surrogate", "\xed\xa0\x80"},
		{"truncated", "\xe2\x82"}, {"lone-continuation", "\x80"},
	} {
		for _, pl := range []struct{ where, params string }{
			{"name", `{"name":"drop_` + b.bytes + `","arguments":{"text":"{{marker}}"}}`},
			{"arg-value", `{"name":"echo","arguments":{"text":"{{marker}}` + b.bytes + `"}}`},
			{"arg-name", `{"name":"echo","arguments":{"text":"{{marker}}","k` + b.bytes + `":1}}`},
			{"meta", `{"name":"echo","arguments":{"text":"{{marker}}"},"_meta":{"m":"` + b.bytes + `"}}`},
		} {
			add(refused("utf8/"+pl.where+"/"+b.label, toolsCall(pl.params), 200, "-32602", "InvalidParams"))
		}
	}

	// Bad task metadata on an approval tool (EC-SEP-001, EC-SEP-002).
	for i, task := range []string{`0`, `"60000"`, `[]`, `true`, `{"ttl":0}`, `{"ttl":-1}`, `{"ttl":1.5}`,
		`{"ttl":"60000"}`, `{"ttl":6e4}`, `{"ttl":1e400}`, `{"ttl":-0}`, `{"ttl":[]}`, `{"ttl":{}}`, `{"ttl":true}`,
		`{"ttl":-99999999999999999999}`} {
		add(refused(fmt.Sprintf("task/bad-%02d", i), toolsCall(`{"name":"delete_record","arguments":{"text":"{{marker}}"},"task":`+task+`}`),
			200, "-32602", "InvalidTaskMetadata"))
	}
	for _, task := range []string{`{"ttl":60000,"TTL":1}`, `{"ttl":60000,"ttl":1}`} {
		add(refused("task/ambiguous/"+task, toolsCall(`{"name":"delete_record","arguments":{"text":"{{marker}}"},"task":`+task+`}`), 200, "-32602", "InvalidParams"))
	}
	// Accepted but held: a null ttl means the default, a huge one is clamped; the call waits
	// for a human and the upstream has not seen it.
	for _, task := range []string{`{"ttl":null}`, `{}`, `{"ttl":99999999999999999999}`} {
		add(hcase{name: "task/held/" + task, body: []byte(toolsCall(`{"name":"delete_record","arguments":{"text":"{{marker}}"},"task":` + task + `}`)),
			status: 200, result: true, upstream: "never"})
	}

	// Weird tool names.
	long := func(n int) string { return strings.Repeat("n", n) }
	for _, n := range []struct{ label, name string }{
		{"128", "drop_" + long(123)},
		{"nul", `drop_\u0000x`}, {"newline", `drop_\nx`}, {"escape-seq", `drop_\u001b[31mred`},
		{"del", "drop_\x7f"}, {"unicode", "drop_表"}, {"rtl-override", "drop_\u202etable"},
	} {
		add(refused("name/denied/"+n.label, toolsCall(`{"name":"`+n.name+`","arguments":{"text":"{{marker}}"}}`), 200, "-32003", "PolicyDenied"))
	}
	for _, n := range []struct{ label, params string }{
		{"unknown", `{"name":"tollgate_unknown","arguments":{"text":"{{marker}}"}}`},
		{"bare-prefix", `{"name":"tollgate_","arguments":{"text":"{{marker}}"}}`},
		{"own-plus-suffix", `{"name":"tollgate_list_tasks_x","arguments":{"text":"{{marker}}"}}`},
		{"with-task", `{"name":"tollgate_unknown","arguments":{"text":"{{marker}}"},"task":{"ttl":60000}}`},
		{"drop-lookalike", `{"name":"tollgate_drop_table","arguments":{"text":"{{marker}}"}}`},
	} {
		add(refused("name/reserved/"+n.label, toolsCall(n.params), 200, "-32602", "UnknownTool"))
	}
	// Longer than the 128 bytes MCP allows a tool name: refused before rules read it (a long
	// name once cost seconds of rule matching), reserved prefix or not.
	for _, n := range []struct{ label, name string }{
		{"129", "drop_" + long(124)}, {"4KiB", "drop_" + long(4096)}, {"64KiB", "drop_" + long(64<<10)},
		{"reserved-64KiB", "tollgate_" + long(64<<10)}, {"forwarded-4KiB", "echo" + long(4096)},
		{"prod-delete-64KiB", strings.Repeat("prod", 16<<10)},
	} {
		add(refused("name/too-long/"+n.label, toolsCall(`{"name":"`+n.name+`","arguments":{"text":"{{marker}}"}}`), 200, "-32602", "InvalidParams"))
	}
	for _, n := range []struct{ label, name string }{
		{"empty", `""`}, {"null", `null`}, {"number", `7`}, {"object", `{}`}, {"array", `["drop_table"]`},
	} {
		add(refused("name/invalid/"+n.label, toolsCall(`{"name":`+n.name+`,"arguments":{"text":"{{marker}}"}}`), 200, "-32602", "InvalidParams"))
	}
	// Names the upstream does not have are its business: forwarded, and its (typed, case-
	// sensitive) tool lookup answers with an error — a case variant never reaches drop_table.
	for _, n := range []struct{ label, name string }{
		{"case-variant-of-denied", "DROP_table"}, {"trailing-nul", `echo\u0000`}, {"128", "echo" + long(124)},
	} {
		add(hcase{name: "name/forwarded/" + n.label, body: []byte(toolsCall(`{"name":"` + n.name + `","arguments":{"text":"{{marker}}"}}`)),
			status: 200, code: "*", upstream: "seen"})
	}

	// Batches: refused whole.
	for i, b := range []string{
		`[` + toolsCall(`{"name":"drop_table","arguments":{"text":"{{marker}}"}}`) + `]`,
		`[` + toolsCall(`{"name":"echo","arguments":{"text":"{{marker}}"}}`) + `,` + toolsCall(`{"name":"drop_table"}`) + `]`,
		" \r\n\t[" + toolsCall(`{"name":"echo","arguments":{"text":"{{marker}}"}}`) + `]`,
		`[[` + toolsCall(`{"name":"echo","arguments":{"text":"{{marker}}"}}`) + `]]`,
		`[{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"{{marker}}"}}]`,
		`[]`,
	} {
		c := refused(fmt.Sprintf("batch/%d", i), b, http.StatusBadRequest, "-32600", "BatchNotSupported")
		if !strings.Contains(b, "{{marker}}") {
			c.upstream = ""
		}
		add(c)
	}

	// Content types do not change what is governed; a cross-origin "simple" POST (text/plain,
	// no preflight) is stopped by the Origin check.
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
		"", "application/json; charset=iso-8859-1", "application/javascript"} {
		c := refused("content-type/"+cmpOr(ct, "none"), toolsCall(`{"name":"drop_table","arguments":{"text":"{{marker}}"}}`), 200, "-32003", "PolicyDenied")
		c.header = http.Header{"Content-Type": {ct}}
		add(c)
	}
	csrf := refused("content-type/cross-origin-text-plain", toolsCall(`{"name":"echo","arguments":{"text":"{{marker}}"}}`), http.StatusForbidden, "", "")
	csrf.header = http.Header{"Content-Type": {"text/plain"}, "Origin": {"https://evil.example"}}
	add(csrf)

	// Host and Origin (DNS rebinding) on both listeners.
	echo := toolsCall(`{"name":"echo","arguments":{"text":"{{marker}}"}}`)
	for _, h := range []struct {
		label, host, origin string
		ok                  bool
	}{
		{"foreign-host", "evil.example:{{port}}", "", false},
		{"foreign-host-no-port", "evil.example", "", false},
		{"localhost-suffix-trick", "localhost.evil.example:{{port}}", "", false},
		{"ip-in-name", "127.0.0.1.nip.io:{{port}}", "", false},
		{"foreign-origin", "", "https://evil.example", false},
		{"null-origin", "", "null", false},
		{"userinfo-origin", "", "http://127.0.0.1@evil.example", false},
		{"file-origin", "", "file://", false},
		{"loopback-lookalike-origin", "", "http://localhost.evil.example", false},
		{"allowed-host", "gw.internal:{{port}}", "", true},
		{"allowed-origin", "", "https://app.example.com", true},
		{"loopback-origin", "", "http://localhost:3000", true},
	} {
		hdr := http.Header{}
		if h.origin != "" {
			hdr.Set("Origin", h.origin)
		}
		c := hcase{name: "host-origin/mcp/" + h.label, body: []byte(echo), host: h.host, header: hdr, status: http.StatusForbidden, upstream: "never"}
		if h.ok {
			c.status, c.result, c.upstream = http.StatusOK, true, "seen"
		}
		add(c)
		for _, path := range []string{"/metrics", "/api/v1/approvals"} {
			hdr := hdr.Clone()
			hdr.Set("Authorization", "Bearer {{admin_token}}")
			c := hcase{name: "host-origin/admin" + path + "/" + h.label, admin: true, path: path, host: h.host, header: hdr, status: http.StatusForbidden}
			if h.ok {
				c.status = http.StatusOK
			}
			add(c)
		}
	}

	// Admin bearer tokens.
	for _, a := range []struct {
		label, auth string
		status      int
	}{
		{"none", "", 401}, {"wrong", "Bearer wrong", 401}, {"basic", "Basic YWRtaW46YWRtaW4=", 401},
		{"empty-bearer", "Bearer", 401}, {"bearer-space", "Bearer ", 401}, {"token-plus-x", "Bearer {{admin_token}}x", 401},
		{"token-prefix", "Bearer " + "testkit-admin", 401}, {"huge", "Bearer " + long(64<<10), 401},
		{"tab-inside", "Bearer testkit-admin\ttoken", 401}, {"two-tokens", "Bearer wrong, Bearer {{admin_token}}", 401},
		{"lowercase-scheme", "bearer {{admin_token}}", 200}, {"padded", "Bearer   {{admin_token}}  ", 200},
	} {
		hdr := http.Header{}
		if a.auth != "" {
			hdr.Set("Authorization", a.auth)
		}
		add(hcase{name: "admin-token/list/" + a.label, admin: true, path: "/api/v1/approvals", header: hdr, status: a.status})
	}
	for _, p := range []string{"/api/v1/approvals/tg_00000000-0000-4000-8000-000000000000/approve", "/api/v1/approvals/tg_00000000-0000-4000-8000-000000000000/reject"} {
		add(hcase{name: "admin-token/decide-without" + p[strings.LastIndex(p, "/"):], admin: true, method: http.MethodPost, path: p,
			header: http.Header{"Authorization": {"Bearer wrong"}, "Content-Type": {"application/json"}}, body: []byte(`{"reason":"x"}`), status: 401})
	}
	add(hcase{name: "admin-token/query-string", admin: true, path: "/api/v1/approvals?access_token=" + "testkit-admin-token", status: 401})

	// Bodies at and over server.max_body_bytes.
	// Exactly server.max_body_bytes once {{marker}} is replaced: accepted and forwarded.
	const atName = "size/at-limit"
	prefix := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"{{marker}}","pad":"`
	const tail = `"}}}`
	atLimit := prefix + long(corpusMaxBody-(len(prefix)-len("{{marker}}")+len(markerFor(atName)))-len(tail)) + tail
	add(hcase{name: atName, body: []byte(atLimit), status: 200, result: true, upstream: "seen"})
	for _, n := range []int{corpusMaxBody + 1, 1 << 20, 4 << 20} {
		add(refused(fmt.Sprintf("size/over-%d", n), toolsCall(`{"name":"echo","arguments":{"text":"{{marker}}","pad":"`+long(n)+`"}}`),
			http.StatusRequestEntityTooLarge, "-32600", "RequestTooLarge"))
	}

	// Huge and deep JSON.
	deep := func(n int) string { return strings.Repeat("[", n) + "1" + strings.Repeat("]", n) }
	add(refused("deep/args-20000", toolsCall(`{"name":"echo","arguments":{"text":"{{marker}}","d":`+deep(20000)+`}}`), 200, "-32602", "InvalidParams"))
	add(refused("deep/meta-20000", toolsCall(`{"name":"echo","arguments":{"text":"{{marker}}"},"_meta":{"d":`+deep(20000)+`}}`), 200, "-32602", "InvalidParams"))
	add(hcase{name: "deep/args-200-forwarded", body: []byte(toolsCall(`{"name":"echo","arguments":{"text":"{{marker}}","d":` + deep(200) + `}}`)),
		status: 200, result: true, upstream: "seen"})
	// Cedar bounds its input (depth 32, 10000 values): beyond them evaluation fails closed.
	add(refused("deep/cedar-depth-33", toolsCall(`{"name":"transfer_funds","arguments":{"currency":"USD","from_account":"a","to_account":"{{marker}}","amount":10,"d":`+deep(33)+`},"task":{"ttl":60000}}`), 200, "-32003", "PolicyDenied"))
	add(refused("deep/cedar-many-values", toolsCall(`{"name":"transfer_funds","arguments":{"currency":"USD","from_account":"a","to_account":"{{marker}}","amount":10,"l":[`+strings.Repeat("1,", 10001)+`1]},"task":{"ttl":60000}}`), 200, "-32003", "PolicyDenied"))
	return out
}
