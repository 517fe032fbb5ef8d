// Package mrkdwn writes text for Slack's mrkdwn format, shared by the incoming-webhook messages
// (package notify) and the interactive ones (package slack): values a caller chose — tool
// names, arguments, reasons, approver names — are escaped so they cannot forge links or
// mentions, and cut to Slack's field limits.
package mrkdwn

import (
	"strings"
	"unicode/utf8"
)

var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// Escape escapes the three characters mrkdwn treats as control sequences (Slack "Formatting
// text for app surfaces": &, <, >).
func Escape(s string) string { return escaper.Replace(s) }

// Code is s escaped for inside a code span or block: a backtick would end it early.
func Code(s string) string { return strings.ReplaceAll(Escape(s), "`", "'") }

// Truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "… (truncated)"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
