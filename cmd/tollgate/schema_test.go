package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-mcp/tollgate/test/testkit"
)

// TestPolicySchema: against the demo upstream's live tools/list, every shipped policy matches the
// schema `tollgate policy schema` writes; a policy file with seven kinds of mistakes — each of
// which loads without a schema — is refused with file:line for every one.
func TestPolicySchema(t *testing.T) {
	_, upURL := testkit.StartDemo(t)
	dir := t.TempDir()
	shipped, err := filepath.Abs("../../policies")
	if err != nil {
		t.Fatal(err)
	}
	writeCfg := func(policies ...string) string {
		cfg := "schema: 1\nsources:\n  - {id: demo, kind: mcp, url: \"" + upURL + "\"}\ncedar:\n  policies:\n"
		for _, p := range policies {
			cfg += "    - " + p + "\n"
		}
		p := filepath.Join(dir, "tollgate.yaml")
		if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Every shipped policy reads only arguments the demo's tools declare.
	cfg := writeCfg(filepath.Join(shipped, "financial.cedar"), filepath.Join(shipped, "delete_protection.cedar"), filepath.Join(shipped, "annotations.cedar"))
	out := filepath.Join(dir, "tools.cedarschema")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"policy", "schema", "--config", cfg, "--out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("shipped policies: exit %d\n%s", code, stderr.String())
	}
	schema, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(schema), `"amount"?: Long`) || !strings.Contains(string(schema), "entity User in [Group]") {
		t.Fatalf("schema (%v):\n%s", err, schema)
	}

	bad := filepath.Join(dir, "bad.cedar")
	lines := []string{
		`resource.arguments.amout > 5`,                                       // argument no tool has
		`resource.arguments has currency && resource.arguments.currency > 5`, // String compared with a number
		`context.polcy_id == "x"`,                                            // unknown context attribute
		`context.annotations.destructive`,                                    // unknown annotation hint
		`resource.arguments.to_account == "x"`,                               // optional argument without has
		`resource.arguments has amont && resource.arguments.amont > 5`,       // guarded missing argument: never true
	}
	var src strings.Builder
	for i, cond := range lines {
		src.WriteString("@id(\"bad" + string(rune('a'+i)) + "\")\nforbid (principal, action == Action::\"tools/call\", resource)\nwhen { " + cond + " };\n")
	}
	src.WriteString("@id(\"badtool\")\nforbid (principal, action, resource == ToolCall::\"transfer_fund\");\n") // unknown tool
	if err := os.WriteFile(bad, []byte(src.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	code := run([]string{"policy", "schema", "--config", writeCfg(bad), "--out", out}, &stdout, &stderr)
	if code != 1 {
		t.Fatalf("bad policies: exit %d\n%s", code, stderr.String())
	}
	if code := run([]string{"policy", "schema", "--config", writeCfg(bad), "--out", out, "--warn"}, &stdout, &stderr); code != 0 {
		t.Errorf("--warn: exit %d", code)
	}
	for _, want := range []string{"bad.cedar:1:1: does not match schema", "bad.cedar:4:1:", "bad.cedar:7:1:", "bad.cedar:10:1:", "bad.cedar:13:1:",
		`bad.cedar:18:8: resource.arguments has "amont"`, `bad.cedar:20:`, `ToolCall::"transfer_fund" names no tool`} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stderr.String())
		}
	}
}
