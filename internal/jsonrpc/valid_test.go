package jsonrpc

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// jsontextValid is the well-formedness check the relay ran before ParseChecked (a second scan
// of every reply); Valid and ParseChecked must agree with it exactly.
func jsontextValid(b []byte) bool {
	return jsontext.Value(b).IsValid(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
}

// validSeeds are the edges of the grammar: each either side of what jsontext accepts.
var validSeeds = []string{
	`0`, `-0`, `-`, `01`, `1.`, `1.5`, `.5`, `1e`, `1e+`, `1E-07`, `-1.5e3`, `1ex`, `2x`, `+1`,
	`true`, `tru`, `truex`, `null`, `nul`, `false`, `falsey`,
	`""`, `"a`, `"\"`, `"\\"`, `"\/\b\f\n\r\t"`, `"\u00e9"`, `"\u00G9"`, `"\u12"`, `"\x"`, `"\'"`,
	`"\ud800"`, `"\udc00\ud800"`, `"\ud83d\ude00"`, "\"a\xffb\"", "\"\xe2\x82\"", "\"tab\there\"", "\"\x7f\"",
	"\"\x1f\"", "\"0123456789abcdef\x01xyz\"", `"0123456789abcdef\\0123456789abcdef"`,
	`[]`, `[ ]`, `[1,]`, `[,1]`, `[1 2]`, `[1,2]`, `{}`, `{ }`, `{"a":1,}`, `{"a" 1}`, `{"a":}`, `{1:2}`,
	`{"a":1,"a":2}`, `[}`, `{]`, `[[[]]]`, `[[[]]`, `{"a":[{"b":{}}]}`, " \t\r\n[1]\n", `[1] x`, `[1]]`,
	"\xef\xbb\xbf{}", "", " ", "{\"a\":\"b\"\x00}",
	`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":tru}]}}`,
	`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"x"}]},"x":1x}`,
	`{"jsonrpc":"2.0","id":7,"result":{},"x":01}`,
	`{"jsonrpc":"2.0","id":7,"result":{"a":"\q"}}`,
	`{"jsonrpc":"2.0","id":7,"re\qsult":{}}`,
	`{"jsonrpc":"2.0","id":"\ud800","result":{}}`,
	`{"jsonrpc":"2.0","id":7,"error":{"code":1,"message":"m","data":[1,2,{"x":null}]}}`,
}

// nested is depth levels of arrays around a 0.
func nested(depth int) string { return strings.Repeat("[", depth) + "0" + strings.Repeat("]", depth) }

func TestValidMatchesJSONText(t *testing.T) {
	cases := append([]string(nil), validSeeds...)
	cases = append(cases, fuzzSeeds...)
	for _, d := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
		cases = append(cases, nested(d), `{"jsonrpc":"2.0","id":1,"result":`+nested(d-1)+`}`)
	}
	for _, c := range cases {
		b := []byte(c)
		if got, want := Valid(b), jsontextValid(b); got != want {
			t.Errorf("Valid(%.60q) = %v, jsontext %v", c, got, want)
		}
		checkParseChecked(t, b)
	}
}

// checkParseChecked holds ParseChecked to Parse (same message or same error) and, for a
// message, its ValidJSON to jsontext.
func checkParseChecked(t *testing.T, b []byte) {
	t.Helper()
	m1, err1 := Parse(b)
	m2, err2 := ParseChecked(b)
	if fmt.Sprint(err1) != fmt.Sprint(err2) {
		t.Fatalf("%.60q: Parse error %v, ParseChecked error %v", b, err1, err2)
	}
	if err1 != nil {
		return
	}
	if m1.Kind != m2.Kind || m1.Method != m2.Method || !bytes.Equal(m1.ID, m2.ID) || !bytes.Equal(m1.Params, m2.Params) ||
		!bytes.Equal(m1.Result, m2.Result) || !bytes.Equal(m1.Error, m2.Error) || m1.id != m2.id || m1.result != m2.result {
		t.Fatalf("%.60q: ParseChecked read another message than Parse", b)
	}
	if got, want := m2.ValidJSON(), jsontextValid(b); got != want {
		t.Fatalf("%.60q: ParseChecked ValidJSON %v, jsontext %v", b, got, want)
	}
	if m1.ValidJSON() != m2.ValidJSON() {
		t.Fatalf("%.60q: ValidJSON after Parse differs from after ParseChecked", b)
	}
}

// FuzzValid is the differential test of the one-pass check: Valid against jsontext, and
// ParseChecked against Parse followed by jsontext (the two scans it replaces).
func FuzzValid(f *testing.F) {
	for _, s := range validSeeds {
		f.Add([]byte(s))
	}
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), jsontextValid(b); got != want {
			t.Fatalf("Valid(%q) = %v, jsontext %v", b, got, want)
		}
		checkParseChecked(t, b)
	})
}

// TestValidLongStrings: the long-string path (windows, bulk control check) agrees with
// jsontext around its boundaries: a quote, backslash or control character at every offset
// from the 64th byte to past the first window.
func TestValidLongStrings(t *testing.T) {
	for _, stop := range []string{`"`, `\"`, `\\`, `\n`, `\u00e9`, `\x`, "\x01", "\x1f", "\x7f", "\xff", `\`} {
		for n := 56; n < 64+longWindow+80; n++ {
			s := strings.Repeat("a", n) + stop + strings.Repeat("b", 70)
			for _, msg := range []string{`"` + s + `"`, `{"k":"` + s + `","x":[1]}`, `["` + s} {
				b := []byte(msg)
				if got, want := Valid(b), jsontextValid(b); got != want {
					t.Fatalf("stop %q at %d in %.20q…: Valid %v, jsontext %v", stop, n, msg, got, want)
				}
			}
		}
	}
	long := `"` + strings.Repeat(`0123456789abcdef\n\"`, 1<<14) + `"`
	if !Valid([]byte(long)) {
		t.Fatal("a long string with escapes throughout is valid")
	}
}
