package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCheckNames(t *testing.T) {
	tests := []struct {
		name, in string
		ok       bool
	}{
		{"flat distinct", `{"amount":10,"currency":"USD"}`, true},
		{"same name in sibling objects", `{"a":{"x":1},"b":{"X":2}}`, true},
		{"same name at two depths", `{"x":{"X":{"x":1}}}`, true},
		{"case-variant value strings", `{"a":"amount","b":"Amount"}`, true},
		{"array of strings", `["a","A",{"a":1}]`, true},
		{"empty objects", `{"":{},"x":[]}`, true},
		{"scalars", `1`, true},
		{"top-level case variant", `{"amount":10,"Amount":100000}`, false},
		{"upper case", `{"amount":10,"AMOUNT":100000}`, false},
		{"variant first", `{"Amount":100000,"amount":10}`, false},
		{"depth 2", `{"transfer":{"amount":10,"aMount":1}}`, false},
		{"depth 3 in array", `{"list":[{"ok":1},{"x":{"k":1,"K":2}}]}`, false},
		{"kelvin sign", "{\"k\":1,\"\u212a\":2}", false},
		{"long s", "{\"s\":1,\"\u017f\":2}", false},
		{"kelvin vs upper K", "{\"K\":1,\"\u212a\":2}", false},
		{"greek sigma forms", "{\"\u03c3\":1,\"\u03c2\":2}", false},
		{"escaped variant", `{"amount":1,"\u0041mount":2}`, false},
		{"duplicate", `{"a":1,"a":2}`, false},
		{"duplicate via escape", `{"a":1,"\u0061":2}`, false},
		{"duplicate deep", `[{"x":{"a":1,"a":2}}]`, false},
		{"invalid utf-8 in name", "{\"a\xff\":1}", false},
		{"invalid utf-8 in value", "{\"a\":\"\xff\"}", false},
		{"trailing garbage", `{"a":1} x`, false},
		{"unterminated", `{"a":`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckNames([]byte(tt.in))
			if (err == nil) != tt.ok {
				t.Fatalf("CheckNames(%s) = %v, want ok=%v", tt.in, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrAmbiguous) {
				t.Errorf("error %v does not wrap ErrAmbiguous", err)
			}
		})
	}
}

// Every pair CheckNames refuses is one encoding/json binds to the same struct field, and
// every pair it accepts binds to different ones (or none): the check is exactly as wide as
// the decoder it protects against.
func TestCheckNamesMatchesEncodingJSON(t *testing.T) {
	var target struct {
		Key  int `json:"key"`
		Sum  int `json:"sum"`
		Wide int `json:"ǅx"` // U+01C5, a title-case letter with a three-rune orbit
	}
	pairs := [][2]string{
		{"key", "KEY"}, {"key", "\u212aey"}, {"sum", "\u017fum"}, {"sum", "SUM"},
		{"ǅx", "ǆx"}, {"ǅx", "ǄX"}, {"key", "keys"}, {"key", "kéy"}, {"sum", "sun"},
	}
	for _, p := range pairs {
		in := `{"` + p[0] + `":1,"` + p[1] + `":2}`
		target.Key, target.Sum, target.Wide = 0, 0, 0
		if err := json.Unmarshal([]byte(in), &target); err != nil {
			t.Fatal(err)
		}
		sameField := target.Key == 2 || target.Sum == 2 || target.Wide == 2
		refused := CheckNames([]byte(in)) != nil
		if sameField != refused {
			t.Errorf("%s: encoding/json binds both to one field: %v; CheckNames refuses: %v", in, sameField, refused)
		}
	}
}

func TestFoldNameAgreesWithEqualFold(t *testing.T) {
	words := []string{"", "a", "A", "k", "K", "\u212a", "s", "S", "\u017f", "ß", "ẞ", "\u03a3", "\u03c3", "\u03c2",
		"ǅ", "ǆ", "Ǆ", "µ", "\u039c", "\u03bc", "İ", "i", "ı", "I", "amount", "AMOUNT", "aMoUnT", "amounts", "日本"}
	for _, a := range words {
		for _, b := range words {
			if got, want := FoldName(a) == FoldName(b), strings.EqualFold(a, b); got != want {
				t.Errorf("FoldName(%q)==FoldName(%q) is %v, strings.EqualFold says %v", a, b, got, want)
			}
		}
	}
}

func FuzzCheckNames(f *testing.F) {
	for _, s := range []string{`{"a":1,"A":2}`, `{"x":[{"k":1,"\u212a":2}]}`, `{"a":{"b":1},"c":[1,{"d":2}]}`, "{\"\xff\":1}", `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := CheckNames(b)
		if err != nil {
			return
		}
		// Accepted input is valid JSON in which no object has two names that fold together.
		var v any
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if dec.Decode(&v) != nil || dec.More() {
			t.Fatalf("accepted invalid JSON %q", b)
		}
		var walk func(v any)
		walk = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				seen := map[string]bool{}
				for k, x := range v {
					if seen[FoldName(k)] {
						t.Fatalf("accepted folding names in %q", b)
					}
					seen[FoldName(k)] = true
					walk(x)
				}
			case []any:
				for _, x := range v {
					walk(x)
				}
			}
		}
		walk(v)
	})
}
