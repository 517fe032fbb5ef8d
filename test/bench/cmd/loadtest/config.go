package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// policyID is the Cedar context.policy_id of the transfer_* rule.
const policyID = "bench_transfer"

// writeTollgateConfig writes the bench configuration and its Cedar policies into dir: forward
// by default, approve_* held for approval, transfer_* decided by nPolicies Cedar policies.
// sync_approval: block keeps policy tools callable without a task, so the policy scenario is
// the same plain tools/call against every target.
func writeTollgateConfig(dir string, nPolicies int) (string, error) {
	return writeConfig(dir, "tollgate.yaml", nPolicies, httpSource, `  sync_approval: block
  store: {type: memory}   # measured as before the file store became the default
`)
}

// writeAuthConfig is the bench configuration with callers verified (server.caller_auth, JWT
// access tokens from the harness's issuer); tools/list is then each caller's own view
// (tool_view: caller, the default with caller auth).
//
// Pinned tool definitions are on too (governance.pins.mode: trust_first), so the target also
// measures the digest check of every listing: the full governance a production config runs.
func writeAuthConfig(dir string, nPolicies int, is *issuer) (string, error) {
	path, err := writeConfig(dir, "tollgate-auth.yaml", nPolicies, httpSource, `  sync_approval: block
  store: {type: memory}
`+is.callerAuthSection())
	if err != nil {
		return "", err
	}
	return path, rewrite(path, func(cfg string) string {
		return strings.Replace(cfg, "governance:\n", "governance:\n  pins: {mode: trust_first}\n", 1)
	})
}

// writeNoAuditConfig is the bench configuration without an audit log: beside "tollgate" (one
// audit line per decision, forwards included: audit.forward all) it measures what the lines
// cost a call.
func writeNoAuditConfig(dir string, nPolicies int) (string, error) {
	path, err := writeTollgateConfig(dir, nPolicies)
	if err != nil {
		return "", err
	}
	noAudit := filepath.Join(dir, "tollgate-noaudit.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(noAudit, b, 0o644); err != nil {
		return "", err
	}
	return noAudit, rewrite(noAudit, func(cfg string) string {
		i := strings.Index(cfg, "audit:\n")
		if i < 0 {
			return cfg
		}
		j := strings.Index(cfg[i+len("audit:\n"):], "\n") + i + len("audit:\n") + 1
		return cfg[:i] + cfg[j:]
	})
}

// rewrite replaces the file at path with edit of its contents.
func rewrite(path string, edit func(string) string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(edit(string(b))), 0o644)
}

// httpSource is the bench's HTTP upstream; the harness points it at the target it measures.
const httpSource = "    url: http://127.0.0.1:1/mcp   # replaced by $TOLLGATE_UPSTREAM_URL\n"

// writeResourcesConfig writes the config of the process-resource measures: the bench config
// with the default file store (in $TOLLGATE_DATA_DIR, one per process), and plain calls of
// approve_* held on their connection (sync_approval: hold) for up to ten minutes, with room on
// the MCP listener for held calls.
func writeResourcesConfig(dir string, nPolicies, held int) (string, error) {
	return writeConfig(dir, "tollgate-resources.yaml", nPolicies, httpSource, fmt.Sprintf(`  sync_approval: hold
  hold_budget: 10m
  store: {type: file}
server:
  limits: {max_connections: %d}
`, held+256))
}

// writeStdioConfig is the bench configuration with the upstream run by Tollgate over stdio:
// argv is benchupstream -stdio with the same tools. One process per session as by default;
// max_processes leaves room for every client of the concurrent scenario.
func writeStdioConfig(dir string, nPolicies, maxProcesses int, argv []string) (string, error) {
	src := fmt.Sprintf("    command: %q\n    args: [", argv[0])
	for i, a := range argv[1:] {
		if i > 0 {
			src += ", "
		}
		src += fmt.Sprintf("%q", a)
	}
	src += fmt.Sprintf("]\n    max_processes: %d\n", maxProcesses)
	return writeConfig(dir, "tollgate-stdio.yaml", nPolicies, src, `  sync_approval: block
  store: {type: memory}
`)
}

// writeConfig writes the bench config: source is the sources[0] keys after kind, tasksExtra
// the rest of tasks: and then any other section.
func writeConfig(dir, name string, nPolicies int, source, tasksExtra string) (string, error) {
	cedarPath := filepath.Join(dir, "bench.cedar")
	if err := os.WriteFile(cedarPath, []byte(cedarPolicies(nPolicies)), 0o644); err != nil {
		return "", err
	}
	cfg := fmt.Sprintf(`schema: 1
sources:
  - id: upstream
    kind: mcp
%sgovernance:
  defaults: {action: forward}
  rules:
    - {match: "approve_*", action: approve}
    - {match: "transfer_*", action: policy, policy_id: %s}
cedar:
  policies: [%s]
audit:
  path: %s
tasks:
  quotas:
    max_pending_per_owner: 50000
    max_pending_per_source: 50000
    max_pending_total: 50000
`, source, policyID, cedarPath, filepath.Join(dir, "audit.log")) + tasksExtra
	path := filepath.Join(dir, name)
	return path, os.WriteFile(path, []byte(cfg), 0o644)
}

// cedarPolicies returns n policies of which exactly one matches the bench's transfer_funds
// call (a plain permit → forward); the others are realistic conditions that Cedar must
// evaluate and reject.
func cedarPolicies(n int) string {
	var b strings.Builder
	b.WriteString(`@id("bench.forward_small")
permit (principal, action == Action::"tools/call", resource == ToolCall::"transfer_funds")
when {
  context.policy_id == "` + policyID + `" &&
  resource.arguments has amount && resource.arguments.amount <= 1000
};
`)
	for i := 1; i < n; i++ {
		switch i % 3 {
		case 0:
			fmt.Fprintf(&b, `
@id("bench.forbid_large_%[1]d")
forbid (principal, action == Action::"tools/call", resource == ToolCall::"transfer_funds")
when {
  context.policy_id == "%[2]s" &&
  resource.arguments has amount && resource.arguments.amount > %[3]d
};
`, i, policyID, 1_000_000+i)
		case 1:
			fmt.Fprintf(&b, `
@id("bench.approve_account_%[1]d")
@decision("approve")
permit (principal, action == Action::"tools/call", resource)
when {
  context.policy_id == "%[2]s" &&
  resource.arguments has to_account && resource.arguments.to_account == "acct-watch-%[1]04d"
};
`, i, policyID)
		default:
			fmt.Fprintf(&b, `
@id("bench.forbid_tool_%[1]d")
forbid (principal, action == Action::"tools/call", resource == ToolCall::"transfer_other_%[1]04d")
when { context.policy_id == "%[2]s" };
`, i, policyID)
		}
	}
	return b.String()
}
