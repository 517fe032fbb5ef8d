package server

import (
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

// TestRunAsNeedsRoot: sources[0].run_as is refused at start unless Tollgate runs as root (a
// server would otherwise fail at every session's start), and passed to the transport as is.
func TestRunAsNeedsRoot(t *testing.T) {
	src := config.Source{Command: "srv", RunAs: config.RunAs{UID: 65533, GID: 65534}}
	if _, err := runAs(src, 1000); err == nil || !strings.Contains(err.Error(), "sources[0].run_as") {
		t.Fatalf("as uid 1000: %v, want a refusal naming sources[0].run_as", err)
	}
	c, err := runAs(src, 0)
	if err != nil || c == nil || c.UID != 65533 || c.GID != 65534 {
		t.Fatalf("as root: %+v, %v", c, err)
	}
	if c, err := runAs(config.Source{Command: "srv"}, 1000); c != nil || err != nil {
		t.Fatalf("without run_as: %+v, %v", c, err)
	}
}
