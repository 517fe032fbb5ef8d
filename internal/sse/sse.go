// Package sse reads and writes Server-Sent Events as streamable HTTP uses them (MCP transport).
//
// The reader accepts LF, CRLF and lone CR line endings (WHATWG event-stream) and has no
// per-line cap other than the one the caller sets: bufio.Scanner's 64 KiB limit breaks large
// tools/list events, so it is not used.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/tollgate-mcp/tollgate/internal/bufpool"
)

// Event is one dispatched event. Comments that preceded it are kept so a proxy can forward them.
type Event struct {
	ID       string
	HasID    bool // an "id:" field was present (an empty id resets the last event id)
	Type     string
	Data     []byte // data lines joined by "\n"
	HasData  bool
	Retry    string
	Comments []string // comment lines without the leading ':'
}

// ErrLineTooLong is returned when a line exceeds the reader's limit.
var ErrLineTooLong = errors.New("sse: line too long")

// Reader parses events from a stream.
type Reader struct {
	r       *bufio.Reader
	max     int
	line    []byte
	skipLF  bool // the previous line ended in CR; a following LF belongs to it
	started bool
}

// NewReader returns a reader whose lines may be at most maxLine bytes (0 = 64 MiB).
func NewReader(r io.Reader, maxLine int) *Reader {
	if maxLine <= 0 {
		maxLine = 64 << 20
	}
	br := bufPool.Get().(*bufio.Reader)
	br.Reset(r)
	return &Reader{r: br, max: maxLine}
}

// bufPool recycles the 32 KiB read buffers: a proxy opens one reader per streamed reply.
var bufPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, bufpool.PieceSize) }}

// Close returns the reader's buffer for reuse; the reader must not be used afterwards. It does
// not close the underlying reader.
func (r *Reader) Close() {
	if r.r != nil {
		r.r.Reset(nil)
		bufPool.Put(r.r)
		r.r = nil
	}
	r.line = nil
}

// readLine returns the next line without its terminator (LF, CRLF or lone CR); io.EOF at a
// clean end. The returned slice is reused by the next call.
//
// A line longer than pieceAt is gathered in pooled pieces and copied once into a buffer of its
// exact size: growing one buffer by doubling allocated and zeroed about four times a 1 MiB line.
func (r *Reader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	// A long line goes into acc, a buffer an earlier event gave back (Recycle), while it has
	// room: then it is copied once, straight from the read buffer. What does not fit goes into
	// pieces, joined at the end.
	var acc []byte
	var pieces [][]byte
	size := 0 // bytes held in pieces
	defer func() {
		for _, p := range pieces {
			bufpool.PutPiece(p)
		}
	}()
	held := func() int {
		if acc != nil {
			return len(acc) + size
		}
		return len(r.line) + size
	}
	take := func(b []byte) {
		if acc == nil && pieces == nil {
			if len(r.line)+len(b) <= pieceAt {
				r.line = appendGrow(r.line, b)
				return
			}
			if b, ok := bufpool.Recycled(); ok {
				acc = append(b, r.line...)
			}
		}
		if acc != nil && pieces == nil && len(acc)+len(b) <= cap(acc) {
			acc = append(acc, b...)
			return
		}
		for len(b) > 0 {
			p := bufpool.Piece()
			n := copy(p, b)
			pieces = append(pieces, p[:n])
			size += n
			b = b[n:]
		}
	}
	join := func(last []byte) []byte {
		head := r.line
		if acc != nil {
			if pieces == nil && len(acc)+len(last) <= cap(acc) {
				r.line = append(acc, last...)
				return r.line
			}
			head = acc
		} else if pieces == nil {
			r.line = appendGrow(r.line, last)
			return r.line
		}
		out := lineBuffer(len(head) + size + len(last))
		out = append(out, head...)
		for _, p := range pieces {
			out = append(out, p...)
		}
		r.line = append(out, last...)
		return r.line
	}
	for {
		if r.r.Buffered() == 0 {
			if _, err := r.r.Peek(1); err != nil {
				if err == io.EOF && held() > 0 {
					return join(nil), nil // last line without terminator
				}
				return nil, err
			}
		}
		buf, _ := r.r.Peek(r.r.Buffered())
		if r.skipLF {
			r.skipLF = false
			if buf[0] == '\n' {
				_, _ = r.r.Discard(1)
				continue
			}
		}
		i := bytes.IndexByte(buf, '\n')
		limit := buf
		if i >= 0 {
			limit = buf[:i]
		}
		if j := bytes.IndexByte(limit, '\r'); j >= 0 {
			i = j
		}
		if i < 0 {
			take(buf)
			_, _ = r.r.Discard(len(buf))
			if held() > r.max {
				return nil, ErrLineTooLong
			}
			continue
		}
		if held()+i > r.max {
			return nil, ErrLineTooLong
		}
		line := join(buf[:i])
		r.skipLF = buf[i] == '\r' // a CR may be the first half of CRLF
		_, _ = r.r.Discard(i + 1)
		return line, nil
	}
}

