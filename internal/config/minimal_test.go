package config

import (
	"errors"
	"testing"
)

// TestMinimalConfig: the config the CLI offers when none is found parses as printed, with
// only defaults besides, and Resolve's "nothing found" is ErrNoConfig (the CLI's cue to offer it).
func TestMinimalConfig(t *testing.T) {
	c, err := Parse([]byte(MinimalConfig), "", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("MinimalConfig: %v", err)
	}
	if len(c.Sources) != 1 || len(c.Governance.Rules) != 2 || c.Tasks.Store.Type != StoreAuto {
		t.Errorf("MinimalConfig = %+v", c)
	}
	_, err = Resolve("", func(string) string { return "" }, func(string) bool { return false })
	if !errors.Is(err, ErrNoConfig) {
		t.Errorf("Resolve with nothing found: %v, want ErrNoConfig", err)
	}
	if _, err := Resolve("missing.yaml", nil, func(string) bool { return false }); err == nil || errors.Is(err, ErrNoConfig) {
		t.Errorf("Resolve of a missing --config: %v, want an error that is not ErrNoConfig", err)
	}
}
