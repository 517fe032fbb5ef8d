// Package pins keeps a digest of each upstream tool's definition and quarantines a tool whose
// definition changed until an approver accepts it (docs/contract.md "Pinned tool
// definitions"). What reaches the model (tools/list) and what rules match (match_annotations,
// Cedar's context.annotations) is then what a human accepted: a rug pull — a new description
// that instructs the model, destructiveHint flipped to false — is held back.
//
// Pins live in the task store (store.Pins), so every replica and a restart see the same.
package pins

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Fields are the members of a tool definition that are pinned (spec 2025-11-25 and
// 2026-07-28 Tool); execution and _meta are Tollgate's or transport business.
var Fields = []string{"name", "title", "description", "inputSchema", "outputSchema", "annotations"}

// Canonical returns a tool's name and its pinned definition as canonical JSON: only Fields,
// object keys sorted, no insignificant space, numbers as written.
func Canonical(tool []byte) (string, []byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(tool, &m); err != nil {
		return "", nil, fmt.Errorf("tool definition: %w", err)
	}
	var name string
	if err := json.Unmarshal(m["name"], &name); err != nil || name == "" {
		return "", nil, fmt.Errorf("tool definition without a name")
	}
	out := map[string]any{}
	for _, f := range Fields {
		raw, ok := m[f]
		if !ok || string(raw) == "null" {
			continue
		}
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			return "", nil, fmt.Errorf("tool %q: %s: %w", name, f, err)
		}
		out[f] = v
	}
	b, err := marshal(out)
	return name, b, err
}

// marshal writes v as compact JSON with sorted keys, without HTML escaping.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// Digest is the digest of a canonical definition: "sha256:" and 64 hex digits.
func Digest(canon []byte) string {
	s := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(s[:])
}
