package jsonrpc

import "errors"

// Elements returns the raw elements of the JSON array b, aliasing b.
func Elements(b []byte) ([][]byte, error) {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '[' {
		return nil, errors.New("not a JSON array")
	}
	i = skipWS(b, i+1)
	var out [][]byte
	if i < len(b) && b[i] == ']' {
		return out, trailing(b, i+1)
	}
	for {
		i = skipWS(b, i)
		e, err := skipValue(b, i)
		if err != nil {
			return nil, err
		}
		out = append(out, b[i:e])
		i = skipWS(b, e)
		if i >= len(b) {
			return nil, errors.New("unterminated array")
		}
		switch b[i] {
		case ',':
			i++
		case ']':
			return out, trailing(b, i+1)
		default:
			return nil, errors.New("expected ',' or ']' in array")
		}
	}
}

// AppendArray writes elems as a JSON array into dst.
func AppendArray(dst []byte, elems [][]byte) []byte {
	dst = append(dst, '[')
	for i, e := range elems {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, e...)
	}
	return append(dst, ']')
}

// Members calls fn for each top-level member of the JSON object b with its raw key (unquoted
// when it has no escapes) and the byte offsets [start, end) of its value in b.
func Members(b []byte, fn func(key []byte, start, end int) error) error {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errors.New("not a JSON object")
	}
	return members(b, i, func(k []byte, v span) error { return fn(k, v.start, v.end) })
}