// lineBuffer returns an empty buffer for a long line of n bytes, one Recycle gave back when it
// is large enough. The slack lets the buffer serve the same size again and again: what comes
// back through Recycle is the event's data, which starts after the field name ("data: "), a
// few bytes into the buffer each time.
func lineBuffer(n int) []byte { return bufpool.Buffer(n, lineSlack) }

const lineSlack = 4 << 10

// Recycle gives back the data buffer of an event Next returned, for a later long line (or a
// large JSON reply: package bufpool). Only for a caller that has finished with ev and kept no
// reference into ev.Data.
func Recycle(ev *Event) {
	bufpool.Recycle(ev.Data, bigLine)
	ev.Data = nil
}

// pieceAt is the line length above which readLine gathers a line in pieces.
const pieceAt = 64 << 10

// appendGrow is append with capacity doubling: a 1 MiB line arrives in 32 KiB pieces, and
// append's 1.25× growth for large slices would copy it about five times over.
func appendGrow(dst, src []byte) []byte {
	if need := len(dst) + len(src); need > cap(dst) {
		n := make([]byte, len(dst), max(need, 2*cap(dst), 512))
		copy(n, dst)
		dst = n
	}
	return append(dst, src...)
}

// bigLine is the size above which the reader drops its line buffer after use, so one large
// event does not pin memory for the rest of a long stream.
const bigLine = 256 << 10

// Next returns the next event. Comment-only blocks are returned as events with no data so a
// proxy can forward keep-alives. io.EOF at the end of the stream (an incomplete trailing event is
// discarded, as the spec says).
func (r *Reader) Next() (*Event, error) {
	ev := &Event{}
	var data []byte
	defer func() {
		if cap(r.line) > bigLine {
			r.line = nil
		}
	}()
	dirty := false
	for {
		line, err := r.readLine()
		if err != nil {
			if err == io.EOF && dirty && len(ev.Comments) > 0 && !ev.HasData && !ev.HasID && ev.Type == "" {
				return ev, nil
			}
			return nil, err
		}
		if !r.started {
			r.started = true
			line = bytes.TrimPrefix(line, []byte("\xEF\xBB\xBF")) // BOM
		}
		if len(line) == 0 {
			if !dirty {
				continue
			}
			ev.Data = data
			return ev, nil
		}
		dirty = true
		if line[0] == ':' {
			ev.Comments = append(ev.Comments, strings.TrimPrefix(string(line[1:]), " "))
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if ev.HasData {
				data = appendGrow(data, []byte{'\n'})
				data = appendGrow(data, value)
			} else if cap(r.line) > bigLine {
				// A large line is dropped after this event anyway (see bigLine): hand it
				// over as the data instead of copying a megabyte.
				data, r.line = value, nil
			} else {
				data = append(make([]byte, 0, len(value)), value...) // usually the only line
			}
			ev.HasData = true
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				ev.ID, ev.HasID = string(value), true
			}
		case "event":
			ev.Type = string(value)
		case "retry":
			ev.Retry = string(value)
		}
	}
}

