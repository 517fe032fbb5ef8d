package disclose

import (
	"bytes"
	"encoding/json"
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
	var compact bytes.Buffer
	if err := json.Compact(&compact, args); err != nil {
		return redactedJSON
	}
	out, err := redactValue(compact.Bytes(), root)
	if err != nil {
		return redactedJSON
	}
	return out
}

func redactValue(raw json.RawMessage, n *redactNode) (json.RawMessage, error) {
	if len(raw) == 0 {
		return raw, nil
	}
	switch raw[0] {
	case '{':
		return redactObject(raw, n)
	case '[':
		return redactArray(raw, n)
	}
	return raw, nil
}

func redactObject(raw json.RawMessage, n *redactNode) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // {
		return nil, err
	}
	var out bytes.Buffer
	out.WriteByte('{')
	first := true
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, err
		}
		if c := n.children[jsonrpc.FoldName(key)]; c != nil {
			if c.leaf {
				val = redactedJSON
			} else if val, err = redactValue(val, c); err != nil {
				return nil, err
			}
		}
		if !first {
			out.WriteByte(',')
		}
		first = false
		if err := writeKey(&out, key); err != nil {
			return nil, err
		}
		out.WriteByte(':')
		out.Write(val)
	}
	out.WriteByte('}')
	return out.Bytes(), nil
}

func redactArray(raw json.RawMessage, n *redactNode) (json.RawMessage, error) {
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	out.WriteByte('[')
	for i, e := range elems {
		r, err := redactValue(e, n)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out.WriteByte(',')
		}
		out.Write(r)
	}
	out.WriteByte(']')
	return out.Bytes(), nil
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
