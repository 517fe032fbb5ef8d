package jsonrpc

import (
	"encoding/json"
	"fmt"
)

// Standard JSON-RPC codes and Tollgate's own (DESIGN.md §2).
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
type Error struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
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

// WithCorrelation returns a copy whose data carries correlation_id.
func (e *Error) WithCorrelation(id string) *Error {
	if id == "" {
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
	type wire Error
	return marshalNoEscape((*wire)(e))
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
