package pins

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// File is a pin file (`tollgate pins export`, governance.pins.file): the accepted definition
// of each tool, kept in git and reviewed like code.
type File struct {
	Version int       `json:"version"` // 1
	Tools   []FilePin `json:"tools"`
}

// FilePin is one tool's accepted definition in a pin file.
type FilePin struct {
	Tool       string          `json:"tool"`
	Digest     string          `json:"digest"`
	Definition json.RawMessage `json:"definition"`
}

// maxFileBytes bounds a pin file read at start.
const maxFileBytes = 64 << 20

// ReadFile reads and checks a pin file: strict JSON, version 1, every digest the digest of
// its definition's canonical form, each tool once.
func ReadFile(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("governance.pins.file: %w", err)
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("governance.pins.file %s: %w", path, err)
	}
	if len(b) > maxFileBytes {
		return nil, fmt.Errorf("governance.pins.file %s: larger than %d bytes", path, maxFileBytes)
	}
	f, err := ParseFile(b)
	if err != nil {
		return nil, fmt.Errorf("governance.pins.file %s: %w", path, err)
	}
	return f, nil
}

// ParseFile parses and checks a pin file's bytes (see ReadFile).
func ParseFile(b []byte) (*File, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var f File
	if err := d.Decode(&f); err != nil {
		return nil, fmt.Errorf("not a pin file: %w", err)
	}
	if d.More() {
		return nil, fmt.Errorf("not a pin file: data after the object")
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("version must be 1, got %d", f.Version)
	}
	seen := map[string]bool{}
	for i, p := range f.Tools {
		name, canon, err := Canonical(p.Definition)
		if err != nil {
			return nil, fmt.Errorf("tools[%d]: %w", i, err)
		}
		if name != p.Tool {
			return nil, fmt.Errorf("tools[%d]: tool %q but its definition is named %q", i, p.Tool, name)
		}
		if seen[name] {
			return nil, fmt.Errorf("tools[%d]: tool %q appears twice", i, name)
		}
		seen[name] = true
		if got := Digest(canon); got != p.Digest {
			return nil, fmt.Errorf("tools[%d]: tool %q: digest mismatch: the file says %s, its definition is %s", i, name, p.Digest, got)
		}
		f.Tools[i].Definition = canon
	}
	return &f, nil
}

// Export is the pin file of the accepted definitions in the store.
func (k *Keeper) Export(ctx context.Context) (*File, error) {
	all, err := k.st.ListPins(ctx)
	if err != nil {
		return nil, err
	}
	f := &File{Version: 1, Tools: []FilePin{}}
	for _, r := range all {
		var p Pin
		if json.Unmarshal(r.Data, &p) != nil || p.Digest == "" {
			continue
		}
		f.Tools = append(f.Tools, FilePin{Tool: p.Tool, Digest: p.Digest, Definition: p.Definition})
	}
	return f, nil
}
