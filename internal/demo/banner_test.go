package demo

import (
	"strings"
	"testing"
)

// TestBanner: the commands to try name the endpoint only when it is not the default one
// `tollgate call` uses, and carry the admin URL and token.
func TestBanner(t *testing.T) {
	b := Banner{CLI: "tollgate", MCPURL: DefaultMCPURL, AdminURL: "http://127.0.0.1:7469",
		ConsoleURL: "http://127.0.0.1:7469/approvals", Token: "tok-0123456789abcdef"}
	s := b.String()
	for _, want := range []string{
		"export TOLLGATE_ADMIN_URL=http://127.0.0.1:7469 TOLLGATE_ADMIN_TOKEN=tok-0123456789abcdef",
		`tollgate call read_file '{"path":"/etc/motd"}'`,
		`tollgate call drop_table '{"table":"orders"}'`,
		`tollgate call delete_user '{"user_id":"u-002"}'`,
		"tollgate approvals approve tg_",
		"Stop with Ctrl-C",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("banner lacks %q:\n%s", want, s)
		}
	}
	b.MCPURL, b.CLI = "http://127.0.0.1:9999/mcp", "go run ./cmd/tollgate"
	if s := b.String(); !strings.Contains(s, `go run ./cmd/tollgate call --url http://127.0.0.1:9999/mcp read_file`) {
		t.Errorf("moved endpoint not named:\n%s", s)
	}
}

// TestHeldLine: one line naming tool, task and how to approve; a tool name a terminal could
// take for control (or that would break the line) is quoted and clipped.
func TestHeldLine(t *testing.T) {
	got := HeldLine("tollgate", "delete_user", "tg_1", "default", "http://c/approvals")
	want := "held: delete_user (task tg_1, workflow default): approve with `tollgate approvals approve tg_1` or in the console at http://c/approvals"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	for _, tool := range []string{"delete_\x1b[2Juser", "delete user\nheld: fake", "delete_`x`", strings.Repeat("d", 300), "delete_\u202euser"} {
		l := HeldLine("tollgate", tool, "tg_1", "default", "")
		if strings.ContainsAny(l, "\x1b\n\u202e") || len(l) > 400 || !strings.Contains(l, `"delete`) && !strings.Contains(l, `"ddd`) {
			t.Errorf("tool %q printed as %q", tool, l)
		}
	}
}
