package main

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// What `tollgate call` prints comes from the server: the tool's text, error messages, task ids,
// status messages, the console URL. A server (or the tool behind it) must not drive the
// operator's terminal with escape sequences, rewrite the line with a carriage return, or reorder
// it with bidirectional controls, so such characters are shown quoted, Go-style (`\x1b`,
// `\u202e`), as `tollgate approvals` does for what callers and approvers wrote.

// unsafeRune reports whether r is shown quoted: control characters (C0, DEL, C1), bidirectional
// formatting characters, the line and paragraph separators, and U+FFFD (invalid UTF-8 is
// quoted byte by byte before this is asked).
func unsafeRune(r rune) bool {
	switch {
	case unicode.IsControl(r), r == utf8.RuneError, r == '\u2028', r == '\u2029':
		return true
	case r == '\u061c', r == '\u200e', r == '\u200f', r >= '\u202a' && r <= '\u202e', r >= '\u2066' && r <= '\u2069':
		return true
	}
	return false
}

// quoteUnsafe returns s with every unsafe rune and invalid byte quoted; keep lists the runes
// left as they are.
func quoteUnsafe(s string, keep func(rune) bool) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && w == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keep != nil && keep(r):
			b.WriteRune(r)
		case r < 0x80 && unsafeRune(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+w])
		}
		i += w
	}
	return b.String()
}

// oneLine is s for a line of its own: newlines and tabs quoted too.
func oneLine(s string) string { return quoteUnsafe(s, nil) }

// textBlock is s for multi-line output (a tool's text, indented JSON): newlines and tabs kept,
// a carriage return before a newline dropped.
func textBlock(s string) string {
	return quoteUnsafe(strings.ReplaceAll(s, "\r\n", "\n"), func(r rune) bool { return r == '\n' || r == '\t' })
}

// jsonText is JSON text for --json: the unsafe runes that valid JSON may carry raw (inside
// strings: DEL, C1 controls, bidirectional controls, U+2028/U+2029) written as \u escapes,
// which leaves the JSON's meaning unchanged. JSON's own whitespace is kept.
func jsonText(b []byte) string {
	var out strings.Builder
	for _, r := range string(b) {
		if r != '\n' && r != '\t' && r != '\r' && unsafeRune(r) && r != utf8.RuneError {
			fmt.Fprintf(&out, `\u%04x`, r)
			continue
		}
		out.WriteRune(r)
	}
	return out.String()
}
