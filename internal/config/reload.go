package config

import (
	"reflect"
	"strings"
)

// liveKeys are the server.* and tasks.* settings a reload applies (they are read from the
// current snapshot on every use); every other key of those sections is fixed at start.
var liveKeys = map[string]bool{
	"server.sync_forward_timeout": true, "server.identity_header": true, "server.rate_limit": true,
	"server.tools_fetch_timeout": true, "server.tools_max_pages": true, "server.admin_auth": true,
	"tasks.sync_approval": true, "tasks.promote_after": true, "tasks.hold_budget": true, "tasks.replay_window": true,
	"tasks.store": true, "server.limits": true, // listed per key below
	"audit.forward": true,
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
	out = diffFields(out, "audit", reflect.ValueOf(old.Audit), reflect.ValueOf(new.Audit))
	out = diffFields(out, "telemetry", reflect.ValueOf(old.Telemetry), reflect.ValueOf(new.Telemetry))
	return out
}

// diffFields appends prefix.<yaml key> for each field of two structs that differs.
// Walking the tags keeps the list complete as fields are added.
func diffFields(out []string, prefix string, a, b reflect.Value) []string {
	t := a.Type()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
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
