package config

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
)

// FieldError is one configuration problem, located by its YAML path
// (e.g. "governance.rules[2].match") and, when known, its line in the file.
type FieldError struct {
	Path string
	Msg  string
	// Line is the 1-based line of the offending key or value; 0 when unknown
	// (for example a problem that comes from an environment override).
	Line int
}

// Error returns "<path>: <msg>", followed by " (line N)" when the line is known.
func (e *FieldError) Error() string {
	s := e.Msg
	if e.Path != "" {
		s = e.Path + ": " + e.Msg
	}
	if e.Line > 0 {
		s += fmt.Sprintf(" (line %d)", e.Line)
	}
	return s
}

// sortByLine orders errors by file line, stably, with line-less ones last, so a
// report reads top to bottom like the file.
func sortByLine(errs []error) {
	line := func(e error) int {
		if fe, ok := e.(*FieldError); ok && fe.Line > 0 {
			return fe.Line
		}
		return math.MaxInt
	}
	slices.SortStableFunc(errs, func(a, b error) int { return cmp.Compare(line(a), line(b)) })
}

// FieldErrors unpacks an error returned by Parse, Load or Validate into its
// *FieldError parts, in order. Errors of other types are skipped.
func FieldErrors(err error) []*FieldError {
	if err == nil {
		return nil
	}
	var out []*FieldError
	var walk func(error)
	walk = func(e error) {
		if fe, ok := e.(*FieldError); ok {
			out = append(out, fe)
			return
		}
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		if u := errors.Unwrap(e); u != nil {
			walk(u)
		}
	}
	walk(err)
	return out
}
