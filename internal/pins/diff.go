package pins

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Change is one pinned field that differs between the accepted and the new definition.
type Change struct {
	Field string `json:"field"`
	Old   string `json:"old,omitempty"` // indented JSON ("" = absent)
	New   string `json:"new,omitempty"`
	// Lines is a line diff of Old and New: "  " kept, "- " removed, "+ " added.
	Lines []string `json:"lines"`
}

// maxDiffLines bounds the line diff (definitions are bounded, this keeps it quadratic-safe).
const maxDiffLines = 400

// Diff lists the fields that differ between two canonical definitions (nil old: a new tool).
func Diff(old, cur []byte) []Change {
	var o, n map[string]json.RawMessage
	_ = json.Unmarshal(old, &o)
	_ = json.Unmarshal(cur, &n)
	var out []Change
	for _, f := range Fields {
		a, b := pretty(o[f]), pretty(n[f])
		if a == b {
			continue
		}
		out = append(out, Change{Field: f, Old: a, New: b, Lines: lineDiff(a, b)})
	}
	return out
}

func pretty(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if json.Indent(&buf, raw, "", "  ") != nil {
		return string(raw)
	}
	return buf.String()
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// lineDiff is a longest-common-subsequence line diff; past maxDiffLines it shows all of a as
// removed and all of b as added.
func lineDiff(a, b string) []string {
	x, y := split(a), split(b)
	var out []string
	if len(x) > maxDiffLines || len(y) > maxDiffLines {
		for _, l := range x {
			out = append(out, "- "+l)
		}
		for _, l := range y {
			out = append(out, "+ "+l)
		}
		return out
	}
	// lcs[i][j] = LCS length of x[i:], y[j:]
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(x) && j < len(y) {
		switch {
		case x[i] == y[j]:
			out = append(out, "  "+x[i])
			i++
			j++
		case lcs[i+1][j] >= lcs[i][j+1]:
			out = append(out, "- "+x[i])
			i++
		default:
			out = append(out, "+ "+y[j])
			j++
		}
	}
	for ; i < len(x); i++ {
		out = append(out, "- "+x[i])
	}
	for ; j < len(y); j++ {
		out = append(out, "+ "+y[j])
	}
	return out
}

// Summary is a bounded plain-text summary of diff for notifications: each changed field's
// name, then its removed and added lines ("- …", "+ …"; unchanged lines left out), at most
// maxLines lines of at most maxLine runes each. truncated says something was left out. The
// text is the upstream's and untrusted: each channel escapes it for its own markup.
func Summary(diff []Change, maxLines, maxLine int) (lines []string, truncated bool) {
	add := func(l string) bool {
		if len(lines) >= maxLines {
			truncated = true
			return false
		}
		if r := []rune(l); len(r) > maxLine {
			l, truncated = string(r[:max(maxLine-1, 0)])+"…", true
		}
		lines = append(lines, l)
		return true
	}
	for _, c := range diff {
		if !add(c.Field + ":") {
			break
		}
		for _, l := range c.Lines {
			if strings.HasPrefix(l, "  ") {
				continue
			}
			if !add("  " + l) {
				break
			}
		}
	}
	return lines, truncated
}

// SummaryText is Summary as one text ("" = nothing changed that can be shown), ending with a
// pointer to the full diff when lines were left out.
func SummaryText(diff []Change, maxLines, maxLine int) string {
	lines, cut := Summary(diff, maxLines, maxLine)
	if len(lines) == 0 {
		return ""
	}
	if cut {
		lines = append(lines, "… (the full diff is in the console and GET /api/v1/pins)")
	}
	return strings.Join(lines, "\n")
}
