package rules

import (
	"encoding/json"
	"fmt"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

// Hints are a tool's MCP annotations as the upstream declared them (spec 2025-11-25
// ToolAnnotations): for each hint, absent, false or true, packed two bits per hint so the
// value is comparable and cheap as a cache key. The zero value is "no annotations".
type Hints uint8

// Hint identifies one annotation.
type Hint uint8

const (
	ReadOnly Hint = iota
	Destructive
	Idempotent
	OpenWorld
)

var hintNames = [...]string{
	ReadOnly:    config.HintReadOnly,
	Destructive: config.HintDestructive,
	Idempotent:  config.HintIdempotent,
	OpenWorld:   config.HintOpenWorld,
}

// Names of the hints, in Hint order.
func (h Hint) String() string { return hintNames[h] }

func hintByName(name string) (Hint, bool) {
	for i, n := range hintNames {
		if n == name {
			return Hint(i), true
		}
	}
	return 0, false
}

const (
	hintAbsent = 0
	hintFalse  = 1
	hintTrue   = 2
)

// With returns h with hint set to v.
func (h Hints) With(hint Hint, v bool) Hints {
	shift := 2 * uint(hint)
	val := Hints(hintFalse)
	if v {
		val = hintTrue
	}
	return h&^(3<<shift) | val<<shift
}

// Declared reports the hint's value and whether the upstream declared it at all.
func (h Hints) Declared(hint Hint) (value, declared bool) {
	switch (h >> (2 * uint(hint))) & 3 {
	case hintTrue:
		return true, true
	case hintFalse:
		return false, true
	}
	return false, false
}

// Value is the hint as the spec reads it: an absent hint takes the spec's default
// (readOnlyHint false, destructiveHint true, idempotentHint false, openWorldHint true), and
// destructiveHint/idempotentHint, which the spec defines only for tools that are not
// read-only, are false/true for a read-only tool. So a missing annotation never makes a tool
// look safer than the spec says.
func (h Hints) Value(hint Hint) bool {
	readOnly, _ := h.Declared(ReadOnly)
	switch hint {
	case Destructive:
		if readOnly {
			return false
		}
	case Idempotent:
		if readOnly {
			return true
		}
	}
	v, ok := h.Declared(hint)
	if ok {
		return v
	}
	return hint == Destructive || hint == OpenWorld
}

// Values returns every hint's Value by name (Cedar's context.annotations).
func (h Hints) Values() map[string]bool {
	out := make(map[string]bool, len(hintNames))
	for i, n := range hintNames {
		out[n] = h.Value(Hint(i))
	}
	return out
}

// ParseHints reads the annotations object of a tool definition. Members that are not
// booleans count as absent; anything that is not an object means no annotations.
func ParseHints(annotations []byte) Hints {
	var m map[string]json.RawMessage
	if len(annotations) == 0 || json.Unmarshal(annotations, &m) != nil {
		return 0
	}
	var h Hints
	for i, n := range hintNames {
		switch string(m[n]) {
		case "true":
			h = h.With(Hint(i), true)
		case "false":
			h = h.With(Hint(i), false)
		}
	}
	return h
}

type hintCond struct {
	hint Hint
	want bool
}

func compileHints(m map[string]bool) ([]hintCond, error) {
	var out []hintCond
	for i, n := range hintNames { // fixed order: deterministic evaluation
		if v, ok := m[n]; ok {
			out = append(out, hintCond{Hint(i), v})
		}
	}
	if len(out) != len(m) {
		for k := range m {
			if _, ok := hintByName(k); !ok {
				return nil, fmt.Errorf("unknown annotation %q", k)
			}
		}
	}
	return out, nil
}

func (h Hints) satisfies(conds []hintCond) bool {
	for _, c := range conds {
		if h.Value(c.hint) != c.want {
			return false
		}
	}
	return true
}
