package demo

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// DefaultMCPURL is where `tollgate call` looks when neither --url nor TOLLGATE_LISTEN says
// otherwise.
const DefaultMCPURL = "http://127.0.0.1:7467/mcp"

// Banner is what `tollgate demo` knows once it is ready.
type Banner struct {
	CLI        string // how to run the tollgate command, e.g. "tollgate" or "go run ./cmd/tollgate"
	MCPURL     string // http://host:port/mcp
	AdminURL   string // http://host:port
	ConsoleURL string // http://host:port/approvals
	Token      string // the admin token
	Upstream   string // the demo MCP server's URL
	Config     string // the config file the demo runs on
}

// String is the banner: where everything is, and the exact commands to try from a second
// terminal — a forwarded call, a denied one, a held one and its approval.
func (b Banner) String() string {
	call := b.CLI + " call"
	if b.MCPURL != DefaultMCPURL {
		call += " --url " + b.MCPURL
	}
	return fmt.Sprintf(`Tollgate demo is running.

  MCP endpoint     %[1]s      (point your MCP client here)
  Approval console %[2]s      (token below)
  Admin API        %[3]s/api/v1/approvals
  Admin token      %[4]s
  Demo upstream    %[5]s
  Config           %[6]s (edit it: Tollgate reloads on save)

Rules: read_*/list_* forward, delete_* need approval, drop_* denied, transfer_* decided by Cedar.

Try it from a second terminal:
  export TOLLGATE_ADMIN_URL=%[3]s TOLLGATE_ADMIN_TOKEN=%[4]s
  %[7]s read_file '{"path":"/etc/motd"}'        # forwarded: prints the file
  %[7]s drop_table '{"table":"orders"}'         # denied by rule "drop_*"
  %[7]s delete_user '{"user_id":"u-002"}'       # held: prints its task id and waits
and approve it from a third terminal (same export), or in the console with the token:
  %[8]s approvals approve tg_…                   # the waiting call prints the result
Stop with Ctrl-C.
`, b.MCPURL, b.ConsoleURL, b.AdminURL, b.Token, b.Upstream, b.Config, call, b.CLI)
}

// HeldLine is the one line the demo prints when a call is held for approval: which tool,
// which task, and how to approve it. Never the arguments; the tool name is quoted when it
// holds anything a terminal could take for control.
func HeldLine(cli, tool, taskID, workflow, consoleURL string) string {
	return fmt.Sprintf("held: %s (task %s, workflow %s): approve with `%s approvals approve %s` or in the console at %s",
		printable(tool), printable(taskID), printable(workflow), cli, printable(taskID), consoleURL)
}

// printable returns s as is when it is short plain text, else quoted and clipped.
func printable(s string) string {
	const max = 128
	plain := len(s) <= max && s != ""
	for _, r := range s {
		if !unicode.IsPrint(r) || r == '`' || unicode.IsSpace(r) {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	if len(s) > max {
		s = strings.ToValidUTF8(s[:max], "") + "…"
	}
	return strconv.QuoteToASCII(s)
}
