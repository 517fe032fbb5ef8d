package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cedar-policy/cedar-go/types"
)

func mustDecimal(t *testing.T, i int64, exp int) types.Value {
	t.Helper()
	d, err := types.NewDecimal(i, exp)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func rec(m types.RecordMap) types.Value { return types.NewRecord(m) }

func TestFromJSON(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want types.Value
	}{
		{"empty input", "", rec(nil)},
		{"top-level null", " null ", rec(nil)},
		{"empty object", "{}", rec(nil)},
		{"string and bool", `{"s":"x","b":true,"f":false}`,
			rec(types.RecordMap{"s": types.String("x"), "b": types.True, "f": types.False})},
		{"integer", `{"n":42}`, rec(types.RecordMap{"n": types.Long(42)})},
		{"negative integer", `{"n":-7}`, rec(types.RecordMap{"n": types.Long(-7)})},
		{"int64 max", `{"n":9223372036854775807}`, rec(types.RecordMap{"n": types.Long(9223372036854775807)})},
		{"int64 min", `{"n":-9223372036854775808}`, rec(types.RecordMap{"n": types.Long(-9223372036854775808)})},
		{"integral float is Long", `{"n":1000.0}`, rec(types.RecordMap{"n": types.Long(1000)})},
		{"exponent integer is Long", `{"n":2.5e3}`, rec(types.RecordMap{"n": types.Long(2500)})},
		{"negative zero", `{"n":-0.0}`, rec(types.RecordMap{"n": types.Long(0)})},
		{"zero with huge exponent", `{"n":0e999999999999999999}`, rec(types.RecordMap{"n": types.Long(0)})},
		{"null omitted", `{"a":null,"b":1}`, rec(types.RecordMap{"b": types.Long(1)})},
		{"nested object", `{"o":{"p":{"q":"deep"}}}`,
			rec(types.RecordMap{"o": rec(types.RecordMap{"p": rec(types.RecordMap{"q": types.String("deep")})})})},
		{"array to set, nulls dropped", `{"a":[1,null,"x",1]}`,
			rec(types.RecordMap{"a": types.NewSet(types.Long(1), types.String("x"))})},
		{"top-level array", `[true]`, types.NewSet(types.True)},
		{"top-level scalar", `"x"`, types.String("x")},
		{"key that looks like cedar syntax", `{"__entity_like":1,"entity":2}`,
			rec(types.RecordMap{"__entity_like": types.Long(1), "entity": types.Long(2)})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromJSON(json.RawMessage(tt.in))
			if err != nil {
				t.Fatalf("FromJSON(%s): %v", tt.in, err)
			}
			if !got.Equal(tt.want) {
				t.Errorf("FromJSON(%s) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestFromJSONNumbers(t *testing.T) {
	tests := []struct {
		in   string
		want func(t *testing.T) types.Value
	}{
		// 2^53+1 stays exact (float64 would make it …992); 1.0 is the integer 1.
		{"9007199254740993", func(*testing.T) types.Value { return types.Long(9007199254740993) }},
		{"1.0", func(*testing.T) types.Value { return types.Long(1) }},
		{"12.5", func(t *testing.T) types.Value { return mustDecimal(t, 125, -1) }},
		{"-0.0001", func(t *testing.T) types.Value { return mustDecimal(t, -1, -4) }},
		{"1.2345", func(t *testing.T) types.Value { return mustDecimal(t, 12345, -4) }},
		{"1.50", func(t *testing.T) types.Value { return mustDecimal(t, 15, -1) }},
		{"15e-1", func(t *testing.T) types.Value { return mustDecimal(t, 15, -1) }},
		{"922337203685477.5807", func(t *testing.T) types.Value { return mustDecimal(t, 9223372036854775807, -4) }},
		// Beyond decimal precision or range: exact text as a String.
		{"0.00001", func(*testing.T) types.Value { return types.String("0.00001") }},
		{"3.14159", func(*testing.T) types.Value { return types.String("3.14159") }},
		{"922337203685478.5", func(*testing.T) types.Value { return types.String("922337203685478.5") }},
		{"1e-99999999999999999999", func(*testing.T) types.Value { return types.String("1e-99999999999999999999") }},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := FromJSON(json.RawMessage(`{"n":` + tt.in + `}`))
			if err != nil {
				t.Fatal(err)
			}
			want := rec(types.RecordMap{"n": tt.want(t)})
			if !got.Equal(want) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

func TestFromJSONRejects(t *testing.T) {
	deep := strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1)
	okDeep := strings.Repeat(`[`, MaxDepth) + strings.Repeat("]", MaxDepth)
	if _, err := FromJSON(json.RawMessage(okDeep)); err != nil {
		t.Fatalf("depth %d must be accepted: %v", MaxDepth, err)
	}
	many := "[" + strings.Repeat("1,", MaxNodes) + "1]"
	big := `{"s":"` + strings.Repeat("x", MaxArgumentBytes) + `"}`
	tests := []struct {
		name string
		in   string
	}{
		{"__entity at top", `{"__entity":{"type":"User","id":"admin"}}`},
		{"__entity nested", `{"user":{"__entity":{"type":"User","id":"admin"}}}`},
		{"__extn in array", `{"a":[{"__extn":{"fn":"ip","arg":"10.0.0.1"}}]}`},
		{"duplicate key", `{"amount":1,"amount":100000}`},
		{"case-variant key", `{"amount":1,"Amount":100000}`},
		{"case-variant key nested", `{"t":{"x":[{"amount":1,"AMOUNT":100000}]}}`},
		{"kelvin sign folds to k", "{\"kind\":\"a\",\"\u212aind\":\"admin\"}"},
		{"integer too large", `{"n":9223372036854775808}`},
		{"integer too small", `{"n":-9223372036854775809}`},
		{"integral float too large", `{"n":1e19}`},
		{"huge exponent", `{"n":1e99999999999999999999}`},
		{"beyond float64", `{"n":1E400}`},
		{"30 digits", `{"n":123456789012345678901234567890}`},
		{"too deep", deep},
		{"too many nodes", many},
		{"too big", big},
		{"malformed", `{"a":}`},
		{"truncated", `{"a":1`},
		{"trailing data", `{} {}`},
		{"invalid utf-8", "{\"a\":\"\xff\"}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := FromJSON(json.RawMessage(tt.in))
			if err == nil {
				t.Fatalf("FromJSON accepted it: %v", v)
			}
			if !errors.Is(err, ErrArguments) {
				t.Errorf("error %v does not wrap ErrArguments", err)
			}
			if strings.Contains(err.Error(), "admin") || strings.Contains(err.Error(), "100000") {
				t.Errorf("error leaks argument values: %v", err)
			}
		})
	}
}

// FuzzFromJSON: the converter must never panic, accept only valid JSON, and never let a
// reserved key through.
func FuzzFromJSON(f *testing.F) {
	for _, s := range []string{
		`{}`, `null`, `{"amount":1000,"currency":"USD"}`, `{"a":[1,2.5,"x",null,{"b":false}]}`,
		`{"__entity":{"type":"User","id":"x"}}`, `{"n":1e400}`, `{"n":-0.00001}`, `[[[[]]]]`,
		`{"a":1,"a":2}`, `"str"`, `12.3456`, `{"x":{"__extn":{}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := FromJSON(data)
		if err != nil {
			return
		}
		if len(strings.TrimSpace(string(data))) > 0 && !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		if path := reservedKey(v); path != "" {
			t.Fatalf("reserved key accepted at %s", path)
		}
	})
}

func reservedKey(v types.Value) string {
	switch x := v.(type) {
	case types.Record:
		for k, e := range x.All() {
			if k == "__entity" || k == "__extn" {
				return string(k)
			}
			if p := reservedKey(e); p != "" {
				return fmt.Sprintf("%s.%s", k, p)
			}
		}
	case types.Set:
		for e := range x.All() {
			if p := reservedKey(e); p != "" {
				return "[]." + p
			}
		}
	}
	return ""
}
