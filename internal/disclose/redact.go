package disclose

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
)

// Redacted replaces every redacted value.
const Redacted = "[REDACTED]"

var redactedJSON = json.RawMessage(`"` + Redacted + `"`)

// redactNode is one segment of the redact_fields paths, as a trie.
type redactNode struct {
	leaf     bool
	children map[string]*redactNode // keys under jsonrpc.FoldName
}

func buildRedactTree(fields []string) *redactNode {
	root := &redactNode{}
	for _, f := range fields {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n := root
		for _, seg := range strings.Split(f, ".") {
			seg = jsonrpc.FoldName(seg)
			if n.children == nil {
				n.children = make(map[string]*redactNode)
			}
			c := n.children[seg]
			if c == nil {
				c = &redactNode{}
				n.children[seg] = c
			}
			n = c
		}
		n.leaf = true
	}
	return root
}

// Redact returns args with the value at every dot path in fields (redact_fields of the task's
// approval workflow, e.g. "credentials.api_key") replaced by "[REDACTED]". Keys match under
// Unicode simple case folding (jsonrpc.FoldName, the rule Go's encoding/json binds member names
// to struct fields with: "paſſword" and "PASSWORD" are "password" to a Go upstream), and every
// duplicate of a key is redacted, because a JSON decoder downstream may pick either. Where a path meets an array, the rest of the path applies to each
// element. Paths that do not exist are ignored; member order and the bytes of
// unaffected values are kept (whitespace is compacted).
//
// Args that are not valid JSON are replaced whole when there is anything to redact: the
// approver must never see a value the workflow asked to hide.
func Redact(args json.RawMessage, fields []string) json.RawMessage {
	root := buildRedactTree(fields)
	if len(root.children) == 0 {
		return args
	}
	return redactBytes(args, root)
}

// redactBytes is Redact under a non-empty tree.
func redactBytes(args json.RawMessage, root *redactNode) json.RawMessage {
	out := bytes.NewBuffer(make([]byte, 0, len(args)))
	_ = redactTo(out, args, root) // a bytes.Buffer never fails
	return out.Bytes()
}

// redactTo writes what Redact returns for a non-empty tree to w, in one pass over args with no
// copy of them: a large row can be summarised (size, hash, first bytes) from the stream
// without the redacted arguments ever being held (WriteArguments).
func redactTo(w io.Writer, args []byte, root *redactNode) error {
	if !json.Valid(args) {
		_, err := w.Write(redactedJSON)
		return err
	}
	r := redactor{src: args, w: w}
	r.value(root)
	return r.err
}

// redactor walks JSON that json.Valid accepted, writing it compacted with redacted values
// replaced. Keys of the objects it redacts in are written as encoding/json encodes their
// decoded text (writeKey); everything else keeps its bytes.
type redactor struct {
	src []byte
	i   int
	w   io.Writer
	err error
}

func (r *redactor) write(b []byte) {
	if r.err == nil && len(b) > 0 {
		_, r.err = r.w.Write(b)
	}
}

func (r *redactor) ws() {
	for r.i < len(r.src) && isSpace(r.src[r.i]) {
		r.i++
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// value writes the value at r.i, redacting under n (nil: copied, compacted).
func (r *redactor) value(n *redactNode) {
	r.ws()
	switch {
	case r.i >= len(r.src):
	case n != nil && r.src[r.i] == '{':
		r.object(n)
	case n != nil && r.src[r.i] == '[':
		r.array(n)
	default:
		r.copyValue(true)
	}
}

func (r *redactor) object(n *redactNode) {
	r.i++ // {
	r.write([]byte{'{'})
	for first := true; ; first = false {
		r.ws()
		if r.src[r.i] == '}' {
			r.i++
			break
		}
		if r.src[r.i] == ',' {
			r.i++
			r.ws()
		}
		start := r.i
		r.copyValue(false) // the key string
		rawKey := r.src[start:r.i]
		r.ws()
		r.i++ // :
		key := decodeKey(rawKey)
		if !first {
			r.write([]byte{','})
		}
		if simpleKey(rawKey) {
			r.write(rawKey)
		} else if r.err == nil {
			var b bytes.Buffer
			r.err = writeKey(&b, key)
			r.write(b.Bytes())
		}
		r.write([]byte{':'})
		switch c := n.children[jsonrpc.FoldName(key)]; {
		case c == nil:
			r.value(nil)
		case c.leaf:
			r.ws()
			r.copyValue(false)
			r.write(redactedJSON)
		default:
			r.value(c)
		}
	}
	r.write([]byte{'}'})
}

func (r *redactor) array(n *redactNode) {
	r.i++ // [
	r.write([]byte{'['})
	for first := true; ; first = false {
		r.ws()
		if r.src[r.i] == ']' {
			r.i++
			break
		}
		if r.src[r.i] == ',' {
			r.i++
		}
		if !first {
			r.write([]byte{','})
		}
		r.value(n) // the rest of the path applies to each element
	}
	r.write([]byte{']'})
}

// copyValue moves r.i past the value there (a string, number, literal, object or array),
// writing it without insignificant whitespace when write is set.
func (r *redactor) copyValue(write bool) {
	s, i, depth := r.src, r.i, 0
	start := i
	inStr := false
loop:
	for ; i < len(s); i++ {
		c := s[i]
		if inStr {
			if c == '\\' {
				i++
			} else if c == '"' {
				if inStr = false; depth == 0 {
					i++
					break loop
				}
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				break loop // the end of the enclosing object or array
			}
			if depth--; depth == 0 {
				i++
				break loop
			}
		case ',':
			if depth == 0 {
				break loop
			}
		case ' ', '\t', '\n', '\r':
			if depth == 0 {
				break loop
			}
			if write {
				r.write(s[start:i])
			}
			start = i + 1
		}
	}
	if write {
		r.write(s[start:i])
	}
	r.i = i
}

// simpleKey: a key string of printable ASCII without escapes, which encoding/json decodes and
// encodes again to the same bytes.
func simpleKey(raw []byte) bool {
	for _, c := range raw[1 : len(raw)-1] {
		if c < 0x20 || c > 0x7e || c == '\\' || c == '"' {
			return false
		}
	}
	return true
}

func decodeKey(raw []byte) string {
	if simpleKey(raw) {
		return string(raw[1 : len(raw)-1])
	}
	var k string
	_ = json.Unmarshal(raw, &k) // valid JSON: a string
	return k
}

func writeKey(out *bytes.Buffer, key string) error {
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(key); err != nil {
		return err
	}
	out.Truncate(out.Len() - 1) // Encode's newline
	return nil
}
