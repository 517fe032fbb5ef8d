package gwtools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/tollgate-mcp/tollgate/internal/events"
	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
)

// args are a tool call's arguments, checked field by field so errors name the field.
type args map[string]json.RawMessage

func parseArgs(raw json.RawMessage) (args, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return args{}, nil
	}
	var a args
	if err := json.Unmarshal(raw, &a); err != nil || a == nil {
		return nil, errors.New("invalid arguments: expected a JSON object")
	}
	return a, nil
}

// only rejects keys outside allowed, so a misspelt argument is reported instead of ignored.
func (a args) only(allowed ...string) error {
	var unknown []string
	for k := range a {
		if !slices.Contains(allowed, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	if len(allowed) == 0 {
		return fmt.Errorf("unknown argument(s) %s: this tool takes no arguments", strings.Join(unknown, ", "))
	}
	return fmt.Errorf("unknown argument(s) %s; allowed: %s", strings.Join(unknown, ", "), strings.Join(allowed, ", "))
}

func (a args) str(key string) (string, bool, error) {
	raw, ok := a[key]
	if !ok || string(raw) == "null" {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false, fmt.Errorf("%s must be a string", key)
	}
	return s, true, nil
}

func (a args) requiredStr(key string) (string, error) {
	s, ok, err := a.str(key)
	if err != nil {
		return "", err
	}
	if !ok || s == "" {
		return "", fmt.Errorf("%s is required", key)
	}
	return s, nil
}

func (a args) int(key string) (int64, bool, error) {
	raw, ok := a[key]
	if !ok || string(raw) == "null" {
		return 0, false, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false, fmt.Errorf("%s must be an integer", key)
	}
	return int64(f), true, nil
}

func (a args) bool(key string) (bool, error) {
	raw, ok := a[key]
	if !ok || string(raw) == "null" {
		return false, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, fmt.Errorf("%s must be true or false", key)
	}
	return b, nil
}

// result is one CallToolResult under construction. Either rpcErr is set (the call fails at the
// JSON-RPC level), raw is set (a stored upstream CallToolResult passed through), or the
// content/structured/isError fields describe Tollgate's own result.
type result struct {
	rpcErr *jsonrpc.Error

	raw       json.RawMessage // stored CallToolResult to pass through (tollgate_get_task_result)
	extraText []string        // text blocks appended to raw's content

	text       []string       // content text blocks
	structured map[string]any // structuredContent; also rendered as a JSON text block
	isError    bool
	meta       map[string]any // _meta keys to set
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// errorResult is a tool-level error (isError) the model can read (MCP convention for bad
// arguments and failed operations).
func errorResult(msg string) result {
	return result{text: []string{msg}, isError: true}
}

// okResult is a summary line plus structured content.
func okResult(summary string, structured map[string]any) result {
	return result{text: []string{summary}, structured: structured}
}

// appendEvents adds undelivered events (seed 002 "events_since_last_response").
func (r *result) appendEvents(b events.Batch) {
	if len(b.Events) == 0 && b.Evicted == 0 {
		return
	}
	block := map[string]any{"events_since_last_response": nonNilEvents(b.Events)}
	if b.Evicted > 0 {
		block["events_evicted"] = b.Evicted
	}
	text, _ := jsonrpc.Marshal(block)
	if r.raw != nil {
		r.extraText = append(r.extraText, string(text))
		return
	}
	if r.structured == nil {
		r.text = append(r.text, string(text))
		return
	}
	// The JSON text block rendered from structuredContent carries them too.
	for k, v := range block {
		r.structured[k] = v
	}
}

func nonNilEvents(es []events.Event) []events.Event {
	if es == nil {
		return []events.Event{}
	}
	return es
}

func (r *result) encode() (json.RawMessage, error) {
	if r.raw != nil {
		return r.encodeRaw()
	}
	content := make([]textContent, 0, len(r.text)+1)
	content = append(content, textContent{"text", r.text[0]})
	if r.structured != nil {
		// MCP 2025-11-25 tools: structured content SHOULD also be returned as serialized JSON text.
		js, err := jsonrpc.Marshal(r.structured)
		if err != nil {
			return nil, err
		}
		content = append(content, textContent{"text", string(js)})
	}
	for _, t := range r.text[1:] {
		content = append(content, textContent{"text", t})
	}
	out := struct {
		Meta              map[string]any `json:"_meta,omitempty"`
		Content           []textContent  `json:"content"`
		StructuredContent map[string]any `json:"structuredContent,omitempty"`
		IsError           bool           `json:"isError,omitempty"`
	}{r.meta, content, r.structured, r.isError}
	return jsonrpc.Marshal(out)
}

// encodeRaw edits a stored CallToolResult minimally: _meta keys set, extra text blocks appended
// to content, every other field kept byte for byte.
func (r *result) encodeRaw() (json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(r.raw, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("stored tool result is not a JSON object")
	}
	if len(r.meta) > 0 {
		meta := map[string]json.RawMessage{}
		if m, ok := obj["_meta"]; ok {
			_ = json.Unmarshal(m, &meta) // a malformed _meta is replaced
		}
		for k, v := range r.meta {
			b, err := jsonrpc.Marshal(v)
			if err != nil {
				return nil, err
			}
			meta[k] = b
		}
		b, err := jsonrpc.Marshal(meta)
		if err != nil {
			return nil, err
		}
		obj["_meta"] = b
	}
	if len(r.extraText) > 0 {
		var content []json.RawMessage
		if c, ok := obj["content"]; ok {
			if err := json.Unmarshal(c, &content); err != nil {
				return nil, fmt.Errorf("stored tool result content is not an array")
			}
		}
		for _, t := range r.extraText {
			b, err := jsonrpc.Marshal(textContent{"text", t})
			if err != nil {
				return nil, err
			}
			content = append(content, b)
		}
		b, err := jsonrpc.Marshal(content)
		if err != nil {
			return nil, err
		}
		obj["content"] = b
	}
	return jsonrpc.Marshal(obj)
}
