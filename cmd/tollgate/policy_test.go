package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// shippedCases are the policy test cases shipped for policies/*.cedar and config/demo.yaml
// (every YAML file of policies/tests but the configuration they name).
func shippedCases(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../policies/tests/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		if filepath.Base(f) != "tollgate.yaml" {
			out = append(out, f)
		}
	}
	if len(out) < 4 {
		t.Fatalf("shipped case files: %v", out)
	}
	return out
}

// TestShippedPolicyTests runs `tollgate policy test` on the shipped cases (make test runs it,
// so a policy change that breaks an expectation fails the build).
func TestShippedPolicyTests(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(append([]string{"policy", "test"}, shippedCases(t)...), &out, &errOut); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "cases passed") {
		t.Errorf("output: %s", out.String())
	}
}

// TestPolicyTestWholeDirectory: `tollgate policy test policies/tests/*.yaml`, the glob a reader
// types, passes over the configuration the cases name (it sits beside them) and runs every case;
// a configuration no case file names is still refused (exit 2), saying what it is.
func TestPolicyTestWholeDirectory(t *testing.T) {
	files, err := filepath.Glob("../../policies/tests/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run(append([]string{"policy", "test"}, files...), &out, &errOut); code != 0 {
		t.Fatalf("policy test %v: exit %d\n%s%s", files, code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "cases passed") || !strings.Contains(errOut.String(), "tollgate.yaml is the configuration the cases run against") {
		t.Errorf("stdout: %s\nstderr: %s", out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"policy", "test", "../../policies/tests/tollgate.yaml"}, &out, &errOut); code != 2 ||
		!strings.Contains(errOut.String(), "a Tollgate configuration, not a case file") {
		t.Errorf("a lone configuration: exit %d, stderr %s", code, errOut.String())
	}
}

// TestPolicyTestBrokenCase: a deliberately wrong expectation fails with exit 1 and a diff
// that names the case, its line and each field as want/got; an unknown key is refused with
// its line.
func TestPolicyTestBrokenCase(t *testing.T) {
	dir := t.TempDir()
	cfg, err := filepath.Abs("../../policies/tests/tollgate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(dir, "broken.yaml")
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(broken, `cases:
  - name: small transfer forwards
    caller: alice
    tool: transfer_funds
    arguments: {amount: 500, currency: USD, to_account: ACC-1}
    expect: {action: forward}
  - name: large transfer forwards (wrong on purpose)
    caller: alice
    tool: transfer_funds
    arguments: {amount: 90000, currency: USD, to_account: ACC-1}
    expect: {action: forward, rule: "transfer_*", policies: [financial.forward_small]}
`)
	var out, errOut bytes.Buffer
	code := run([]string{"policy", "test", "--config", cfg, broken}, &out, &errOut)
	want := []string{
		broken + `:7: large transfer forwards (wrong on purpose)`,
		"action:   want forward\n              got  deny",
		"policies: want [financial.forward_small]\n              got  [financial.forbid_large]",
		"(cedar: forbid matched)",
		"1 of 2 cases failed",
	}
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out.String(), errOut.String())
	}
	for _, w := range want {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out.String())
		}
	}
	if strings.Contains(out.String(), "rule:") {
		t.Errorf("a matching field is reported:\n%s", out.String())
	}

	unknown := filepath.Join(dir, "unknown.yaml")
	write(unknown, "cases:\n  - tool: x\n    expect: {action: deny, polices: [a]}\n")
	out.Reset()
	errOut.Reset()
	if code := run([]string{"policy", "test", "--config", cfg, unknown}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), unknown+`:3: unknown key "polices"`) {
		t.Errorf("unknown key: exit %d\n%s%s", code, out.String(), errOut.String())
	}
}

// TestPolicyExplain: tollgate policy explain names the rule, each satisfied Cedar policy with
// its file:line, the outcome and what would change it.
func TestPolicyExplain(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"policy", "explain", "--config", "../../policies/tests/tollgate.yaml", "--caller", "alice",
		"transfer_funds", `{"amount": 90000, "currency": "USD", "to_account": "A"}`}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{
		`rule:    governance.rules[0] "transfer_*" → policy`,
		"cedar:   forbid matched",
		"satisfied forbid",
		"financial.forbid_large",
		"financial.cedar:45:1",
		"outcome: deny",
		"forbid financial.forbid_large matched",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := run([]string{"policy", "explain", "--config", "../../policies/tests/tollgate.yaml", "--annotations", "destructiveHint=true", "--json", "run_script"}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), `"outcome": "approve"`) || !strings.Contains(out.String(), "annotations.approve_destructive") {
		t.Errorf("exit %d:\n%s", code, out.String())
	}
	if code := run([]string{"policy", "explain", "--config", "../../policies/tests/tollgate.yaml", "--annotations", "destructive=yes", "x"}, &out, &errOut); code != 2 {
		t.Errorf("a bad --annotations: exit %d", code)
	}
}
