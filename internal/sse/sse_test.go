package sse

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

// readers wraps an input in the ways a network hands bytes over, so line endings and CRLF pairs
// get split across reads.
var readers = []struct {
	name string
	wrap func(io.Reader) io.Reader
}{
	{"whole", func(r io.Reader) io.Reader { return r }},
	{"one byte", iotest.OneByteReader},
	{"half", iotest.HalfReader},
	{"data+err", iotest.DataErrReader},
}

// readAll returns every event up to io.EOF.
func readAll(t testing.TB, r io.Reader, max int) []*Event {
	t.Helper()
	sr := NewReader(r, max)
	var evs []*Event
	for {
		ev, err := sr.Next()
		if errors.Is(err, io.EOF) {
			return evs
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		evs = append(evs, ev)
		if len(evs) > 1<<16 {
			t.Fatal("runaway reader")
		}
	}
}

func data(s string) *Event { return &Event{Data: []byte(s), HasData: true} }

func eventsEqual(a, b []*Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := *a[i], *b[i]
		if len(x.Data) == 0 && len(y.Data) == 0 {
			x.Data, y.Data = nil, nil
		}
		if len(x.Comments) == 0 && len(y.Comments) == 0 {
			x.Comments, y.Comments = nil, nil
		}
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

func TestNext(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []*Event
	}{
		{"LF", "data: a\n\ndata: b\n\n", []*Event{data("a"), data("b")}},
		{"CRLF", "data: a\r\n\r\ndata: b\r\n\r\n", []*Event{data("a"), data("b")}},
		{"lone CR", "data: a\r\rdata: b\r\r", []*Event{data("a"), data("b")}},
		{"mixed endings", "data: a\r\ndata: b\rdata: c\n\r\n" + "data: d\r\r", []*Event{data("a\nb\nc"), data("d")}},
		{"CR then CRLF is two line ends", "data: a\r\r\n", []*Event{data("a")}},
		{"LF CR is two line ends", "data: a\n\rdata: b\n\n", []*Event{data("a"), data("b")}},
		{"multi-line data", "data: {\"a\":\ndata: 1}\n\n", []*Event{data("{\"a\":\n1}")}},
		{"empty data lines", "data\ndata:\ndata: \n\n", []*Event{data("\n\n")}},
		{"only one leading space is removed", "data:  two\n\n", []*Event{data(" two")}},
		{"no space after colon", "data:x\n\n", []*Event{data("x")}},
		{"colons in value", "data: a: b:c\n\n", []*Event{data("a: b:c")}},
		{"all fields", "id: 7\nevent: message\nretry: 3000\ndata: x\n\n", []*Event{{ID: "7", HasID: true, Type: "message", Retry: "3000", Data: []byte("x"), HasData: true}}},
		{"empty id resets", "id:\ndata: x\n\n", []*Event{{HasID: true, Data: []byte("x"), HasData: true}}},
		{"bare id field", "id\ndata: x\n\n", []*Event{{HasID: true, Data: []byte("x"), HasData: true}}},
		{"id with NUL ignored", "id: a\x00b\ndata: x\n\n", []*Event{data("x")}},
		{"last field wins", "id: 1\nid: 2\nevent: a\nevent: b\ndata: x\n\n", []*Event{{ID: "2", HasID: true, Type: "b", Data: []byte("x"), HasData: true}}},
		{"unknown fields ignored", "foo: bar\nData: x\ndata: y\n\n", []*Event{data("y")}},
		{"id-only event", "id: 9\n\n", []*Event{{ID: "9", HasID: true}}},
		{"comment with data", ": hello\ndata: x\n\n", []*Event{{Comments: []string{"hello"}, Data: []byte("x"), HasData: true}}},
		{"keep-alive comment block", ":\n\n: ping\n\ndata: x\n\n", []*Event{{Comments: []string{""}}, {Comments: []string{"ping"}}, data("x")}},
		{"comment keeps extra spaces", ":  two\n\n", []*Event{{Comments: []string{" two"}}}},
		{"leading blank lines skipped", "\n\n\r\n\rdata: x\n\n", []*Event{data("x")}},
		{"BOM at start", "\xEF\xBB\xBFdata: x\n\n", []*Event{data("x")}},
		{"BOM at start of blank line", "\xEF\xBB\xBF\ndata: x\n\n", []*Event{data("x")}},
		{"only the first BOM", "\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\ndata: y\n\n", []*Event{{}, data("y")}},
		{"BOM later is data", "data: a\n\ndata: \xEF\xBB\xBFb\n\n", []*Event{data("a"), data("\xEF\xBB\xBFb")}},
		{"trailing event without blank line discarded", "data: a\n\ndata: b\n", []*Event{data("a")}},
		{"trailing event without any terminator discarded", "data: a\n\ndata: b", []*Event{data("a")}},
		{"trailing id-only event discarded", "data: a\n\nid: 5\n", []*Event{data("a")}},
		{"trailing comment-only block kept", "data: a\n\n: ping\n", []*Event{data("a"), {Comments: []string{"ping"}}}},
		{"trailing comment-only block without terminator kept", ": ping", []*Event{{Comments: []string{"ping"}}}},
		{"trailing lone CR then EOF", "data: a\r", nil},
		{"empty stream", "", nil},
		{"blank lines only", "\n\r\n\r", nil},
		{"JSON with CR inside data stays one line per field", "data: {\"a\":\"x\"}\r\n\r\n", []*Event{data(`{"a":"x"}`)}},
	}
	for _, tt := range tests {
		for _, rd := range readers {
			t.Run(tt.name+"/"+rd.name, func(t *testing.T) {
				got := readAll(t, rd.wrap(strings.NewReader(tt.in)), 0)
				if !eventsEqual(got, tt.want) {
					t.Errorf("got  %v\nwant %v", got, tt.want)
				}
			})
		}
	}
}

// A line end split over two reads of the reader's 32 KiB buffer must still count once: a CRLF
// read as CR + LF would dispatch the event early with half its data.
func TestNextLineEndAtBufferBoundary(t *testing.T) {
	const bufSize = 32 << 10
	for _, end := range []string{"\r\n", "\r", "\n"} {
		for pad := bufSize - 12; pad <= bufSize+4; pad++ {
			// "data: " + pad bytes puts the line end at offset 6+pad: around the buffer edge.
			long := strings.Repeat("x", pad)
			in := "data: " + long + end + "data: tail" + end + end + "data: next" + end + end
			want := []*Event{data(long + "\ntail"), data("next")}
			// One-byte reads never fill the buffer, so only whole and half reads reach its edge.
			for _, rd := range []func(io.Reader) io.Reader{readers[0].wrap, iotest.HalfReader} {
				got := readAll(t, rd(strings.NewReader(in)), 0)
				if !eventsEqual(got, want) {
					t.Fatalf("end %q pad %d: got %d events %.80v", end, pad, len(got), got)
				}
			}
		}
	}
}

// chunkReader returns its chunks one per Read, so a test decides where reads split.
type chunkReader struct{ chunks []string }

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	c.chunks[0] = c.chunks[0][n:]
	if c.chunks[0] == "" {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}

func TestNextCRLFSplitAcrossReads(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		want   []*Event
	}{
		{"CR | LF", []string{"data: a\r", "\ndata: b\r\n\r\n"}, []*Event{data("a\nb")}},
		{"CR | LF CR | LF", []string{"data: a\r", "\n\r", "\n"}, []*Event{data("a")}},
		{"CR | CR", []string{"data: a\r", "\r"}, []*Event{data("a")}},
		{"CR | data", []string{"data: a\r", "data: b\r\r"}, []*Event{data("a\nb")}},
		{"CR | empty reads | LF", []string{"data: a\r", "", "", "\n\n"}, []*Event{data("a")}},
		{"field split", []string{"da", "ta", ":", " ", "x", "\n", "\n"}, []*Event{data("x")}},
		{"BOM split", []string{"\xEF", "\xBB", "\xBFdata: x\n\n"}, []*Event{data("x")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := readAll(t, &chunkReader{chunks: append([]string(nil), tt.chunks...)}, 0)
			if !eventsEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNextLargeLine(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 5<<20/16) // 5 MiB, far above bufio.Scanner's 64 KiB
	in := "event: message\ndata: " + string(big) + "\r\n\r\ndata: after\n\n"
	for _, rd := range []struct {
		name string
		wrap func(io.Reader) io.Reader
	}{readers[0], readers[2]} { // one-byte reads of 5 MiB only cost time
		t.Run(rd.name, func(t *testing.T) {
			got := readAll(t, rd.wrap(strings.NewReader(in)), 0)
			if len(got) != 2 || !bytes.Equal(got[0].Data, big) || got[0].Type != "message" || string(got[1].Data) != "after" {
				t.Fatalf("got %d events", len(got))
			}
		})
	}
}

func TestNextLineTooLong(t *testing.T) {
	for _, in := range []string{
		"data: " + strings.Repeat("x", 100) + "\n\n",
		"data: " + strings.Repeat("x", 100), // no terminator
		strings.Repeat("x", 40<<10) + "\n",  // longer than the read buffer
	} {
		_, err := NewReader(strings.NewReader(in), 64).Next()
		if !errors.Is(err, ErrLineTooLong) {
			t.Errorf("Next = %v, want ErrLineTooLong", err)
		}
	}
	// At the limit is fine.
	ev, err := NewReader(strings.NewReader("data: "+strings.Repeat("x", 58)+"\n\n"), 64).Next()
	if err != nil || len(ev.Data) != 58 {
		t.Errorf("line at the limit: %v, %v", ev, err)
	}
}

func TestNextReadError(t *testing.T) {
	boom := errors.New("connection reset")
	r := NewReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom)), 0)
	if ev, err := r.Next(); err != nil || string(ev.Data) != "a" {
		t.Fatalf("first event: %v, %v", ev, err)
	}
	if ev, err := r.Next(); !errors.Is(err, boom) {
		t.Fatalf("Next = %v, %v; want the read error", ev, err)
	}
}

