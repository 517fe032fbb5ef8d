package config

import (
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// String formats the duration the way it is written in YAML ("10m", "1h30m", "250ms").
func (d Duration) String() string {
	s := time.Duration(d).String()
	// time.Duration.String writes "10m0s" and "1h0m0s"; drop the zero tails so
	// values read back exactly as an operator would write them.
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// UnmarshalYAML accepts Go duration strings ("10m", "1h30m", "250ms") and a bare 0.
// Bare numbers other than 0 are rejected: "30" could mean seconds or
// milliseconds, and the environment variables use both.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("must be a duration like \"10m\" or \"250ms\", got a %s", kindName(n))
	}
	v := strings.TrimSpace(n.Value)
	if n.ShortTag() == "!!int" || n.ShortTag() == "!!float" {
		if v == "0" {
			*d = 0
			return nil
		}
		return fmt.Errorf("must be a duration with a unit, like \"10m\" or \"250ms\"; a bare number %q is ambiguous", v)
	}
	if n.ShortTag() == "!!null" {
		*d = 0
		return nil
	}
	td, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("must be a duration like \"10m\" or \"250ms\", got %q", v)
	}
	if td < 0 {
		return fmt.Errorf("must not be negative, got %q", v)
	}
	*d = Duration(td)
	return nil
}

// MarshalYAML writes the duration as a string such as "10m".
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.AliasNode:
		return "alias"
	case yaml.DocumentNode:
		return "document"
	default:
		return "scalar"
	}
}
