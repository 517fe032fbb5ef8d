package jsonrpc

import (
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
		for j+8 <= len(b) {
			if m := special(binary.LittleEndian.Uint64(b[j:])); m != 0 {
				j += bits.TrailingZeros64(m) >> 3
				break
			}
			j += 8
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

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
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
