package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/disclose"
	"github.com/tollgate-mcp/tollgate/internal/tasks"
)

func TestRunCLI(t *testing.T) {
	refused := func() string { // a loopback port nobody listens on
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return "http://" + addr
	}()

	tests := []struct {
		name       string
		args       []string
		token      string // "" = aliceToken; "-" = unset
		url        string // "" = test server
		setup      func(*fakeTasks)
		wantCode   int
		wantOut    []string
		wantErr    []string
		notOut     []string
		checkJSON  bool
		checkState func(t *testing.T, f *fakeTasks)
	}{
		{name: "no args", wantCode: 2, wantErr: []string{"usage: tollgate approvals"}},
		{name: "help", args: []string{"help"}, wantCode: 0, wantOut: []string{"usage: tollgate approvals"}},
		{name: "unknown command", args: []string{"frobnicate"}, wantCode: 2, wantErr: []string{`unknown command "frobnicate"`}},
		{name: "unknown flag", args: []string{"list", "--nope"}, wantCode: 2, wantErr: []string{"nope"}},
		{name: "list takes no args", args: []string{"list", "extra"}, wantCode: 2, wantErr: []string{"takes no arguments"}},
		{name: "show needs id", args: []string{"show"}, wantCode: 2, wantErr: []string{"exactly one task ID"}},
		{name: "show two ids", args: []string{"show", "a", "b"}, wantCode: 2, wantErr: []string{"exactly one task ID"}},
		{name: "bad id", args: []string{"show", "../x"}, wantCode: 2, wantErr: []string{"invalid task ID"}},
		{name: "reject without reason", args: []string{"reject", "tg_b"}, wantCode: 0,
			checkState: func(t *testing.T, f *fakeTasks) {
				if f.tasks["tg_b"].State != tasks.Rejected {
					t.Errorf("state %s, want rejected", f.tasks["tg_b"].State)
				}
			}},
		{name: "bad admin URL", args: []string{"list"}, url: "ftp://x", wantCode: 2, wantErr: []string{"TOLLGATE_ADMIN_URL"}},
		{name: "list table", args: []string{"list"}, wantCode: 0,
			wantOut: []string{"TASK ID", "REQUESTED BY", "tg_a", "tg_b", "delete_user", "awaiting_approval", "carol", "2026-03-01T11:55:00Z"},
			notOut:  []string{"tg_c", "tg_d"}},
		{name: "list all", args: []string{"list", "--status", "all"}, wantCode: 0, wantOut: []string{"tg_c", "tg_d", "tg_g"}},
		{name: "list limit, newest first", args: []string{"list", "--limit=1"}, wantCode: 0, wantOut: []string{"tg_b", "more approvals exist", "--cursor "}, notOut: []string{"tg_a"}},
		{name: "list oldest first", args: []string{"list", "--limit=1", "--sort", "oldest"}, wantCode: 0, wantOut: []string{"tg_a", "more approvals exist"}, notOut: []string{"tg_b"}},
		{name: "list next page by cursor", args: []string{"list", "--limit=1", "--cursor", cursor{Sort: SortNewest, Key: t0.Add(-time.Minute).UnixNano(), ID: "tg_b"}.encode()},
			wantCode: 0, wantOut: []string{"tg_h"}, notOut: []string{"tg_b", "tg_a"}},
		{name: "list all pages", args: []string{"list", "--all", "--limit=1", "--status", "all"}, wantCode: 0,
			wantOut: []string{"tg_a", "tg_b", "tg_c", "tg_d", "tg_f", "tg_g", "tg_h"}, notOut: []string{"more approvals", "tg_e"}},
		{name: "list all json", args: []string{"list", "--all", "--limit=2", "--json"}, wantCode: 0, checkJSON: true,
			wantOut: []string{`"taskId":"tg_a"`, `"taskId":"tg_b"`, `"taskId":"tg_h"`}, notOut: []string{"nextCursor"}},
		{name: "list filters", args: []string{"list", "--tool", "delete_*", "--workflow", "removed_by_reload", "--owner", disclose.OwnerHash(sessionID)}, wantCode: 0,
			wantOut: []string{"tg_h", disclose.OwnerHash(sessionID)}, notOut: []string{"tg_a", "tg_b"}},
		{name: "list bad sort", args: []string{"list", "--sort", "random"}, wantCode: 1, wantErr: []string{`unknown sort "random"`, "HTTP 400"}},
		{name: "list all with cursor", args: []string{"list", "--all", "--cursor", "x"}, wantCode: 2, wantErr: []string{"exclude each other"}},
		{name: "summary", args: []string{"summary"}, wantCode: 0,
			wantOut: []string{"3 pending", "OWNER", disclose.OwnerHash(sessionID) + "  3", "TOOL", "delete_user", "WORKFLOW", "removed_by_reload  1", "2026-03-01T12:05:00Z"}},
		{name: "summary top", args: []string{"summary", "--top=1"}, wantCode: 0, wantOut: []string{"default   2", "(1 more: 1 pending"}, notOut: []string{"removed_by_reload"}},
		{name: "summary bad top", args: []string{"summary", "--top=1000"}, wantCode: 1, wantErr: []string{"top must be", "HTTP 400"}},
		{name: "list empty", args: []string{"list", "--status=cancelled"}, wantCode: 0, wantOut: []string{"no approvals"}},
		{name: "list json", args: []string{"list", "--json"}, wantCode: 0, checkJSON: true, wantOut: []string{`"approvals"`, `"taskId":"tg_a"`}},
		{name: "list bad status", args: []string{"list", "--status", "bogus"}, wantCode: 1, wantErr: []string{`unknown status "bogus"`, "HTTP 400"}},
		{name: "show", args: []string{"show", "tg_a"}, wantCode: 0,
			wantOut: []string{"Task ID:", "tg_a", "delete_user", "Awaiting approval (default)", `"password": "[REDACTED]"`, `"user": "bob"`, "2026-03-01T12:05:00Z"}},
		{name: "show decided", args: []string{"show", "tg_d"}, wantCode: 0, wantOut: []string{"rejected by bob", "Reason:"}},
		{name: "show unknown", args: []string{"show", "tg_zzz"}, wantCode: 1, wantErr: []string{"task tg_zzz not found", "HTTP 404"}},
		{name: "approve", args: []string{"approve", "tg_a", "--reason", "ok by me"}, wantCode: 0,
			wantOut: []string{"approved tg_a (delete_user)", "approved by alice"},
			checkState: func(t *testing.T, f *fakeTasks) {
				if d := f.tasks["tg_a"].Decision; d == nil || !d.Approved || d.Reason != "ok by me" {
					t.Errorf("decision = %+v", d)
				}
			}},
		{name: "approve flags first, no reason", args: []string{"approve", "--json", "tg_a"}, wantCode: 0, checkJSON: true, wantOut: []string{`"state":"approved"`}},
		{name: "after -- is positional", args: []string{"show", "--", "tg_a"}, wantCode: 0, wantOut: []string{"tg_a"}},
		{name: "reject", args: []string{"reject", "tg_b", "--reason=not now"}, wantCode: 0, wantOut: []string{"rejected tg_b"},
			checkState: func(t *testing.T, f *fakeTasks) {
				if f.tasks["tg_b"].State != tasks.Rejected {
					t.Errorf("state = %s", f.tasks["tg_b"].State)
				}
			}},
		{name: "conflict names standing decision", args: []string{"reject", "tg_c", "--reason", "late"}, wantCode: 1,
			wantErr: []string{"already decided: approved by alice at 2026-03-01T12:00:00Z (reason: fine)"}},
		{name: "conflict with --json prints body", args: []string{"approve", "tg_c", "--json"}, wantCode: 1, checkJSON: true,
			wantOut: []string{`"error":"conflict"`}, wantErr: []string{"already decided"}},
		{name: "self approval", args: []string{"approve", "tg_b"}, token: carolToken, wantCode: 1, wantErr: []string{"cannot decide", "HTTP 403"}},
		{name: "bad token", args: []string{"list"}, token: "wrong", wantCode: 1, wantErr: []string{"admin token rejected: set TOLLGATE_ADMIN_TOKEN"}, notOut: []string{"wrong"}},
		{name: "missing token", args: []string{"list"}, token: "-", wantCode: 1, wantErr: []string{"admin token rejected: set TOLLGATE_ADMIN_TOKEN (it is empty)"}},
		{name: "connection refused names URL", args: []string{"list"}, url: refused, wantCode: 1, wantErr: []string{refused, "connection refused"}},
		{name: "terminal escapes sanitized", args: []string{"list"}, wantCode: 0,
			setup: func(f *fakeTasks) {
				f.tasks["tg_a"].Tool = "evil\x1b]0;pwned\x07\x9b31m"
				f.tasks["tg_a"].RequestedBy = "x\ty\nz"
			},
			wantOut: []string{"evil?]0;pwned??31m", "x?y?z"}, notOut: []string{"\x1b", "\x07", "\u009b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := fixture()
			if tc.setup != nil {
				tc.setup(f)
			}
			srv := httptest.NewServer(NewHandler(f, testAuth(), Options{Workflow: testWorkflows}))
			defer srv.Close()
			env := map[string]string{"TOLLGATE_ADMIN_URL": srv.URL + "/", "TOLLGATE_ADMIN_TOKEN": aliceToken}
			if tc.url != "" {
				env["TOLLGATE_ADMIN_URL"] = tc.url
			}
			switch tc.token {
			case "":
			case "-":
				delete(env, "TOLLGATE_ADMIN_TOKEN")
			default:
				env["TOLLGATE_ADMIN_TOKEN"] = tc.token
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var stdout, stderr bytes.Buffer
			code := RunCLI(ctx, tc.args, &stdout, &stderr, func(k string) string { return env[k] })

			if code != tc.wantCode {
				t.Fatalf("exit = %d, want %d\nstdout: %s\nstderr: %s", code, tc.wantCode, &stdout, &stderr)
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, &stdout)
				}
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, &stderr)
				}
			}
			for _, n := range append(tc.notOut, secretPW, aliceToken, carolToken) {
				if strings.Contains(stdout.String(), n) || strings.Contains(stderr.String(), n) {
					t.Errorf("output contains %q:\nstdout: %s\nstderr: %s", n, &stdout, &stderr)
				}
			}
			if tc.checkJSON && !json.Valid(stdout.Bytes()) {
				t.Errorf("stdout is not JSON: %s", &stdout)
			}
			if tc.checkState != nil {
				tc.checkState(t, f)
			}
		})
	}
}

