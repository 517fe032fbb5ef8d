package jsonrpc

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Standard JSON-RPC codes and Tollgate's own (docs/contract.md §2).
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601 // also TaskRequired / TaskForbidden (spec 2025-11-25 tasks)
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603

	CodeUpstreamUnreachable = -32000
	CodeUpstreamTimeout     = -32001
	CodePolicyDenied        = -32003
	CodeTaskExpired         = -32005
	CodeApprovalRejected    = -32007
	CodeApprovalTimedOut    = -32008
	CodeRateLimited         = -32009
	CodePolicyChanged       = -32011
	CodeCapacityExceeded    = -32013
	CodeUnsupportedProtocol = -32022
)

// Error is the one JSON-RPC error type used at Tollgate's edge. Data always carries a stable
// "error" name and, once the request is known, its "correlation_id".
//
// An error the upstream sent is kept as it came: JSON-RPC 2.0 §5.1 lets "data" be any value,
// so a string, number or array is held in RawData (Data stays nil) and written back unchanged.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    map[string]any  `json:"data,omitempty"`
	RawData json.RawMessage `json:"-"` // "data" when it is not an object (from UnmarshalJSON)
}

// NewError builds an error whose data.error is name; extra key/value pairs are added to data.
func NewError(code int, name, message string, kv ...any) *Error {
	data := map[string]any{"error": name}
	for i := 0; i+1 < len(kv); i += 2 {
		if k, ok := kv[i].(string); ok {
			data[k] = kv[i+1]
		}
	}
	return &Error{Code: code, Message: message, Data: data}
}

func (e *Error) Error() string { return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message) }

// Is reports whether target is a *Error with the same code, so errors.Is compares codes.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Name is data.error, the stable error name ("" if absent).
func (e *Error) Name() string {
	if s, ok := e.Data["error"].(string); ok {
		return s
	}
	return ""
}

// WithCorrelation returns a copy whose data carries correlation_id. Data that is not an
// object (RawData) has no room for it and is left as the upstream sent it.
func (e *Error) WithCorrelation(id string) *Error {
	if id == "" || e.RawData != nil {
		return e
	}
	c := *e
	c.Data = make(map[string]any, len(e.Data)+1)
	for k, v := range e.Data {
		c.Data[k] = v
	}
	c.Data["correlation_id"] = id
	return &c
}

// MarshalJSON keeps "data" out when empty and never HTML-escapes.
func (e *Error) MarshalJSON() ([]byte, error) {
	if e.RawData != nil && e.Data == nil {
		return marshalNoEscape(struct {
			Code    int             `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		}{e.Code, e.Message, e.RawData})
	}
	type wire Error
	return marshalNoEscape((*wire)(e))
}

// UnmarshalJSON reads an error object whose "data" may be any JSON value (JSON-RPC 2.0 §5.1):
// an object fills Data, anything else but null is kept verbatim in RawData.
func (e *Error) UnmarshalJSON(b []byte) error {
	var w struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*e = Error{Code: w.Code, Message: w.Message}
	switch d := bytes.TrimSpace(w.Data); {
	case len(d) == 0 || string(d) == "null":
	case d[0] == '{':
		return json.Unmarshal(d, &e.Data)
	default:
		e.RawData = append(json.RawMessage(nil), d...)
	}
	return nil
}

// DecodeError reads the "error" member of a reply; one that cannot be read (no object, no
// integer code) becomes -32603 UpstreamError carrying its text.
func DecodeError(raw json.RawMessage) *Error {
	var e Error
	if json.Unmarshal(raw, &e) != nil {
		return NewError(CodeInternalError, "UpstreamError", string(raw))
	}
	return &e
}

// ErrorResponse encodes a complete JSON-RPC error response for id (raw, as the client sent it;
// nil/empty means null).
func ErrorResponse(id json.RawMessage, e *Error) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := marshalNoEscape(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *Error          `json:"error"`
	}{"2.0", id, e})
	return b
}

// ResultResponse encodes a complete JSON-RPC success response carrying result verbatim.
func ResultResponse(id json.RawMessage, result json.RawMessage) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	out := make([]byte, 0, len(id)+len(result)+40)
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	out = append(out, `,"result":`...)
	out = append(out, result...)
	out = append(out, '}')
	return out
}
