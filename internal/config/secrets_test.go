package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecretsFromFiles: an approver's token and every secret variable can come from a file
// (kept out of Tollgate's environment, which a same-user child can read); a file that is
// missing, empty or too short is a configuration error naming the file, never the value.
func TestSecretsFromFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, v string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("alice", "alice-token-0123456789abcdef\n")
	admin := write("admin", "admin-token-0123456789abcdef\r\n")
	key := write("key", strings.Repeat("k", 40))
	short := write("short", "short\n")
	empty := write("empty", "\n")
	missing := filepath.Join(dir, "missing")

	cfg := &Config{Approvers: []Approver{{Name: "alice", TokenFile: good}}}
	env := envMap(map[string]string{EnvAdminToken + FileSuffix: admin, EnvOwnerHashKey + FileSuffix: key})
	lookup, err := WithSecretFiles(env)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := cfg.ApproverTokens(lookup)
	if err != nil {
		t.Fatal(err)
	}
	if tokens["alice-token-0123456789abcdef"] != "alice" || tokens["admin-token-0123456789abcdef"] != AdminApprover {
		t.Errorf("tokens from files: %v", tokens)
	}
	if v, _ := lookup(EnvOwnerHashKey); v != strings.Repeat("k", 40) {
		t.Errorf("owner hash key from its file: %q", v)
	}

	for _, tc := range []struct{ name, file, want string }{
		{"missing", missing, "no such file"},
		{"empty", empty, "is empty"},
		{"short", short, "at least 16"},
	} {
		t.Run("approver "+tc.name, func(t *testing.T) {
			cfg := &Config{Approvers: []Approver{{Name: "alice", TokenFile: tc.file}}}
			_, err := cfg.ApproverTokens(envMap(nil))
			if err == nil || !strings.Contains(err.Error(), "approvers[0].token_file") || !strings.Contains(err.Error(), tc.want) ||
				!strings.Contains(err.Error(), tc.file) {
				t.Errorf("error %v: want approvers[0].token_file, %q and the file", err, tc.want)
			}
		})
		t.Run("admin "+tc.name, func(t *testing.T) {
			_, err := WithSecretFiles(envMap(map[string]string{EnvAdminToken + FileSuffix: tc.file}))
			if err == nil || !strings.Contains(err.Error(), "TOLLGATE_ADMIN_TOKEN_FILE") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v: want $TOLLGATE_ADMIN_TOKEN_FILE and %q", err, tc.want)
			}
		})
	}
	if _, err := WithSecretFiles(envMap(map[string]string{EnvAdminToken + FileSuffix: admin, EnvAdminToken: "x"})); err == nil ||
		!strings.Contains(err.Error(), "both set") {
		t.Errorf("both the variable and its file: %v", err)
	}
	if _, err := WithSecretFiles(envMap(map[string]string{EnvArgumentHashKey + FileSuffix: good})); err == nil ||
		!strings.Contains(err.Error(), "at least 32") {
		t.Errorf("short argument hash key file: %v", err)
	}
	if strings.Contains(fmtErr(WithSecretFiles(envMap(map[string]string{EnvAdminToken + FileSuffix: short}))), "short\n") {
		t.Error("an error shows the file's contents")
	}
	// Parse: token_file with token_env is refused, token_file alone is enough.
	_, err = Parse([]byte(minimal+"approvers:\n  - {name: bob, token_env: BOB_TOKEN, token_file: "+good+"}\n"), "", envMap(map[string]string{"BOB_TOKEN": "bob-token-0123456789abcdef"}))
	assertErrors(t, err, []string{"approvers[0].token_file: set token_env or token_file, not both"})
	if _, err := Parse([]byte(minimal+"approvers:\n  - {name: bob, token_file: "+good+"}\n"), "", envMap(nil)); err != nil {
		t.Errorf("token_file alone: %v", err)
	}
}

func fmtErr[T any](_ T, err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