// TestCLITokenFromFile: in a pod whose environment holds no secret, the CLI reads the token
// from $TOLLGATE_ADMIN_TOKEN_FILE as `tollgate run` does; both set, or a missing file, is a
// clear configuration error (exit 2, as for a bad URL) that never prints the token.
func TestCLITokenFromFile(t *testing.T) {
	srv := httptest.NewServer(NewHandler(fixture(), testAuth(), Options{Workflow: testWorkflows}))
	defer srv.Close()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "admin-token")
	if err := os.WriteFile(tokenFile, []byte(aliceToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		env      map[string]string
		wantCode int
		wantErr  string
	}{
		{name: "file", env: map[string]string{"TOLLGATE_ADMIN_TOKEN_FILE": tokenFile}, wantCode: 0},
		{name: "both", env: map[string]string{"TOLLGATE_ADMIN_TOKEN_FILE": tokenFile, "TOLLGATE_ADMIN_TOKEN": aliceToken}, wantCode: 2,
			wantErr: "$TOLLGATE_ADMIN_TOKEN and $TOLLGATE_ADMIN_TOKEN_FILE are both set"},
		{name: "missing file", env: map[string]string{"TOLLGATE_ADMIN_TOKEN_FILE": filepath.Join(dir, "nope")}, wantCode: 2,
			wantErr: "$TOLLGATE_ADMIN_TOKEN_FILE: open"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.env["TOLLGATE_ADMIN_URL"] = srv.URL
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var stdout, stderr bytes.Buffer
			code := RunCLI(ctx, []string{"list"}, &stdout, &stderr, func(k string) string { return tc.env[k] })
			if code != tc.wantCode {
				t.Fatalf("exit = %d, want %d\nstdout: %s\nstderr: %s", code, tc.wantCode, &stdout, &stderr)
			}
			if tc.wantCode == 0 && !strings.Contains(stdout.String(), "tg_a") {
				t.Errorf("list with the file's token shows no approvals:\n%s", &stdout)
			}
			if !strings.Contains(stderr.String(), tc.wantErr) {
				t.Errorf("stderr %q lacks %q", &stderr, tc.wantErr)
			}
			if strings.Contains(stderr.String()+stdout.String(), aliceToken) {
				t.Error("the token was printed")
			}
		})
	}
}

