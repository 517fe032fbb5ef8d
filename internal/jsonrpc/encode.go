package jsonrpc

import (
	"bytes"
	"encoding/json"
)

// marshalNoEscape encodes v without HTML escaping (<, >, & stay as they are) and without the
// trailing newline json.Encoder adds.
func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// Marshal is json.Marshal without HTML escaping; Tollgate re-encodes only what it changes and
// must not turn "<" into "\u003c" in text it passes on.
func Marshal(v any) ([]byte, error) { return marshalNoEscape(v) }
