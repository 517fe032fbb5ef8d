package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tollgate-mcp/tollgate/internal/config"
	"github.com/tollgate-mcp/tollgate/internal/slack"
)

// Preflight reports what New would refuse for a config that loads, without starting,
// creating or connecting to anything (tollgate validate): token variables that are unset,
// short or shared (the check New runs), a task store that cannot be written or a Redis URL
// that does not parse, a missing or short arguments hash key where one is required, and an
// audit log that cannot be opened. Warnings are what New starts with but logs loudly: auto
// falling back to memory, and nobody able to decide approvals. Upstream reachability is the
// caller's (it needs the network).
func Preflight(cfg *config.Config, lookupEnv func(string) (string, bool)) (warnings []string, err error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	var errs []error
	if lookupEnv, err = config.WithSecretFiles(lookupEnv); err != nil {
		return nil, err
	}
	tokens, err := cfg.ApproverTokens(lookupEnv)
	if err != nil {
		errs = append(errs, err)
	} else if len(tokens) == 0 && approvalsUsed(cfg) && (len(cfg.Server.AdminAuth.TrustedProxy) == 0 || len(cfg.Approvers) == 0) {
		warnings = append(warnings, "no approver tokens (approvers[] or $"+config.EnvAdminToken+
			"): held calls can only time out, the approvals API and console refuse every request")
	}
	warning, err := CheckStore(cfg, lookupEnv)
	if err != nil {
		errs = append(errs, err)
	} else if warning != "" {
		warnings = append(warnings, "tasks.store: "+warning)
	}
	// The file store's key is made beside it on first start; every other case is decided
	// by the environment alone.
	if v, _ := lookupEnv(config.EnvArgumentHashKey); v != "" || cfg.Tasks.Store.Type != config.StoreFile {
		if _, err := argumentHashKey(cfg, lookupEnv); err != nil {
			errs = append(errs, err)
		}
	}
	if err := checkAuditPath(auditPath(cfg)); err != nil {
		errs = append(errs, err)
	}
	if len(cfg.Sources) > 0 && cfg.Sources[0].Stdio() {
		if _, err := resolveCommand(cfg.Sources[0], lookupEnv); err != nil {
			errs = append(errs, err)
		}
	}
	warnings = append(warnings, slackWarnings(cfg, lookupEnv)...)
	return warnings, errors.Join(errs...)
}

// slackWarnings names the Slack channel destinations run would start without the secrets they
// need: the channel then works only in part and says so on /readyz (degraded), not at start.
func slackWarnings(cfg *config.Config, lookupEnv func(string) (string, bool)) []string {
	var names []string
	for name, wf := range cfg.Approval {
		if slack.Uses(wf) {
			names = append(names, "approval."+name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	set := func(k string) bool { v, _ := lookupEnv(k); return v != "" }
	var out []string
	if !set(config.EnvSlackBotToken) {
		out = append(out, fmt.Sprintf("%s: a Slack channel destination without $%s: no approval message is posted (/readyz degraded)",
			strings.Join(names, ", "), config.EnvSlackBotToken))
	}
	if !set(config.EnvSlackSigningSecret) {
		out = append(out, fmt.Sprintf("%s: without $%s the messages' Approve / Reject buttons decide nothing (decide in the console, the CLI or the API)",
			strings.Join(names, ", "), config.EnvSlackSigningSecret))
	}
	return out
}

// approvalsUsed reports whether any rule or the default can hold a call for a human.
func approvalsUsed(cfg *config.Config) bool {
	used := func(a config.Action) bool { return a == config.ActionApprove || a == config.ActionPolicy }
	if used(cfg.Governance.Defaults.Action) {
		return true
	}
	for _, r := range cfg.Governance.Rules {
		if used(r.Action) {
			return true
		}
	}
	return false
}

// checkAuditPath reports whether audit.Open could open path for appending: the file, or a
// new one in its existing directory (audit.Open makes no directories).
func checkAuditPath(path string) error {
	if path == "" || path == "-" {
		return nil
	}
	if fi, err := os.Stat(path); err == nil {
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("audit.path %s: not a regular file", path)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return fmt.Errorf("audit.path %s: not writable: %w", path, unwrapPath(err))
		}
		return f.Close()
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return fmt.Errorf("audit.path %s: directory %s does not exist", path, dir)
	}
	if err := probeWrite(dir); err != nil {
		return fmt.Errorf("audit.path: %w", err)
	}
	return nil
}
