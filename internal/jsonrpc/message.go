// Package jsonrpc reads and edits JSON-RPC 2.0 messages without decoding what Tollgate does not
// need: a message is scanned once for its top-level members, and edits splice bytes so
// everything else (unknown fields, _meta, number spellings) stays exactly as it was sent.
package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Kind says what a JSON-RPC message is.
type Kind uint8

const (
	KindInvalid      Kind = iota
	KindRequest           // method + id
	KindNotification      // method, no id
	KindResponse          // result or error, id
)

func (k Kind) String() string {
	switch k {
	case KindRequest:
		return "request"
	case KindNotification:
		return "notification"
	case KindResponse:
		return "response"
	}
	return "invalid"
}

// span is a half-open byte range [start, end) of a value inside a message.
type span struct{ start, end int }

func (s span) ok() bool { return s.end > s.start }

// Message is a scanned JSON-RPC message. Raw fields alias the scanned bytes; do not modify them.
type Message struct {
	Raw    []byte
	Kind   Kind
	Method string
	ID     json.RawMessage // as sent: `1`, `"a"`, `9007199254740993`; nil when absent
	Params json.RawMessage
	Result json.RawMessage
	Error  json.RawMessage

	id     span
	result span

	checked bool // ParseChecked looked at every byte; valid holds what it found
	valid   bool
}

// ErrBatch is returned for a JSON array: batches were removed from MCP in 2025-06-18 and would
// let a tools/call slip past per-message governance, so Tollgate refuses them.
var ErrBatch = errors.New("JSON-RPC batches are not supported")

// Parse scans one JSON-RPC message. Only the top level is examined; nested values are skipped
// without being decoded, so the cost is one pass over the bytes.
func Parse(b []byte) (*Message, error) { return parse(b, false) }

// ParseChecked is Parse (same message, same error) that also finds out, in the same pass,
// whether the whole message is well-formed JSON; ValidJSON reports it. The relay uses it for
// upstream replies, which must be well-formed before they reach a client.
func ParseChecked(b []byte) (*Message, error) { return parse(b, true) }

// ValidJSON reports whether the whole message is well-formed JSON (see Valid). Free after
// ParseChecked; one more scan after Parse.
func (m *Message) ValidJSON() bool {
	if m.checked {
		return m.valid
	}
	return Valid(m.Raw)
}

