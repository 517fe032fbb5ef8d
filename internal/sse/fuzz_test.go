package sse

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// parseAll returns the events of b up to io.EOF, or ok=false when the reader reports an error.
func parseAll(b []byte) (evs []*Event, ok bool) {
	r := NewReader(bytes.NewReader(b), 1<<20)
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return evs, true
		}
		if err != nil {
			return nil, false
		}
		evs = append(evs, ev)
	}
}

// meaningful drops events that carry nothing (a block of unknown fields): they encode to a
// lone blank line, which a reader skips.
func meaningful(evs []*Event) []*Event {
	var out []*Event
	for _, ev := range evs {
		if ev.HasID || ev.HasData || ev.Type != "" || ev.Retry != "" || len(ev.Comments) > 0 {
			out = append(out, ev)
		}
	}
	return out
}

func FuzzSSE(f *testing.F) {
	for _, s := range []string{
		"data: a\n\n",
		"data: a\r\n\r\ndata: b\r\r",
		"\xEF\xBB\xBFid: 1\nevent: e\nretry: 10\ndata: x\ndata:  y\n\n",
		":\n\n: ping\n\ndata: x",
		"id\ndata\n\nfoo: bar\n\n",
		"id: a\x00b\ndata: \xEF\xBB\xBF\n\n",
		"data: a\r\r\n\n\r",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		evs, ok := parseAll(b)
		if !ok {
			return
		}
		var wire []byte
		for _, ev := range evs {
			wire = Encode(wire, ev)
		}
		again, ok := parseAll(wire)
		if !ok {
			t.Fatalf("re-encoded stream %q does not parse", wire)
		}
		if want, got := meaningful(evs), meaningful(again); !eventsEqual(got, want) {
			t.Fatalf("input %q\nwire  %q\nwant %v\ngot  %v", b, wire, want, got)
		}
		// Encoding is a fixed point once normalised.
		var wire2 []byte
		for _, ev := range again {
			wire2 = Encode(wire2, ev)
		}
		if !bytes.Equal(wire, wire2) && len(meaningful(evs)) == len(evs) {
			t.Fatalf("Encode not stable: %q vs %q", wire, wire2)
		}
	})
}

// FuzzEncode: whatever an event holds, its encoding reads back as exactly one event (values
// cannot break out of their field), with data line breaks normalised to LF.
func FuzzEncode(f *testing.F) {
	f.Add("1", "message", "10", []byte("x"), "c", true)
	f.Add("a\nb", "t\r", "", []byte("{\r\n}\r"), "x\ry", true)
	f.Add("", "", "", []byte(nil), "", false)
	f.Fuzz(func(t *testing.T, id, typ, retry string, data []byte, comment string, hasData bool) {
		ev := &Event{ID: id, HasID: id != "", Type: typ, Retry: retry, Data: data, HasData: hasData, Comments: []string{comment}}
		evs, ok := parseAll(Encode(nil, ev))
		if !ok || len(evs) != 1 {
			t.Fatalf("Encode(%+v) read back as %d events (ok %v)", ev, len(evs), ok)
		}
		got := evs[0]
		if hasData {
			want := bytes.ReplaceAll(bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n")), []byte("\r"), []byte("\n"))
			if !got.HasData || !bytes.Equal(got.Data, want) {
				t.Fatalf("data %q read back as %q", data, got.Data)
			}
		} else if got.HasData {
			t.Fatal("data appeared")
		}
		// Readers ignore an id holding NUL (WHATWG), so such an id does not come back.
		wantID := ev.HasID && !bytes.Contains([]byte(id), []byte{0})
		if got.HasID != wantID || (wantID && got.ID != stripBreaks(id)) {
			t.Fatalf("id %q read back as %q", id, got.ID)
		}
		if got.Type != stripBreaks(typ) || got.Retry != stripBreaks(retry) {
			t.Fatalf("type/retry %q/%q read back as %q/%q", typ, retry, got.Type, got.Retry)
		}
	})
}

func stripBreaks(s string) string {
	return string(bytes.ReplaceAll(bytes.ReplaceAll([]byte(s), []byte("\r"), nil), []byte("\n"), nil))
}