// TestCLIExplainText: `tollgate approvals explain ID` prints the explanation for people, in
// the form of `tollgate policy explain` (rule, Cedar, outcome, what would change it), not the
// API's JSON, which --json prints; a tool name's control characters are quoted.
func TestCLIExplainText(t *testing.T) {
	explanation := map[string]any{
		"tool": "delete_user\x1b[2J",
		"rule": map[string]any{"index": 2, "match": "delete_*", "action": "policy", "policy_id": "guard", "mode": "enforce"},
		"policies": []map[string]any{{"id": "guard.approve", "effect": "permit", "decision": "approve",
			"position": "policies/guard.cedar:3:1", "outcome": "satisfied"}},
		"policies_not_matched": 4, "cedar": "permit matched", "outcome": "approve", "workflow": "default",
		"what_would_change_it": []string{"a forbid policy matching it would deny"},
	}
	srv := httptest.NewServer(NewHandler(fixture(), testAuth(), Options{Workflow: testWorkflows,
		Explain: func(_ context.Context, tk *tasks.Task) ExplainResponse {
			return ExplainResponse{TaskID: tk.ID, Tool: tk.Tool, State: string(tk.State), Explanation: explanation}
		}}))
	defer srv.Close()
	env := map[string]string{"TOLLGATE_ADMIN_URL": srv.URL, "TOLLGATE_ADMIN_TOKEN": aliceToken}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if code := RunCLI(ctx, []string{"explain", "tg_a"}, &stdout, &stderr, func(k string) string { return env[k] }); code != 0 {
		t.Fatalf("exit %d: %s", code, &stderr)
	}
	for _, w := range []string{"task:    tg_a (awaiting_approval)", "tool:    delete_user?[2J\n",
		`rule:    governance.rules[2] "delete_*" → policy (enforce, policy_id guard)`, "cedar:   permit matched",
		"satisfied permit @decision(approve)", "guard.approve", "policies/guard.cedar:3:1", "(4 other policies did not apply)",
		"outcome: approve — workflow default", "what would change it:\n  - a forbid policy matching it would deny"} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, &stdout)
		}
	}
	if strings.Contains(stdout.String(), `"explanation"`) || strings.Contains(stdout.String(), "\x1b") {
		t.Errorf("output is the API's JSON or carries a control character:\n%s", &stdout)
	}
	stdout.Reset()
	if code := RunCLI(ctx, []string{"explain", "tg_a", "--json"}, &stdout, &stderr, func(k string) string { return env[k] }); code != 0 ||
		!json.Valid(stdout.Bytes()) || !strings.Contains(stdout.String(), `"explanation"`) {
		t.Errorf("--json: exit %d, %s", code, &stdout)
	}
}
