package main

import (
	"io"
	"slices"
	"testing"
)

func TestParseRunFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		ok      bool
		config  string
		argv    []string
		approve []string
	}{
		{args: nil, ok: true},
		{args: []string{"--config", "x.yaml"}, ok: true, config: "x.yaml"},
		{args: []string{"--", "npx", "-y", "server", "--flag"}, ok: true, argv: []string{"npx", "-y", "server", "--flag"}},
		{args: []string{"--approve", "write_*", "--approve", "edit_*", "--", "srv"}, ok: true, argv: []string{"srv"}, approve: []string{"write_*", "edit_*"}},
		{args: []string{"--config", "c.yaml", "--", "srv", "--", "x"}, ok: true, config: "c.yaml", argv: []string{"srv", "--", "x"}},
		{args: []string{"srv"}},                       // a command without --
		{args: []string{"--approve", "x"}},            // a shorthand without a command
		{args: []string{"--env", "TOKEN"}},            // the same
		{args: []string{"--"}},                        // -- and nothing after it
		{args: []string{"--no-such-flag", "--", "x"}}, // flag error
	} {
		f, ok := parseRunFlags(tc.args, io.Discard)
		if ok != tc.ok {
			t.Errorf("%q: ok %v, want %v", tc.args, ok, tc.ok)
			continue
		}
		if ok && (f.config != tc.config || !slices.Equal(f.argv, tc.argv) || !slices.Equal(f.approve, tc.approve)) {
			t.Errorf("%q: config %q argv %q approve %q", tc.args, f.config, f.argv, f.approve)
		}
	}
}
