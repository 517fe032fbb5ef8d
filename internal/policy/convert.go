package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/cedar-policy/cedar-go/types"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/tollgate-mcp/tollgate/internal/jsonrpc"
)

// Limits on tool arguments handed to Cedar. Arguments come from clients, so the converter
// bounds size, nesting and node count before Cedar sees them.
const (
	MaxArgumentBytes = 1 << 20 // 1 MiB
	MaxDepth         = 32      // nested objects/arrays
	MaxNodes         = 10000   // every JSON value, containers included
)

// ErrArguments wraps every FromJSON rejection so callers can tell bad input from policy errors.
var ErrArguments = errors.New("policy: invalid tool arguments")

// errOutOfRange names no value: error texts never carry tool arguments.
var errOutOfRange = fmt.Errorf("%w: integer out of the 64-bit range", ErrArguments)

// FromJSON converts tool arguments to a Cedar value with Tollgate's own mapping (docs/contract.md §3),
// not Cedar's entity-JSON format, so a client can never smuggle entity references or
// extension values into a policy:
//
//   - objects → records, arrays → sets (Cedar sets are unordered and drop duplicates);
//   - strings → String, booleans → Boolean;
//   - numbers with an integral value (1, -3, 1.0, 2e3) → Long; integral values outside
//     int64 are an error (a policy must never compare a silently clamped amount);
//   - other numbers → decimal when they have at most 4 fractional digits and fit Cedar's
//     decimal range (e.g. 12.5 → decimal("12.5")), else a String holding the JSON text
//     (e.g. "0.00001"), so policies see the exact value rather than a rounded one;
//   - null → the key is left out of its record (Cedar has no null, so `has` is false)
//     and the element is left out of its set; a top-level null or empty input is an
//     empty record (a call without arguments);
//   - the keys "__entity" and "__extn" are rejected at any depth, as are duplicate keys,
//     keys of one object that differ only in case or Unicode simple folding ("amount" and
//     "Amount": a typed Go upstream binds both to one field, the last winning) and invalid
//     UTF-8 — Tollgate and the upstream might otherwise read different values.
//
// Input is limited to MaxArgumentBytes, MaxDepth and MaxNodes.
func FromJSON(raw json.RawMessage) (types.Value, error) {
	if len(raw) > MaxArgumentBytes {
		return nil, fmt.Errorf("%w: %d bytes exceeds the %d byte limit", ErrArguments, len(raw), MaxArgumentBytes)
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return types.NewRecord(nil), nil
	}
	c := converter{dec: jsontext.NewDecoder(bytes.NewReader(raw))}
	tok, err := c.next()
	if err != nil {
		return nil, err
	}
	v, _, err := c.value(tok, 0)
	if err != nil {
		return nil, err
	}
	if _, err := c.dec.ReadToken(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data after the JSON value", ErrArguments)
	}
	return v, nil
}

type converter struct {
	dec   *jsontext.Decoder
	nodes int
}

func (c *converter) next() (jsontext.Token, error) {
	tok, err := c.dec.ReadToken()
	if err != nil {
		// The decoder's message can quote input bytes; report only where it broke. Its
		// defaults also reject duplicate names and invalid UTF-8.
		return jsontext.Token{}, fmt.Errorf("%w: malformed JSON, duplicate key or invalid UTF-8 near offset %d", ErrArguments, c.dec.InputOffset())
	}
	return tok, nil
}

// value converts the value starting at tok. ok is false for null, which callers omit.
func (c *converter) value(tok jsontext.Token, depth int) (v types.Value, ok bool, err error) {
	c.nodes++
	if c.nodes > MaxNodes {
		return nil, false, fmt.Errorf("%w: more than %d values", ErrArguments, MaxNodes)
	}
	switch tok.Kind() {
	case 'n':
		return nil, false, nil
	case 't', 'f':
		return types.Boolean(tok.Bool()), true, nil
	case '"':
		return types.String(tok.String()), true, nil
	case '0':
		v, err := convertNumber(tok.String())
		return v, err == nil, err
	case '{', '[':
		if depth+1 > MaxDepth {
			return nil, false, fmt.Errorf("%w: nesting deeper than %d", ErrArguments, MaxDepth)
		}
		if tok.Kind() == '{' {
			r, err := c.object(depth + 1)
			return r, err == nil, err
		}
		s, err := c.array(depth + 1)
		return s, err == nil, err
	}
	return nil, false, fmt.Errorf("%w: unexpected JSON token", ErrArguments)
}

