package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func benchRead(b *testing.B, wire []byte) {
	b.SetBytes(int64(len(wire)))
	b.ReportAllocs()
	rd := bytes.NewReader(wire)
	for b.Loop() {
		rd.Reset(wire)
		r := NewReader(rd, 0)
		for {
			if _, err := r.Next(); err != nil {
				if !errors.Is(err, io.EOF) {
					b.Fatal(err)
				}
				break
			}
		}
	}
}

func BenchmarkSSERead(b *testing.B) {
	b.Run("one_1MiB_event", func(b *testing.B) {
		msg := `{"jsonrpc":"2.0","id":1,"result":{"tools":[` + strings.Repeat(`{"name":"t","description":"d"},`, 1<<20/31) + `{}]}}`
		benchRead(b, Encode(nil, &Event{ID: "1", HasID: true, Type: "message", Data: []byte(msg), HasData: true}))
	})
	b.Run("1000_small_events", func(b *testing.B) {
		var wire []byte
		for range 1000 {
			wire = Encode(wire, &Event{ID: "s-1", HasID: true, Data: []byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`), HasData: true})
		}
		benchRead(b, wire)
	})
	b.Run("1000_small_events_CRLF", func(b *testing.B) {
		wire := bytes.Repeat([]byte("id: s-1\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\r\n\r\n"), 1000)
		benchRead(b, wire)
	})
}

func BenchmarkSSEEncode(b *testing.B) {
	for _, bm := range []struct {
		name string
		ev   *Event
	}{
		{"small", Message([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}`))},
		{"1MiB", Message(bytes.Repeat([]byte(`{"type":"text","text":"abcdefghijklmnopqrstuvwxyz"},`), 1<<20/46))},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.SetBytes(int64(len(bm.ev.Data)))
			b.ReportAllocs()
			var dst []byte
			for b.Loop() {
				dst = Encode(dst[:0], bm.ev)
			}
		})
	}
}
