package jsonrpc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/bits"
)

// The well-formedness check of relayed replies (docs/SECURITY.md "Upstream faults"): a reply
// whose bytes are not JSON never reaches the client. It accepts exactly what
// jsontext.Value.IsValid accepts with AllowDuplicateNames and AllowInvalidUTF8 (RFC 8259
// grammar, nesting at most maxDepth, bytes ≥ 0x80 and \u escapes taken as they are), which the
// differential fuzz test FuzzValid holds it to. It is hand-written so that ParseChecked can run
// it inside the one scan that finds a message's members: a 1 MiB reply is read once, not twice.

// maxDepth is jsontext's nesting limit (RFC 8259 §9 lets parsers set one).
const maxDepth = 10000

var (
	errInvalidJSON = errors.New("invalid JSON")
	errTooDeep     = errors.New("JSON nested too deeply")
)

// Valid reports whether b is one JSON value with optional surrounding whitespace.
func Valid(b []byte) bool {
	i := skipWS(b, 0)
	if i >= len(b) {
		return false
	}
	e, err := validValue(b, i, 0)
	return err == nil && skipWS(b, e) == len(b)
}

// validValue returns the index just past the JSON value starting at b[i], checking all of it.
// depth is the nesting of the container that holds the value (0 at the top level).
func validValue(b []byte, i, depth int) (int, error) {
	// stack records open containers, true for an object; small documents stay on the stack.
	var buf [32]bool
	stack := buf[:0]
	for {
		// A value starts at b[i].
		if i >= len(b) {
			return 0, errInvalidJSON
		}
		var err error
		switch c := b[i]; {
		case c == '{' || c == '[':
			if depth+len(stack) >= maxDepth {
				return 0, errTooDeep
			}
			stack = append(stack, c == '{')
			i = skipWS(b, i+1)
			if i < len(b) && (b[i] == '}' && c == '{' || b[i] == ']' && c == '[') {
				stack = stack[:len(stack)-1]
				i++
				break
			}
			if c == '{' {
				if i, err = validKey(b, i); err != nil {
					return 0, err
				}
			}
			continue
		case c == '"':
			if i, err = validString(b, i); err != nil {
				return 0, err
			}
		case c == '-' || c >= '0' && c <= '9':
			if i, err = validNumber(b, i); err != nil {
				return 0, err
			}
		case c == 't':
			if i, err = validLiteral(b, i, "true"); err != nil {
				return 0, err
			}
		case c == 'f':
			if i, err = validLiteral(b, i, "false"); err != nil {
				return 0, err
			}
		case c == 'n':
			if i, err = validLiteral(b, i, "null"); err != nil {
				return 0, err
			}
		default:
			return 0, errInvalidJSON
		}
		// A value ended just before b[i]: close containers, or move to the next element.
		for {
			if len(stack) == 0 {
				return i, nil
			}
			i = skipWS(b, i)
			if i >= len(b) {
				return 0, errInvalidJSON
			}
			obj := stack[len(stack)-1]
			switch b[i] {
			case ',':
				i = skipWS(b, i+1)
				if obj {
					if i, err = validKey(b, i); err != nil {
						return 0, err
					}
				}
			case '}', ']':
				if (b[i] == '}') != obj {
					return 0, errInvalidJSON
				}
				stack = stack[:len(stack)-1]
				i++
				continue
			default:
				return 0, errInvalidJSON
			}
			break
		}
	}
}

