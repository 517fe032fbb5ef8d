package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// partialWrite writes cfg into path in place the way a slow writer does: the part before
// cut, a pause, then the rest (O_TRUNC, no rename). It returns when the file is complete.
func partialWrite(t *testing.T, path, cfg, cut string, pause time.Duration) {
	t.Helper()
	i := strings.Index(cfg, cut)
	if i < 0 {
		t.Fatalf("cut %q not in config", cut)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(cfg[:i]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(pause)
	if _, err := f.WriteString(cfg[i:]); err != nil {
		t.Fatal(err)
	}
}

// taskSupport is each tool's execution.taskSupport in tools/list ("" when absent).
func taskSupport(t *testing.T, c *testkit.RPC) map[string]string {
	m := c.Post(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`).Message(t)
	out := map[string]string{}
	for _, tl := range testkit.Dig(m, "result", "tools").([]any) {
		s, _ := testkit.Dig(tl, "execution", "taskSupport").(string)
		out[testkit.Dig(tl, "name").(string)] = s
	}
	return out
}

// watchWhileWriting polls governance (tools/list) while write runs and until done reports the
// complete file applied; every observation must pass ok.
func watchWhileWriting(t *testing.T, c *testkit.RPC, write func(), ok func(map[string]string) string, done func(map[string]string) bool) {
	t.Helper()
	finished := make(chan struct{})
	go func() { defer close(finished); write() }()
	deadline := time.Now().Add(30 * time.Second)
	for written := false; ; time.Sleep(20 * time.Millisecond) {
		s := taskSupport(t, c)
		if bad := ok(s); bad != "" {
			<-finished
			t.Fatalf("a partly written config governed: %s (%v)", bad, s)
		}
		select {
		case <-finished:
			written = true
		default:
		}
		if written && done(s) {
			return
		}
		if time.Now().After(deadline) {
			<-finished
			t.Fatalf("the complete config was not applied within 30s: %v", s)
		}
	}
}

const partialRules = `governance:
  defaults: {action: forward}
  rules:
    - {match: "read_*", action: forward}
    - {match: "delete_*", action: approve}
    - {match: "transfer_*", action: deny}
`

// TestReloadNeverAppliesPartialWrite (issue 30): a writer rewrites the config in place and
// pauses after the first rule (a prefix that is valid YAML and drops the approval and the deny
// rule). The prefix never governs; the complete file is applied once written. The old
// reloader (150 ms of quiet, then whatever parses) applied the prefix during the pause.
func TestReloadNeverAppliesPartialWrite(t *testing.T) {
	_, upURL := testkit.StartDemo(t)
	tail := "tasks: {sync_approval: error}\n"
	g := testkit.StartGateway(t, testkit.BasicConfig(upURL, partialRules+tail), nil, nil)
	g.WaitReady(t)
	c := g.NewClient(t)
	before := taskSupport(t, c)
	if before["delete_user"] != "required" {
		t.Fatalf("before: %v", before)
	}
	final := testkit.BasicConfig(upURL, partialRules+`    - {match: "list_*", action: approve}
`+tail)
	path := filepath.Join(g.Dir, "tollgate.yaml")
	watchWhileWriting(t, c, func() { partialWrite(t, path, final, `    - {match: "delete_*"`, 1500*time.Millisecond) },
		func(s map[string]string) string {
			if s["delete_user"] != "required" {
				return "delete_user no longer needs approval"
			}
			if s["transfer_funds"] != before["transfer_funds"] {
				return "transfer_funds is no longer denied"
			}
			return ""
		},
		func(s map[string]string) bool { return s["list_users"] == "required" })
}

// TestReloadEndMarker: with server.reload.end_marker, a prefix is not used even when the
// writer pauses longer than server.reload.weaker_settle.
func TestReloadEndMarker(t *testing.T) {
	_, upURL := testkit.StartDemo(t)
	const marker = "# end of tollgate config"
	tail := "tasks: {sync_approval: error}\nserver: {reload: {settle: 100ms, weaker_settle: 300ms, end_marker: \"" + marker + "\"}}\n"
	// The reload settings come first so that the prefix keeps them.
	cfg := func(extra string) string {
		return testkit.BasicConfig(upURL, tail+partialRules+extra+marker+"\n")
	}
	g := testkit.StartGateway(t, cfg(""), nil, nil)
	g.WaitReady(t)
	c := g.NewClient(t)
	final := cfg(`    - {match: "list_*", action: approve}
`)
	path := filepath.Join(g.Dir, "tollgate.yaml")
	watchWhileWriting(t, c, func() { partialWrite(t, path, final, `    - {match: "delete_*"`, 1500*time.Millisecond) },
		func(s map[string]string) string {
			if s["delete_user"] != "required" {
				return "delete_user no longer needs approval"
			}
			return ""
		},
		func(s map[string]string) bool { return s["list_users"] == "required" })
}
