package jsonrpc

import (
	"encoding/json"
	"testing"
)

// TestDecodeErrorKeepsData: JSON-RPC 2.0 §5.1 lets "data" be any value. An object is read
// into Data (so Tollgate can add correlation_id and taskId); anything else is written back
// byte for byte, unescaped, and never gains members.
func TestDecodeErrorKeepsData(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		wantName       string
	}{
		{"object", `{"code":-32050,"message":"m","data":{"error":"Quota","n":1}}`, `{"code":-32050,"message":"m","data":{"error":"Quota","n":1,"correlation_id":"c1"}}`, "Quota"},
		{"string", `{"code":-32050,"message":"m","data":"a <b> & c"}`, `{"code":-32050,"message":"m","data":"a <b> & c"}`, ""},
		{"number", `{"code":-32050,"message":"m","data": 4.5e1 }`, `{"code":-32050,"message":"m","data":4.5e1}`, ""},
		{"array", `{"code":-32050,"message":"m","data":["x",{"y":null}]}`, `{"code":-32050,"message":"m","data":["x",{"y":null}]}`, ""},
		{"bool", `{"code":-32050,"message":"m","data":false}`, `{"code":-32050,"message":"m","data":false}`, ""},
		{"null", `{"code":-32050,"message":"m","data":null}`, `{"code":-32050,"message":"m","data":{"correlation_id":"c1"}}`, ""},
		{"absent", `{"code":-32050,"message":"m"}`, `{"code":-32050,"message":"m","data":{"correlation_id":"c1"}}`, ""},
		{"unreadable", `{"code":"x","message":"m"}`, `{"code":-32603,"message":"{\"code\":\"x\",\"message\":\"m\"}","data":{"correlation_id":"c1","error":"UpstreamError"}}`, "UpstreamError"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := DecodeError(json.RawMessage(tc.in))
			if e.Name() != tc.wantName {
				t.Errorf("Name() = %q, want %q", e.Name(), tc.wantName)
			}
			got, err := json.Marshal(e.WithCorrelation("c1"))
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			if json.Unmarshal(got, &g) != nil || json.Unmarshal([]byte(tc.want), &w) != nil {
				t.Fatalf("not JSON: %s", got)
			}
			gb, _ := json.Marshal(g)
			wb, _ := json.Marshal(w)
			if string(gb) != string(wb) {
				t.Errorf("encoded %s, want %s", got, tc.want)
			}
			// A stored task's error survives the store's JSON round trip unchanged.
			var back Error
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatal(err)
			}
			again, _ := json.Marshal(&back)
			if string(again) != string(got) {
				t.Errorf("round trip %s, was %s", again, got)
			}
		})
	}
}

// TestErrorRawDataUnescaped: non-object data is written verbatim, never HTML-escaped.
func TestErrorRawDataUnescaped(t *testing.T) {
	e := DecodeError(json.RawMessage(`{"code":1,"message":"<m>","data":"<&>"}`))
	got := string(ErrorResponse(json.RawMessage(`7`), e))
	if want := `{"jsonrpc":"2.0","id":7,"error":{"code":1,"message":"<m>","data":"<&>"}}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
