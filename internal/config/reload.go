package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// liveKeys are the server.* and tasks.* settings a reload applies (they are read from the
// current snapshot on every use); every other key of those sections is fixed at start.
var liveKeys = map[string]bool{
	"server.sync_forward_timeout": true, "server.identity_header": true, "server.rate_limit": true,
	"server.tools_fetch_timeout": true, "server.tools_max_pages": true, "server.admin_auth": true,
	"tasks.sync_approval": true, "tasks.promote_after": true, "tasks.hold_budget": true, "tasks.replay_window": true,
	"tasks.store": true, "server.limits": true, // listed per key below
	"server.reload":            true,
	"audit.forward":            true,
	"governance.pins.workflow": true, // read from the snapshot at each decision and notification
}

// RestartRequired lists the YAML paths of settings that differ between old and new
// but only take effect after a restart: listeners and transport (server.* except the
// liveKeys), the task manager's settings (tasks.* except the liveKeys: TTL bounds, poll
// interval, retention, quotas, store), the upstream client (sources[0].url and
// connect_timeout), and the audit log
// and telemetry exporters, which are opened once at start. A reload still applies
// everything else. Nil configs yield nil.
func RestartRequired(old, new *Config) []string {
	if old == nil || new == nil {
		return nil
	}
	var out []string
	out = diffFields(out, "server", reflect.ValueOf(old.Server), reflect.ValueOf(new.Server))
	out = diffFields(out, "server.limits", reflect.ValueOf(old.Server.Limits), reflect.ValueOf(new.Server.Limits))
	out = diffFields(out, "tasks", reflect.ValueOf(old.Tasks), reflect.ValueOf(new.Tasks))
	out = diffFields(out, "tasks.store", reflect.ValueOf(old.Tasks.Store), reflect.ValueOf(new.Tasks.Store))
	// The upstream (its URL, or the command and how it runs) is built once at start.
	switch {
	case len(old.Sources) > 0 && len(new.Sources) > 0:
		for _, k := range diffFields(nil, "sources[0]", reflect.ValueOf(old.Sources[0]), reflect.ValueOf(new.Sources[0])) {
			if k != "sources[0].id" && k != "sources[0].kind" {
				out = append(out, k)
			}
		}
	case len(old.Sources) != len(new.Sources):
		out = append(out, "sources[0].url")
	}
	// Pins are loaded (and a pin file read) once at start; who decides them is live.
	out = diffFields(out, "governance.pins", reflect.ValueOf(old.Governance.Pins), reflect.ValueOf(new.Governance.Pins))
	out = diffFields(out, "audit", reflect.ValueOf(old.Audit), reflect.ValueOf(new.Audit))
	out = diffFields(out, "telemetry", reflect.ValueOf(old.Telemetry), reflect.ValueOf(new.Telemetry))
	return out
}

// diffFields appends prefix.<yaml key> for each field of two structs that differs.
// Walking the tags keeps the list complete as fields are added.
func diffFields(out []string, prefix string, a, b reflect.Value) []string {
	t := a.Type()
	for i := range t.NumField() {
		name, opts, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name == "" && opts == "inline" && t.Field(i).IsExported() {
			out = diffFields(out, prefix, a.Field(i), b.Field(i)) // its keys are the parent's
			continue
		}
		if name == "" || name == "-" || !t.Field(i).IsExported() {
			continue
		}
		if liveKeys[prefix+"."+name] {
			continue
		}
		x, y := a.Field(i), b.Field(i)
		if x.Kind() == reflect.Slice && x.Len() == 0 && y.Len() == 0 {
			continue // absent and [] mean the same
		}
		if !reflect.DeepEqual(x.Interface(), y.Interface()) {
			out = append(out, prefix+"."+name)
		}
	}
	return out
}

// strictness orders actions from the one that lets a call through unasked to the one that
// refuses it; policy sits between (Cedar may forward).
func strictness(a Action) int {
	switch a {
	case ActionForward:
		return 0
	case ActionPolicy:
		return 1
	case ActionApprove:
		return 2
	case ActionDeny:
		return 3
	}
	return 0
}

