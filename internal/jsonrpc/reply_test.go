package jsonrpc

import (
	"encoding/json"
	"testing"
)

func TestSameID(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{`1`, `1`, true},
		{`"a"`, `"a"`, true},
		{`"a"`, `"\u0061"`, true},
		{`9007199254740993`, `9007199254740992`, true}, // float64 round trip of a big id
		{`1`, `1.0`, true},
		{`100`, `1e2`, true},
		{`1`, `"1"`, false},
		{`"1"`, `1`, false},
		{`1`, `2`, false},
		{`"a"`, `"b"`, false},
		{`null`, `1`, false},
		{`null`, `null`, true},
		{``, `1`, false},
		{`1`, ``, false},
		{`"\x"`, `"\x"`, true}, // byte equality needs no decoding
		{`"\x"`, `"x"`, false},
	} {
		if got := SameID(json.RawMessage(tc.a), json.RawMessage(tc.b)); got != tc.want {
			t.Errorf("SameID(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestCheckErrorObject(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{`{"code":-32602,"message":"bad"}`, true},
		{`{"code":1,"message":"m","data":"any"}`, true},
		{`{"message":"m","code":0,"data":{"k":[1]}}`, true},
		{` { "code" : -1 , "message" : "" } `, true},
		{`"boom"`, false},
		{`null`, false},
		{`[]`, false},
		{`{}`, false},
		{`{"message":"m"}`, false},
		{`{"code":1}`, false},
		{`{"code":"1","message":"m"}`, false},
		{`{"code":1.5,"message":"m"}`, false},
		{`{"code":1e3,"message":"m"}`, false},
		{`{"code":99999999999999999999,"message":"m"}`, false},
		{`{"code":1,"message":2}`, false},
		{`{"code":1,"message":null}`, false},
		{`{"code":1,"code":2,"message":"m"}`, false},
		{`{"code":1,"message":"m","message":"n"}`, false},
		{`{"Code":1,"message":"m"}`, false},
		{`{"code":1,"message":"m"`, false},
	} {
		if err := CheckErrorObject([]byte(tc.in)); (err == nil) != tc.ok {
			t.Errorf("CheckErrorObject(%s) = %v, want ok=%v", tc.in, err, tc.ok)
		}
	}
}

// FuzzCheckErrorObject: whatever it accepts, encoding/json decodes as an error with an integer
// code and a string message.
func FuzzCheckErrorObject(f *testing.F) {
	for _, s := range []string{`{"code":-32602,"message":"bad"}`, `{"code":1,"message":"m","data":[{}]}`,
		`{"code":"1","message":"m"}`, `{"code":1.0,"message":"m"}`, `{"code":1,"message":"\u00e9"}`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if CheckErrorObject(b) != nil || !json.Valid(b) {
			return
		}
		var e struct {
			Code    *int64  `json:"code"`
			Message *string `json:"message"`
		}
		if err := json.Unmarshal(b, &e); err != nil || e.Code == nil || e.Message == nil {
			t.Fatalf("accepted %q, but encoding/json reads it as %+v (%v)", b, e, err)
		}
	})
}