// validKey checks an object member's name and colon at b[i] and returns the index of its value.
func validKey(b []byte, i int) (int, error) {
	if i >= len(b) || b[i] != '"' {
		return 0, errInvalidJSON
	}
	i, err := validString(b, i)
	if err != nil {
		return 0, err
	}
	i = skipWS(b, i)
	if i >= len(b) || b[i] != ':' {
		return 0, errInvalidJSON
	}
	return skipWS(b, i+1), nil
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// special has the high bit set in the byte lanes of x (eight bytes of a string) holding '"',
// '\\' or a control character; the lowest set lane is always a true match (a borrow only
// carries upward), so the scan can jump to it. Bytes ≥ 0x80 never match.
func special(x uint64) uint64 {
	q := x ^ (lsb * '"')
	s := x ^ (lsb * '\\')
	return ((x-lsb*0x20)&^x | (q-lsb)&^q | (s-lsb)&^s) & msb
}

// validString returns the index just past the string starting at b[i] == '"': no control
// characters, only JSON's escapes; any other byte passes (AllowInvalidUTF8).
func validString(b []byte, i int) (int, error) {
	j := i + 1
	for {
		for n := 0; j+8 <= len(b); n++ {
			if m := special(binary.LittleEndian.Uint64(b[j:])); m != 0 {
				j += bits.TrailingZeros64(m) >> 3
				break
			}
			j += 8
			if n == 8 {
				// 64 plain bytes: a long string (a tool's text result). Take up to a
				// window at a time: the vectorised IndexByte finds the next quote or
				// backslash, and the bytes before it are checked for control characters in
				// bulk. Every byte searched past the stop is at most a window's worth.
				w := b[j:min(len(b), j+longWindow)]
				k := bytes.IndexByte(w, '"')
				if k < 0 {
					k = len(w)
				}
				if e := bytes.IndexByte(w[:k], '\\'); e >= 0 {
					k = e
				}
				if noControl(w[:k]) {
					j, n = j+k, 7 // the next word, then the next window
					if k < len(w) {
						break // at the quote or backslash
					}
				}
				// else a control character: the lane scan goes on to find it
			}
		}
		if j >= len(b) {
			return 0, errInvalidJSON
		}
		switch c := b[j]; {
		case c == '"':
			return j + 1, nil
		case c == '\\':
			if j+1 >= len(b) {
				return 0, errInvalidJSON
			}
			switch b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if j+6 > len(b) || !isHex(b[j+2]) || !isHex(b[j+3]) || !isHex(b[j+4]) || !isHex(b[j+5]) {
					return 0, errInvalidJSON
				}
				j += 6
			default:
				return 0, errInvalidJSON
			}
		case c < 0x20:
			return 0, errInvalidJSON
		default:
			j++
		}
	}
}

// longWindow is how much of a long string validString takes per step.
const longWindow = 1 << 10

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// noControl reports whether s holds no byte below 0x20. It ORs the lanes of 32 bytes at a
// time and tests once: a lane's high bit is set only when some byte at or below it is a
// control character (bytes ≥ 0x80 never set it).
func noControl(s []byte) bool {
	var acc uint64
	i := 0
	for ; i+32 <= len(s); i += 32 {
		x0 := binary.LittleEndian.Uint64(s[i:])
		x1 := binary.LittleEndian.Uint64(s[i+8:])
		x2 := binary.LittleEndian.Uint64(s[i+16:])
		x3 := binary.LittleEndian.Uint64(s[i+24:])
		acc |= (x0-lsb*0x20)&^x0 | (x1-lsb*0x20)&^x1 | (x2-lsb*0x20)&^x2 | (x3-lsb*0x20)&^x3
	}
	for ; i+8 <= len(s); i += 8 {
		x := binary.LittleEndian.Uint64(s[i:])
		acc |= (x - lsb*0x20) &^ x
	}
	for ; i < len(s); i++ {
		if s[i] < 0x20 {
			return false
		}
	}
	return acc&msb == 0
}

// validNumber returns the index just past the number at b[i] (RFC 8259 §6 grammar).
func validNumber(b []byte, i int) (int, error) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return 0, errInvalidJSON
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return 0, errInvalidJSON
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return 0, errInvalidJSON
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return 0, errInvalidJSON
		}
		i = j
	}
	return i, nil
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

func validLiteral(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, errInvalidJSON
	}
	return i + len(lit), nil
}