// Encode appends the wire form of ev to dst: comments, id, event, retry, data lines, blank line.
//
// A line break inside a value would end the field and let the rest be read as new fields or
// events (a JSON message may carry CR or CRLF as whitespace). So data and comments are split at
// LF, CRLF and lone CR — exactly where Reader splits them — and line breaks in id, event and
// retry, which Reader can never produce, are dropped.
func Encode(dst []byte, ev *Event) []byte {
	for _, c := range ev.Comments {
		v := []byte(c)
		for {
			line, rest, more := cutLine(v)
			dst = append(dst, ':')
			if len(line) > 0 {
				dst = append(dst, ' ')
				dst = append(dst, line...)
			}
			dst = append(dst, '\n')
			if !more {
				break
			}
			v = rest
		}
	}
	if ev.HasID {
		dst = appendField(dst, "id: ", ev.ID)
	}
	if ev.Type != "" {
		dst = appendField(dst, "event: ", ev.Type)
	}
	if ev.Retry != "" {
		dst = appendField(dst, "retry: ", ev.Retry)
	}
	if ev.HasData {
		data := ev.Data
		for {
			line, rest, more := cutLine(data)
			dst = append(dst, "data: "...)
			dst = append(dst, line...)
			dst = append(dst, '\n')
			if !more {
				break
			}
			data = rest
		}
	}
	return append(dst, '\n')
}

// cutLine splits b at its first line break as Reader sees one (LF, CRLF or lone CR).
func cutLine(b []byte) (line, rest []byte, more bool) {
	i := bytes.IndexByte(b, '\n')
	limit := b
	if i >= 0 {
		limit = b[:i]
	}
	if j := bytes.IndexByte(limit, '\r'); j >= 0 {
		i = j
	}
	if i < 0 {
		return b, nil, false
	}
	next := i + 1
	if b[i] == '\r' && next < len(b) && b[next] == '\n' {
		next++
	}
	return b[:i], b[next:], true
}

// appendField appends a one-line field, dropping any CR or LF in v.
func appendField(dst []byte, name, v string) []byte {
	dst = append(dst, name...)
	if strings.ContainsAny(v, "\r\n") {
		v = strings.NewReplacer("\r", "", "\n", "").Replace(v)
	}
	dst = append(dst, v...)
	return append(dst, '\n')
}

// Message returns a data-only "message" event carrying msg.
func Message(msg []byte) *Event { return &Event{Data: msg, HasData: true} }

// Comment returns a comment-only event (a keep-alive).
func Comment(text string) *Event { return &Event{Comments: []string{text}} }

// String is for debugging and tests.
func (e *Event) String() string { return fmt.Sprintf("%q", Encode(nil, e)) }

// directWrite is the data size above which Write sends the data straight to the writer instead
// of copying it into the frame buffer first.
const directWrite = 16 << 10

// Write writes ev to w as Encode would, using buf as scratch space (returned for reuse). A
// large single-line data field — a big JSON-RPC message — is written without being copied.
func Write(w io.Writer, buf []byte, ev *Event) ([]byte, error) {
	if !ev.HasData || len(ev.Data) < directWrite || bytes.IndexByte(ev.Data, '\n') >= 0 || bytes.IndexByte(ev.Data, '\r') >= 0 {
		buf = Encode(buf[:0], ev)
		_, err := w.Write(buf)
		return buf, err
	}
	head := *ev
	head.HasData = false
	buf = Encode(buf[:0], &head)
	buf = append(buf[:len(buf)-1], "data: "...) // drop the blank line that ends a frame
	if _, err := w.Write(buf); err != nil {
		return buf, err
	}
	if _, err := w.Write(ev.Data); err != nil {
		return buf, err
	}
	_, err := w.Write([]byte("\n\n"))
	return buf, err
}