func TestNextDataNotAliased(t *testing.T) {
	r := NewReader(strings.NewReader("data: first\n\ndata: second\n\n"), 0)
	a, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if string(a.Data) != "first" {
		t.Errorf("first event's data changed to %q", a.Data)
	}
}

func TestEncode(t *testing.T) {
	tests := []struct {
		name string
		ev   *Event
		want string
	}{
		{"message", Message([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)), "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"},
		{"empty data", &Event{HasData: true}, "data: \n\n"},
		{"multi-line data", data("a\nb\n"), "data: a\ndata: b\ndata: \n\n"},
		{"keep-alive", Comment(""), ":\n\n"},
		{"comment", Comment("ping"), ": ping\n\n"},
		{"all fields in order", &Event{ID: "e-1", HasID: true, Type: "message", Retry: "500", Data: []byte("x"), HasData: true, Comments: []string{"c"}},
			": c\nid: e-1\nevent: message\nretry: 500\ndata: x\n\n"},
		{"empty id", &Event{HasID: true, Data: []byte("x"), HasData: true}, "id: \ndata: x\n\n"},
		{"nothing", &Event{}, "\n"},
		// Line breaks inside values must not end the field: a JSON message may carry CR or
		// CRLF as whitespace, and a raw CR would otherwise start a new field or event.
		{"CRLF in data", data("{\r\n\"a\":1\r\n}"), "data: {\ndata: \"a\":1\ndata: }\n\n"},
		{"lone CR in data", data("{\"a\":1,\r\"b\":2}"), "data: {\"a\":1,\ndata: \"b\":2}\n\n"},
		{"injection attempt in data", data("x\r\rid: evil\r\rdata: forged"), "data: x\ndata: \ndata: id: evil\ndata: \ndata: data: forged\n\n"},
		{"newline in comment", &Event{Comments: []string{"a\nb\r\rc"}}, ": a\n: b\n:\n: c\n\n"},
		{"newlines in id, type, retry dropped", &Event{ID: "a\nb", HasID: true, Type: "m\r\nx", Retry: "1\r0"}, "id: ab\nevent: mx\nretry: 10\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Encode(nil, tt.ev)
			if string(got) != tt.want {
				t.Fatalf("Encode = %q, want %q", got, tt.want)
			}
			if s := tt.ev.String(); s != strconv.Quote(tt.want) {
				t.Errorf("String() = %s", s)
			}
		})
	}
}

