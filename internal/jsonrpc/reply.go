package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// SameID reports whether two raw ids name the same request: equal bytes, equal strings once
// unescaped ("a" and "\u0061"), or equal numbers once read as float64 — servers that decode ids
// into a float64 send 9007199254740993 back as 9007199254740992, and that is still an answer
// to the same request. A string never equals a number.
func SameID(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	switch {
	case a[0] == '"' && b[0] == '"':
		var sa, sb string
		return json.Unmarshal(a, &sa) == nil && json.Unmarshal(b, &sb) == nil && sa == sb
	case isNumber(a) && isNumber(b):
		fa, ea := strconv.ParseFloat(string(a), 64)
		fb, eb := strconv.ParseFloat(string(b), 64)
		return ea == nil && eb == nil && fa == fb
	}
	return false
}

func isNumber(b []byte) bool { return b[0] == '-' || (b[0] >= '0' && b[0] <= '9') }

// CheckErrorObject reports why raw is not a JSON-RPC 2.0 error object (§5.1: an object whose
// "code" is an integer and whose "message" is a string; "data" may be any value). Members are
// matched exactly and a second "code" or "message" is refused, as Parse does for the envelope.
func CheckErrorObject(raw []byte) error {
	var code, msg []byte
	err := Members(raw, func(key []byte, start, end int) error {
		switch string(key) {
		case "code":
			if code != nil {
				return errors.New(`duplicate member "code"`)
			}
			code = raw[start:end]
		case "message":
			if msg != nil {
				return errors.New(`duplicate member "message"`)
			}
			msg = raw[start:end]
		}
		return nil
	})
	switch {
	case err != nil:
		return fmt.Errorf("error member: %w", err)
	case code == nil:
		return errors.New(`error member has no "code"`)
	case !isNumber(code) || bytes.ContainsAny(code, ".eE"):
		return errors.New(`error "code" is not an integer`)
	case msg == nil:
		return errors.New(`error member has no "message"`)
	case msg[0] != '"':
		return errors.New(`error "message" is not a string`)
	}
	if _, err := strconv.ParseInt(string(code), 10, 64); err != nil {
		return errors.New(`error "code" is not an integer`)
	}
	return nil
}
