package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/internal/mcpclient"
)

// TestDenialNamesPolicy: a call a Cedar policy denied is reported with the policy's id, as the
// API's data.policies names it; a rule's denial still names the rule.
func TestDenialNamesPolicy(t *testing.T) {
	for _, tc := range []struct {
		name string
		data map[string]any
		want string
	}{
		{"rule", map[string]any{"error": "PolicyDenied", "rule": "drop_*", "tool": "drop_table"},
			`denied by rule "drop_*": `},
		{"cedar", map[string]any{"error": "PolicyDenied", "rule": "delete_*", "tool": "delete_file", "policies": []string{"forbid-etc"}},
			`denied by Cedar policy "forbid-etc" under rule "delete_*": `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, _ := json.Marshal(tc.data)
			var b bytes.Buffer
			printError(&b, "x", &mcpclient.RPCError{Code: -32003, Message: "PolicyDenied: tool is denied", Data: data})
			if !strings.HasPrefix(b.String(), tc.want) {
				t.Fatalf("got %q, want prefix %q", b.String(), tc.want)
			}
		})
	}
}
