package jsonrpc

import (
	"bytes"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"
)

// CheckParams refuses params that different JSON decoders would read differently: duplicate
// member names at any depth (encoding/json keeps the last, others the first), invalid UTF-8,
// and top-level members that differ from a known name only in case (encoding/json matches
// "Name" to name, case-sensitive decoders do not). Tollgate governs what the upstream will
// execute, so such ambiguity must be refused, not resolved.
func CheckParams(b []byte, known ...string) error {
	if !jsontext.Value(b).IsValid() {
		return fmt.Errorf("params are not strictly valid JSON (duplicate member names or invalid UTF-8)")
	}
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return fmt.Errorf("params must be an object")
	}
	return members(b, i, func(key []byte, _ span) error {
		for _, k := range known {
			if string(key) != k && bytes.EqualFold(key, []byte(k)) {
				return fmt.Errorf("member %q differs from %q only in case", key, k)
			}
		}
		return nil
	})
}
