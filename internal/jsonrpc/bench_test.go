package jsonrpc

import (
	"encoding/json"
	"testing"
)

var smallCall = []byte(`{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"get_weather","arguments":{"city":"Zürich","units":"metric"},"_meta":{"progressToken":"p-17"}}}`)

func BenchmarkParse(b *testing.B) {
	for _, bm := range []struct {
		name string
		msg  []byte
	}{
		{"small_tools_call", smallCall},
		{"result_1MiB", largeResult(1 << 20)},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.SetBytes(int64(len(bm.msg)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(bm.msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkWithID(b *testing.B) {
	for _, bm := range []struct {
		name string
		msg  []byte
	}{
		{"small_tools_call", smallCall},
		{"result_1MiB", largeResult(1 << 20)},
	} {
		m, err := Parse(bm.msg)
		if err != nil {
			b.Fatal(err)
		}
		id := json.RawMessage(`"tg-0123456789"`)
		b.Run(bm.name, func(b *testing.B) {
			b.SetBytes(int64(len(bm.msg)))
			b.ReportAllocs()
			for b.Loop() {
				_ = m.WithID(id)
			}
		})
	}
}
