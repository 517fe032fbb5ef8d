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

// Request encodes a request message; params must be raw JSON or nil.
func Request(id json.RawMessage, method string, params json.RawMessage) []byte {
	return build(id, method, params)
}

// Notification encodes a notification message; params must be raw JSON or nil.
func Notification(method string, params json.RawMessage) []byte {
	return build(nil, method, params)
}

func build(id json.RawMessage, method string, params json.RawMessage) []byte {
	qm, _ := marshalNoEscape(method)
	out := make([]byte, 0, 48+len(id)+len(qm)+len(params))
	out = append(out, `{"jsonrpc":"2.0",`...)
	if id != nil {
		out = append(out, `"id":`...)
		out = append(out, id...)
		out = append(out, ',')
	}
	out = append(out, `"method":`...)
	out = append(out, qm...)
	if params != nil {
		out = append(out, `,"params":`...)
		out = append(out, params...)
	}
	return append(out, '}')
}