func parse(b []byte, check bool) (*Message, error) {
	m := &Message{Raw: b}
	i := skipWS(b, 0)
	if i >= len(b) {
		return nil, errors.New("empty message")
	}
	if b[i] == '[' {
		return nil, ErrBatch
	}
	if b[i] != '{' {
		return nil, errors.New("message is not a JSON object")
	}
	var methodSpan span
	var hasMethod, hasID bool
	var seen uint8
	var chk *bool
	if check {
		m.checked, m.valid = true, true
		chk = &m.valid
	}
	err := membersChecked(b, i, chk, func(key []byte, v span) error {
		// Governance must read the same members the upstream reads. Parsers disagree on which of
		// two equal keys wins, and encoding/json (mcp-go and other Go servers) matches keys
		// case-insensitively with Unicode folding, so {"method":"tools/list","Method":"tools/call"}
		// is a tools/list to Tollgate and a tools/call to a Go upstream. Refuse both.
		if err := checkProtocolKey(key, &seen); err != nil {
			return err
		}
		switch string(key) {
		case "id":
			hasID = true
			m.id = v
			m.ID = json.RawMessage(b[v.start:v.end])
		case "method":
			hasMethod = true
			methodSpan = v
		case "params":
			m.Params = json.RawMessage(b[v.start:v.end])
		case "result":
			m.Result = json.RawMessage(b[v.start:v.end])
			m.result = v
		case "error":
			m.Error = json.RawMessage(b[v.start:v.end])
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// JSON-RPC 2.0 §4: an id is a string, a number or null. Tollgate echoes ids into its own
	// replies (ErrorResponse re-encodes them and yields nothing for invalid JSON), so a string id
	// is checked in full — numbers and null already were; ids are short.
	if hasID {
		switch m.ID[0] {
		case '"':
			// encoding/json accepts invalid UTF-8 (and reads it as U+FFFD); refuse it like
			// everywhere else that decoders could read differently.
			if !json.Valid(m.ID) || !utf8.Valid(m.ID) {
				return nil, errors.New(`"id" is not a valid JSON string`)
			}
		case '{', '[', 't', 'f':
			return nil, errors.New(`"id" is not a string, a number or null`)
		}
	}
	if hasMethod {
		raw := b[methodSpan.start:methodSpan.end]
		if raw[0] != '"' {
			return nil, errors.New(`"method" is not a string`)
		}
		// The fast path only for plain ASCII: otherwise decode as encoding/json does (invalid
		// UTF-8 becomes U+FFFD, raw control characters are refused) so Method is what upstreams see.
		if plainASCII(raw[1 : len(raw)-1]) {
			m.Method = string(raw[1 : len(raw)-1])
		} else if err := json.Unmarshal(raw, &m.Method); err != nil {
			return nil, fmt.Errorf("method: %w", err)
		}
	}
	switch {
	case hasMethod && hasID && !isNull(m.ID):
		m.Kind = KindRequest
	case hasMethod:
		m.Kind = KindNotification
	case hasID && (m.Result != nil || m.Error != nil):
		m.Kind = KindResponse
	default:
		return nil, errors.New("neither a request, a notification nor a response")
	}
	return m, nil
}

// plainASCII reports whether the contents of a JSON string need no decoding.
func plainASCII(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c == '\\' || c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func isNull(b []byte) bool { return string(b) == "null" }

// protocolKeys are the members whose reading decides what a message is; see Parse.
var protocolKeys = [...]string{"jsonrpc", "id", "method", "params", "result", "error"}

// checkProtocolKey fails on a second occurrence of a protocol member or on a key that only
// case-folds to one ("ID", "Method", "paramſ" with U+017F).
func checkProtocolKey(key []byte, seen *uint8) error {
	for n, p := range protocolKeys {
		if string(key) == p {
			if *seen&(1<<n) != 0 {
				return fmt.Errorf("duplicate member %q", p)
			}
			*seen |= 1 << n
			return nil
		}
	}
	for _, p := range protocolKeys {
		if bytes.EqualFold(key, []byte(p)) {
			return fmt.Errorf("member %q differs from %q only in case", key, p)
		}
	}
	return nil
}

// WithID returns the message with its id replaced by id (raw JSON), splicing bytes so nothing
// else changes. It returns Raw itself when the id already matches byte for byte.
func (m *Message) WithID(id json.RawMessage) []byte {
	if !m.id.ok() || bytes.Equal(m.ID, id) {
		return m.Raw
	}
	out := make([]byte, 0, len(m.Raw)-len(m.ID)+len(id))
	out = append(out, m.Raw[:m.id.start]...)
	out = append(out, id...)
	out = append(out, m.Raw[m.id.end:]...)
	return out
}

// WithResult returns the response with its result replaced by result, splicing bytes at the
// span Parse found (no second scan of a large message).
func (m *Message) WithResult(result []byte) []byte {
	if !m.result.ok() {
		return m.Raw
	}
	out := make([]byte, 0, len(m.Raw)-len(m.Result)+len(result))
	out = append(out, m.Raw[:m.result.start]...)
	out = append(out, result...)
	return append(out, m.Raw[m.result.end:]...)
}

// Replace returns a copy of the object b with the top-level member key set to value (added at
// the end when absent). b must be a JSON object; other members keep their bytes.
func Replace(b []byte, key string, value []byte) ([]byte, error) {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, errors.New("not a JSON object")
	}
	var found span
	err := members(b, i, func(k []byte, v span) error {
		if string(k) == key {
			found = v
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if found.ok() {
		out := make([]byte, 0, len(b)-(found.end-found.start)+len(value))
		out = append(out, b[:found.start]...)
		out = append(out, value...)
		return append(out, b[found.end:]...), nil
	}
	end := bytes.LastIndexByte(b, '}')
	qk, _ := Marshal(key)
	out := make([]byte, 0, len(b)+len(qk)+len(value)+2)
	out = append(out, b[:end]...)
	if !emptyObject(b[i:end]) {
		out = append(out, ',')
	}
	out = append(out, qk...)
	out = append(out, ':')
	out = append(out, value...)
	return append(out, b[end:]...), nil
}

// Member returns the raw value of top-level member key of object b, or nil. With duplicate keys
// the last one wins, as in encoding/json, JavaScript and Python, and as Parse and Replace see it
// (it used to return the first, so Tollgate and the upstream could read different values).
func Member(b []byte, key string) json.RawMessage {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil
	}
	var out json.RawMessage
	_ = members(b, i, func(k []byte, v span) error {
		if string(k) == key {
			out = json.RawMessage(b[v.start:v.end])
		}
		return nil
	})
	return out
}

func emptyObject(b []byte) bool { // b is "{ ... " without the closing brace
	return skipWS(b, 1) >= len(b)
}

// members walks the members of the object starting at b[i] == '{', calling fn with each raw
// key (unquoted when it has no escapes) and value span. Duplicate keys are all reported, in order.
func members(b []byte, i int, fn func(key []byte, v span) error) error {
	return membersChecked(b, i, nil, fn)
}

// membersChecked is members that, with valid set, also checks every key and value in full and
// clears *valid at the first one that is not well-formed JSON. The walk itself (spans, errors)
// is the same either way: a value the full check refuses is skipped as members skips it.
func membersChecked(b []byte, i int, valid *bool, fn func(key []byte, v span) error) error {
	i++ // '{'
	i = skipWS(b, i)
	if i < len(b) && b[i] == '}' {
		return trailing(b, i+1)
	}
	for {
		i = skipWS(b, i)
		if i >= len(b) || b[i] != '"' {
			return errors.New("expected object key")
		}
		ks := i
		ke, err := skipString(b, i)
		if err != nil {
			return err
		}
		if valid != nil && *valid {
			if e, err := validString(b, i); err != nil || e != ke {
				*valid = false
			}
		}
		key := b[ks+1 : ke-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var s string
			if err := json.Unmarshal(b[ks:ke], &s); err != nil {
				return err
			}
			key = []byte(s)
		}
		i = skipWS(b, ke)
		if i >= len(b) || b[i] != ':' {
			return errors.New("expected ':' after object key")
		}
		i = skipWS(b, i+1)
		ve, err := -1, error(nil)
		if valid != nil && *valid {
			if ve, err = validValue(b, i, 1); err != nil || !delimited(b, i, ve) {
				*valid, ve = false, -1
			}
		}
		if ve < 0 {
			if ve, err = skipValue(b, i); err != nil {
				return err
			}
		}
		if err := fn(key, span{i, ve}); err != nil {
			return err
		}
		i = skipWS(b, ve)
		if i >= len(b) {
			return errors.New("unexpected end of object")
		}
		switch b[i] {
		case ',':
			i++
		case '}':
			return trailing(b, i+1)
		default:
			return errors.New("expected ',' or '}' in object")
		}
	}
}

// delimited reports whether the value b[i:e] is followed by what ends a token for skipValue
// (a number or literal runs on to the next delimiter there, "1x" being one bad token).
func delimited(b []byte, i, e int) bool {
	if b[i] == '{' || b[i] == '[' || b[i] == '"' || e == len(b) {
		return true
	}
	switch b[e] {
	case ',', '}', ']', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

func trailing(b []byte, i int) error {
	if skipWS(b, i) != len(b) {
		return errors.New("data after the top-level value")
	}
	return nil
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index just past the string starting at b[i] == '"'.
func skipString(b []byte, i int) (int, error) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return 0, errors.New("unterminated string")
}

// skipValue returns the index just past the JSON value starting at b[i]. Nested containers are
// matched by depth; their contents are validated only as far as string boundaries go — the
// members Tollgate reads are validated when decoded, the rest is the receiver's business.
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errors.New("unexpected end of input")
	}
	switch c := b[i]; c {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e, err := skipString(b, j)
				if err != nil {
					return 0, err
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errors.New("unterminated container")
	default:
		j := i
		for j < len(b) {
			switch b[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				if j == i {
					return 0, errors.New("empty value")
				}
				return j, checkLiteral(b[i:j])
			}
			j++
		}
		if j == i {
			return 0, errors.New("empty value")
		}
		return j, checkLiteral(b[i:j])
	}
}

func checkLiteral(v []byte) error {
	switch string(v) {
	case "true", "false", "null":
		return nil
	}
	if v[0] == '-' || (v[0] >= '0' && v[0] <= '9') {
		if !json.Valid(v) {
			return fmt.Errorf("invalid number %q", v)
		}
		return nil
	}
	return fmt.Errorf("invalid literal %q", v)
}
