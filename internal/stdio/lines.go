package stdio

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// readLines calls each with every newline-delimited message read from r (spec 2025-11-25
// basic/transports, stdio: messages are delimited by newlines and MUST NOT contain embedded
// newlines), without the line end ("\n" or "\r\n"); empty lines are skipped. A line longer
// than max bytes is dropped as it streams past (never held whole) and reported to tooLong
// with its length. The line passed to each is only valid during the call. The error is why
// reading ended (io.EOF when r closed).
func readLines(r io.Reader, max int, each func([]byte), tooLong func(n int)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		buf  []byte
		skip int // > 0: bytes of an over-long line dropped so far
	)
	for {
		frag, err := br.ReadSlice('\n')
		switch {
		case skip > 0:
			skip += len(frag)
		case len(buf)+len(frag) > max+2: // allow for the "\r\n" that is not part of the message
			skip = len(buf) + len(frag)
			buf = buf[:0]
		case errors.Is(err, bufio.ErrBufferFull) || (err == nil && len(buf) > 0):
			buf = append(buf, frag...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if skip > 0 {
			if err == nil || len(frag) > 0 {
				tooLong(skip - len(lineEnd(frag)))
			}
			skip = 0
		} else {
			line := frag
			if len(buf) > 0 {
				line = buf
			}
			line = bytes.TrimSuffix(line, lineEnd(line))
			if len(line) > max {
				tooLong(len(line))
			} else if len(bytes.TrimSpace(line)) > 0 {
				each(line)
			}
			buf = buf[:0]
		}
		if err != nil {
			return err
		}
	}
}

func lineEnd(b []byte) []byte {
	switch {
	case bytes.HasSuffix(b, []byte("\r\n")):
		return []byte("\r\n")
	case bytes.HasSuffix(b, []byte("\n")):
		return []byte("\n")
	}
	return nil
}