// validationLevel orders cedar.validation modes from the laxest.
func validationLevel(m string) int {
	return map[string]int{ValidationOff: 0, ValidationWarn: 1, ValidationStrict: 2}[m]
}

// Weakens lists how new governs less strictly than old, one reason each (nil when it
// does not): a rule removed, moved, matching differently or relaxed (first match wins, so
// rules are compared by position), a rule added that is laxer than the defaults it shadows,
// laxer defaults, an approval workflow removed or relaxed (fewer approvals, approve on
// timeout, more approvers), a forced task annotation dropped, a rate limit lifted or a login
// proxy network added. A file read while it is being written in place is a prefix of the
// final one: it drops whatever came after the cut, which this catches. Cedar policy files
// are compared by the caller (their content is not in Config). Nil configs yield nil.
func Weakens(old, new *Config) []string {
	if old == nil || new == nil {
		return nil
	}
	var out []string
	add := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }
	og, ng := old.Governance, new.Governance
	if strictness(ng.Defaults.Action) < strictness(og.Defaults.Action) {
		add("governance.defaults.action relaxed from %s to %s", og.Defaults.Action, ng.Defaults.Action)
	} else if ng.Defaults.Approval != og.Defaults.Approval {
		add("governance.defaults.approval changed from %q to %q", og.Defaults.Approval, ng.Defaults.Approval)
	}
	for i, o := range og.Rules {
		p := fmt.Sprintf("governance.rules[%d] (match %q)", i, o.Match)
		if i >= len(ng.Rules) {
			add("%s removed", p)
			continue
		}
		n := ng.Rules[i]
		switch {
		case n.Match != o.Match || !reflect.DeepEqual(n.MatchAnnotations, o.MatchAnnotations):
			add("%s replaced by match %q", p, n.Match)
		case strictness(n.Action) < strictness(o.Action):
			add("%s relaxed from %s to %s", p, o.Action, n.Action)
		case n.Action == o.Action && (n.Approval != o.Approval || n.PolicyID != o.PolicyID):
			add("%s changed its workflow or policy_id", p)
		}
	}
	for i := len(og.Rules); i < len(ng.Rules); i++ {
		if strictness(ng.Rules[i].Action) < strictness(ng.Defaults.Action) {
			add("governance.rules[%d] (match %q) %s what the defaults %s", i, ng.Rules[i].Match, ng.Rules[i].Action, ng.Defaults.Action)
		}
	}
	for name, o := range old.Approval {
		n, ok := new.Approval[name]
		p := "approval." + name
		switch {
		case !ok:
			add("%s removed", p)
		case n.MinApprovals < o.MinApprovals:
			add("%s.min_approvals lowered from %d to %d", p, o.MinApprovals, n.MinApprovals)
		case n.OnTimeout != o.OnTimeout && n.OnTimeout == "approve":
			add("%s.on_timeout changed to approve", p)
		case len(o.Approvers) > 0 && (len(n.Approvers) == 0 || !subset(n.Approvers, o.Approvers)):
			add("%s.approvers widened", p)
		}
	}
	if !subset(old.TaskAnnotationOverrides.ForceRequired, new.TaskAnnotationOverrides.ForceRequired) {
		add("task_annotation_overrides.force_required lost an entry")
	}
	if o, n := old.Server.RateLimit.RequestsPerSecond, new.Server.RateLimit.RequestsPerSecond; o > 0 && (n == 0 || n > o) {
		add("server.rate_limit.requests_per_second raised from %v to %v", o, n)
	}
	if !subset(new.Server.AdminAuth.TrustedProxy, old.Server.AdminAuth.TrustedProxy) {
		add("server.admin_auth.trusted_proxy widened")
	}
	if o, n := old.Server.IdentityHeader, new.Server.IdentityHeader; o != n {
		add("server.identity_header changed")
	}
	if !slices.Equal(old.Cedar.Policies, new.Cedar.Policies) || old.Cedar.Schema != new.Cedar.Schema {
		add("cedar files changed")
	}
	if validationLevel(new.Cedar.Validation) < validationLevel(old.Cedar.Validation) {
		add("cedar.validation relaxed from %s to %s", old.Cedar.Validation, new.Cedar.Validation)
	}
	return out
}

// subset reports whether every element of a is in b.
func subset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}
