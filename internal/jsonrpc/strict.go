package jsonrpc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/tollgate-mcp/tollgate/internal/logcap"
)

// CheckParams refuses params that different JSON decoders would read differently: duplicate
// member names at any depth (encoding/json keeps the last, others the first), invalid UTF-8,
// two members of one object whose names differ only in case or Unicode simple folding, at any
// depth (encoding/json matches names to struct fields case-insensitively and the last match
// wins: {"amount":10,"Amount":100000} is 10 to Cedar and 100000 to a typed Go upstream), and
// top-level members that differ from a known name only in case ("Name" is name to
// encoding/json, nothing to case-sensitive decoders). Tollgate governs what the upstream will
// execute, so such ambiguity must be refused, not resolved.
func CheckParams(b []byte, known ...string) error {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return fmt.Errorf("params must be an object")
	}
	err := members(b, i, func(key []byte, _ span) error {
		for _, k := range known {
			if string(key) != k && bytes.EqualFold(key, []byte(k)) {
				return fmt.Errorf("member %q differs from %q only in case", clip(string(key)), k)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return CheckNames(b)
}

// ErrAmbiguous marks values that decoders would read differently (see CheckNames).
var ErrAmbiguous = errors.New("ambiguous JSON")

// CheckNames walks the JSON value b once and fails on invalid JSON or UTF-8, on a duplicate
// member name, and on two members of one object whose names are equal under FoldName.
func CheckNames(b []byte) error {
	dec := jsontext.NewDecoder(bytes.NewReader(b)) // defaults refuse duplicates and bad UTF-8
	// One frame per open container. Most objects are small: the first name is kept inline and
	// a map is made only for the second.
	type frame struct {
		object       bool
		seen         bool   // a member name was read
		first, fname string // the first member name, folded and as sent
		names        map[string]string
	}
	var stack []frame
	for {
		if dec.StackDepth() == 0 && dec.InputOffset() > 0 {
			// One value only: a stream decoder would read on into a second one.
			if _, err := dec.ReadToken(); err == io.EOF {
				return nil
			}
			return fmt.Errorf("%w: data after the JSON value", ErrAmbiguous)
		}
		tok, err := dec.ReadToken()
		if err != nil {
			// The decoder's text can quote input; say only where it broke.
			return fmt.Errorf("%w: not strictly valid JSON (duplicate member names or invalid UTF-8) near offset %d", ErrAmbiguous, dec.InputOffset())
		}
		switch tok.Kind() {
		case '{', '[':
			stack = append(stack, frame{object: tok.Kind() == '{'})
			continue
		case '}', ']':
			stack = stack[:len(stack)-1]
			continue
		}
		// In an object, a string read as the 1st, 3rd, … token is a member name.
		top := len(stack) - 1
		if top < 0 || !stack[top].object || tok.Kind() != '"' {
			continue
		}
		if _, n := dec.StackIndex(dec.StackDepth()); n%2 != 1 {
			continue
		}
		f := &stack[top]
		name := tok.String()
		folded := FoldName(name)
		switch {
		case !f.seen:
			f.seen, f.first, f.fname = true, folded, name
			continue
		case f.names == nil:
			f.names = map[string]string{f.first: f.fname}
		}
		if prev, ok := f.names[folded]; ok {
			return fmt.Errorf("%w: member names %q and %q differ only in case", ErrAmbiguous, clip(prev), clip(name))
		}
		f.names[folded] = name
	}
}

// FoldName returns the representative of name's class under Unicode simple case folding, so
// FoldName(a) == FoldName(b) exactly when strings.EqualFold(a, b) — the rule encoding/json
// uses to match member names to struct fields ("K", "k" and KELVIN SIGN U+212A are one class).
func FoldName(name string) string {
	ascii := true
	for i := 0; i < len(name); i++ {
		if name[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		// Every ASCII letter's folding orbit has its upper case as the smallest rune.
		return strings.ToUpper(name)
	}
	var sb strings.Builder
	sb.Grow(len(name))
	for _, r := range name {
		sb.WriteRune(smallestFold(r))
	}
	return sb.String()
}

// smallestFold is the smallest rune of r's simple-folding orbit.
func smallestFold(r rune) rune {
	m := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		m = min(m, f)
	}
	return m
}

// clip shortens a client-chosen name for an error message.
func clip(s string) string { return logcap.Clip(s, 64) }