func TestEncodeAppends(t *testing.T) {
	dst := []byte("prefix")
	if got := Encode(dst, Comment("x")); string(got) != "prefix: x\n\n" {
		t.Errorf("Encode appended %q", got)
	}
}

func TestEncodeNextRoundTrip(t *testing.T) {
	events := []*Event{
		Message([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`)),
		Comment(""),
		Comment(" leading space"),
		{ID: "0123", HasID: true, Data: []byte("a\nb"), HasData: true},
		{HasID: true, Data: []byte(""), HasData: true},
		{Type: "endpoint", Data: []byte("/mcp?s=1"), HasData: true},
		{Retry: "1000", Comments: []string{"c1", "c2"}, Data: []byte("\n\n"), HasData: true},
		{ID: "only-id", HasID: true},
		data(" spaced "),
		data(string(bytes.Repeat([]byte{'z'}, 100<<10))),
		data("\xEF\xBB\xBFbom"),
		data("x:y"),
	}
	var wire []byte
	for _, ev := range events {
		wire = Encode(wire, ev)
	}
	for _, rd := range readers {
		t.Run(rd.name, func(t *testing.T) {
			got := readAll(t, rd.wrap(bytes.NewReader(wire)), 0)
			if !eventsEqual(got, events) {
				t.Errorf("round trip:\ngot  %v\nwant %v", got, events)
			}
		})
	}
}

// Data with CR line breaks comes back with LF breaks and stays one event.
func TestEncodeNextCRData(t *testing.T) {
	msg := "{\r\n  \"jsonrpc\": \"2.0\",\r  \"id\": 1\n}"
	got := readAll(t, bytes.NewReader(Encode(nil, Message([]byte(msg)))), 0)
	want := []*Event{data("{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 1\n}")}
	if !eventsEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestNextLongLinesInPieces: lines gathered in pooled pieces (longer than pieceAt) come out
// whole and exact at every size around the piece and buffer boundaries, several per event
// (the first handed over as the data, the next appended to it), followed by short events
// whose data must not alias the long ones; a long line over the limit still fails.
func TestNextLongLinesInPieces(t *testing.T) {
	var in strings.Builder
	var want [][]byte
	for _, n := range []int{pieceAt - 1, pieceAt, pieceAt + 1, 96<<10 + 7, bigLine + 1, 1<<20 + 3} {
		a := bytes.Repeat([]byte{byte('a' + n%26)}, n)
		b := bytes.Repeat([]byte{'z'}, n/2)
		in.WriteString("data: " + string(a) + "\r\ndata: " + string(b) + "\r\n\r\ndata: short\n\n")
		want = append(want, slices.Concat(a, []byte("\n"), b), []byte("short"))
	}
	for _, rd := range []struct {
		name string
		wrap func(io.Reader) io.Reader
	}{readers[0], readers[2]} {
		t.Run(rd.name, func(t *testing.T) {
			got := readAll(t, rd.wrap(strings.NewReader(in.String())), 0)
			if len(got) != len(want) {
				t.Fatalf("%d events, want %d", len(got), len(want))
			}
			for i := range want {
				if !bytes.Equal(got[i].Data, want[i]) {
					t.Fatalf("event %d: %d bytes, want %d", i, len(got[i].Data), len(want[i]))
				}
			}
		})
	}
	_, err := NewReader(strings.NewReader("data: "+strings.Repeat("x", 200<<10)+"\n\n"), 150<<10).Next()
	if !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("Next = %v, want ErrLineTooLong", err)
	}
}

// TestRecycle: a long event's buffer given back with Recycle carries the next long line, whole
// and exact (also one that outgrows it), and the recycled event no longer points into it.
func TestRecycle(t *testing.T) {
	a := strings.Repeat("a", bigLine+100)
	b := strings.Repeat("b", bigLine+90)
	c := strings.Repeat("c", 3*bigLine) // outgrows the recycled buffer: the rest goes to pieces
	r := NewReader(iotest.HalfReader(strings.NewReader("data: "+a+"\n\ndata: "+b+"\n\ndata: "+a+"\n\ndata: "+c+"\r\n\r\ndata: "+b+"\n\n")), 0)
	defer r.Close()
	ev, err := r.Next()
	if err != nil || string(ev.Data) != a {
		t.Fatalf("first event: %v", err)
	}
	Recycle(ev)
	if ev.Data != nil {
		t.Fatal("Recycle left the event's data in place")
	}
	for _, want := range []string{b, a, c, b} {
		ev, err := r.Next()
		if err != nil || string(ev.Data) != want {
			t.Fatalf("event after Recycle: %d bytes, %v", len(ev.Data), err)
		}
		Recycle(ev)
	}
}