func (c *converter) object(depth int) (types.Value, error) {
	m := types.RecordMap{}
	folded := map[string]struct{}{}
	for {
		tok, err := c.next()
		if err != nil {
			return nil, err
		}
		if tok.Kind() == '}' {
			return types.NewRecord(m), nil
		}
		key := tok.String()
		// Cedar's JSON formats give these keys meaning (entity and extension escapes).
		if key == "__entity" || key == "__extn" {
			return nil, fmt.Errorf("%w: reserved key %q", ErrArguments, key)
		}
		f := jsonrpc.FoldName(key)
		if _, dup := folded[f]; dup {
			// No key in the text: error texts never carry tool arguments.
			return nil, fmt.Errorf("%w: two keys of one object differ only in case near offset %d", ErrArguments, c.dec.InputOffset())
		}
		folded[f] = struct{}{}
		tok, err = c.next()
		if err != nil {
			return nil, err
		}
		v, ok, err := c.value(tok, depth)
		if err != nil {
			return nil, err
		}
		if ok {
			m[types.String(key)] = v
		}
	}
}

func (c *converter) array(depth int) (types.Value, error) {
	var vals []types.Value
	for {
		tok, err := c.next()
		if err != nil {
			return nil, err
		}
		if tok.Kind() == ']' {
			return types.NewSet(vals...), nil
		}
		v, ok, err := c.value(tok, depth)
		if err != nil {
			return nil, err
		}
		if ok {
			vals = append(vals, v)
		}
	}
}

// convertNumber maps a JSON number (already validated by the decoder) without going through
// float64, so large integers and decimals keep their exact value.
func convertNumber(s string) (types.Value, error) {
	neg := strings.HasPrefix(s, "-")
	body := strings.TrimPrefix(s, "-")
	mant, expText, hasExp := strings.Cut(strings.ToLower(body), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	exp := -len(frac)
	if hasExp {
		e, err := strconv.Atoi(strings.TrimPrefix(expText, "+"))
		if err != nil {
			// An exponent beyond int range: the value is either 0, a huge integer or
			// vanishingly small.
			switch {
			case digits == "":
				return types.Long(0), nil
			case strings.HasPrefix(expText, "-"):
				return types.String(s), nil
			default:
				return nil, errOutOfRange
			}
		}
		exp += e
	}
	if digits == "" {
		return types.Long(0), nil
	}
	// Normalise: strip trailing zeros into the exponent, so 1.50 and 15e-1 read the same.
	for strings.HasSuffix(digits, "0") {
		digits = digits[:len(digits)-1]
		exp++
	}
	if exp >= 0 {
		// Integral value: digits × 10^exp must fit int64 (19 digits at most).
		if len(digits)+exp > 19 {
			return nil, errOutOfRange
		}
		n, err := strconv.ParseInt(sign(neg)+digits+strings.Repeat("0", exp), 10, 64)
		if err != nil {
			return nil, errOutOfRange
		}
		return types.Long(n), nil
	}
	// Fractional value: a decimal if it needs at most 4 fractional digits and fits.
	if -exp <= 4 && len(digits)+4+exp <= 19 {
		scaled := digits + strings.Repeat("0", 4+exp)
		if n, err := strconv.ParseInt(sign(neg)+scaled, 10, 64); err == nil {
			if d, err := types.NewDecimal(n, -4); err == nil {
				return d, nil
			}
		}
	}
	return types.String(s), nil
}

func sign(neg bool) string {
	if neg {
		return "-"
	}
	return ""
}
