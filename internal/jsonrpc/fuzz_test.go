package jsonrpc

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

var fuzzSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":[1,"b",{"c":null}]}}}`,
	`{"jsonrpc":"2.0","id":"abc","method":"tools/list"}`,
	`{"id":9007199254740993,"method":"m"}`,
	`{"id":-1.5e-3,"method":"m"}`,
	`{"id":"a\"\u00e9\\","method":"t\u006fols/call"}`,
	`{"id":null,"method":"notifications/x"}`,
	`{"method":"notifications/initialized"}`,
	`{"jsonrpc":"2.0","id":7,"result":{"content":[]},"_meta":{"x":1}}`,
	`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}`,
	" \t\r\n{ \"id\" \n:\t 5 ,\r\n \"method\" : \"m\" } \n",
	`{"id":1,"method":"m","Method":"x"}`,
	`{"id":1,"id":2,"method":"m"}`,
	`{"x":1,"x":2,"method":"m"}`,
	`[{"id":1,"method":"m"}]`,
	`{"id":1,"method":"m","params":{"a":[}]}`,
	`{}`, `{"a\`, `{"id":"\x"}`, "{\"method\":\"a\xffb\"}",
}

// protocolView is how a Go upstream (encoding/json) reads a message.
type protocolView struct {
	ID     json.RawMessage `json:"id"`
	Method *string         `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	ids := []json.RawMessage{json.RawMessage(`"tg-1"`), json.RawMessage(`12345678901234567890`), json.RawMessage(`-0.5`)}
	f.Fuzz(func(t *testing.T, b []byte) {
		orig := append([]byte(nil), b...)
		m, err := Parse(b)
		if !bytes.Equal(b, orig) {
			t.Fatal("Parse modified its input")
		}
		if err != nil {
			if m != nil {
				t.Fatal("Parse returned a message with an error")
			}
			return
		}
		if m.Kind == KindInvalid {
			t.Fatal("Parse succeeded with KindInvalid")
		}
		if m.ID != nil && !json.Valid(m.ID) {
			t.Fatalf("accepted invalid id %q", m.ID)
		}
		// Restoring the id the message already has is the identity.
		if m.ID != nil && !bytes.Equal(m.WithID(m.ID), b) {
			t.Fatal("WithID(own id) changed the message")
		}
		for _, id := range ids {
			out := m.WithID(id)
			if !bytes.Equal(m.Raw, orig) {
				t.Fatal("WithID modified Raw")
			}
			if m.ID == nil {
				if !bytes.Equal(out, b) {
					t.Fatal("WithID added an id")
				}
				continue
			}
			if !bytes.Equal(out[:m.id.start], b[:m.id.start]) || !bytes.Equal(out[m.id.start+len(id):], b[m.id.end:]) {
				t.Fatalf("WithID changed bytes outside the id: %q -> %q", b, out)
			}
			m2, err := Parse(out)
			if err != nil {
				t.Fatalf("Parse(WithID(%s)) of %q: %v", id, out, err)
			}
			if !bytes.Equal(m2.ID, id) || m2.Method != m.Method || !bytes.Equal(m2.Params, m.Params) ||
				!bytes.Equal(m2.Result, m.Result) || !bytes.Equal(m2.Error, m.Error) {
				t.Fatalf("WithID changed other members: %+v vs %+v", m2, m)
			}
			if m.Kind != KindNotification && m2.Kind != m.Kind {
				t.Fatalf("WithID changed Kind %v -> %v", m.Kind, m2.Kind)
			}
			// And back again, byte for byte, as the proxy restores the client's id.
			if back := m2.WithID(m.ID); !bytes.Equal(back, b) {
				t.Fatalf("id round trip: %q -> %q", b, back)
			}
		}
		if !json.Valid(b) {
			return
		}
		// Valid JSON: Tollgate must read exactly what encoding/json reads.
		var v protocolView
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("encoding/json refused what Parse accepted: %v", err)
		}
		if (v.Method != nil) != (m.Kind != KindResponse) {
			t.Fatalf("method presence differs: %v vs %v", v.Method != nil, m.Kind)
		}
		if v.Method != nil && *v.Method != m.Method {
			t.Fatalf("Method %q, encoding/json %q", m.Method, *v.Method)
		}
		for _, p := range [][2]json.RawMessage{{m.ID, v.ID}, {m.Params, v.Params}, {m.Result, v.Result}, {m.Error, v.Error}} {
			if !bytes.Equal(p[0], p[1]) {
				t.Fatalf("member %q, encoding/json %q", p[0], p[1])
			}
		}
	})
}

func FuzzReplace(f *testing.F) {
	f.Add([]byte(`{}`), "a", []byte(`1`))
	f.Add([]byte(` { } `), "task", []byte(`{"ttl":1}`))
	f.Add([]byte(`{"a":1,"b":[2]}`), "b", []byte(`"x"`))
	f.Add([]byte(`{"a":1,"a":2}`), "a", []byte(`null`))
	f.Add([]byte(`{"\u0061":1}`), "a", []byte(`true`))
	f.Add([]byte(`{"x":1}`), `<"&>`, []byte(`[]`))
	f.Add([]byte(`[]`), "a", []byte(`1`))
	f.Fuzz(func(t *testing.T, b []byte, key string, value []byte) {
		orig := append([]byte(nil), b...)
		out, err := Replace(b, key, value)
		if !bytes.Equal(b, orig) {
			t.Fatal("Replace modified its input")
		}
		if err != nil {
			return
		}
		// The result must never alias the input.
		if len(out) > 0 && len(b) > 0 && &out[0] == &b[0] {
			t.Fatal("Replace returned its input")
		}
		if !json.Valid(value) || len(bytes.TrimSpace(value)) != len(value) || !utf8.ValidString(key) {
			return
		}
		if got := Member(out, key); !bytes.Equal(got, value) {
			t.Fatalf("Member(Replace(%q, %q, %q)) = %q", b, key, value, got)
		}
		// Every other member keeps its bytes and its order.
		before, after := collect(t, b), collect(t, out)
		last := -1
		for i, kv := range before {
			if kv[0] == key {
				last = i
			}
		}
		if last < 0 {
			before = append(before, [2]string{key, string(value)})
		} else {
			before[last][1] = string(value)
		}
		if len(before) != len(after) {
			t.Fatalf("members %q -> %q", before, after)
		}
		for i := range before {
			if before[i] != after[i] {
				t.Fatalf("member %d: want %q, got %q", i, before[i], after[i])
			}
		}
		if json.Valid(b) && !json.Valid(out) {
			t.Fatalf("Replace(%q) made invalid JSON %q", b, out)
		}
	})
}

func collect(t *testing.T, b []byte) [][2]string {
	t.Helper()
	var out [][2]string
	err := members(b, skipWS(b, 0), func(k []byte, v span) error {
		out = append(out, [2]string{string(k), string(b[v.start:v.end])})
		return nil
	})
	if err != nil {
		t.Fatalf("members(%q): %v", b, err)
	}
	return out
}
