package config

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Environment variable names (docs/contract.md §4; the seed's THOUGHTGATE_* names with
// Tollgate's prefix, REQ-CORE-007 §5.2).
const (
	EnvConfig              = "TOLLGATE_CONFIG"
	EnvListen              = "TOLLGATE_LISTEN"
	EnvAdminListen         = "TOLLGATE_ADMIN_LISTEN"
	EnvUpstreamURL         = "TOLLGATE_UPSTREAM_URL"
	EnvTaskDefaultTTLMS    = "TOLLGATE_TASK_DEFAULT_TTL_MS"
	EnvTaskMaxTTLMS        = "TOLLGATE_TASK_MAX_TTL_MS"
	EnvTaskForceRequired   = "TOLLGATE_TASK_FORCE_REQUIRED"
	EnvSyncForwardSecs     = "TOLLGATE_SYNC_FORWARD_TIMEOUT_SECS"
	EnvToolsFetchTimeoutMS = "TOLLGATE_TOOLS_FETCH_TIMEOUT_MS"
	EnvToolsMaxPages       = "TOLLGATE_TOOLS_MAX_PAGES"
	EnvDataDir             = "TOLLGATE_DATA_DIR"
	EnvAdminToken          = "TOLLGATE_ADMIN_TOKEN"
	EnvAdminURL            = "TOLLGATE_ADMIN_URL"
	EnvLogLevel            = "TOLLGATE_LOG_LEVEL"
	EnvOwnerHashKey        = "TOLLGATE_OWNER_HASH_KEY"
	EnvArgumentHashKey     = "TOLLGATE_ARGUMENT_HASH_KEY"
	EnvSlackBotToken       = "TOLLGATE_SLACK_BOT_TOKEN"
	EnvSlackSigningSecret  = "TOLLGATE_SLACK_SIGNING_SECRET"
	EnvSlackAPIURL         = "TOLLGATE_SLACK_API_URL"
	// EnvRedisSentinelPassword is the Sentinels' password (tasks.store.sentinel).
	EnvRedisSentinelPassword = "TOLLGATE_REDIS_SENTINEL_PASSWORD"
)

// DefaultSlackAPIURL is Slack's Web API base ($TOLLGATE_SLACK_API_URL replaces it, for tests).
const DefaultSlackAPIURL = "https://slack.com/api"

// EnvVar documents one environment variable Tollgate reads.
type EnvVar struct {
	Name        string
	Default     string // "" when there is none
	Description string
}

// EnvVars lists every environment variable Tollgate reads, including those read
// outside this package (CLI, logging, admin auth). docs/configuration.md must list
// the same set; a test checks it.
var EnvVars = []EnvVar{
	{EnvConfig, "", "Config file path, used when --config is not given. Lookup order: --config, $TOLLGATE_CONFIG, ./tollgate.yaml, /etc/tollgate/config.yaml."},
	{EnvListen, DefaultListen, "Overrides server.listen (MCP endpoint listener, host:port)."},
	{EnvAdminListen, DefaultAdminListen, "Overrides server.admin_listen (admin, metrics and approvals listener, host:port)."},
	{EnvUpstreamURL, "", "Replaces sources[0].url, the upstream MCP server URL."},
	{EnvTaskDefaultTTLMS, "600000", "Overrides tasks.default_ttl, in milliseconds."},
	{EnvTaskMaxTTLMS, "86400000", "Overrides tasks.max_ttl, in milliseconds."},
	{EnvTaskForceRequired, "", "Comma-separated tool names appended to task_annotation_overrides.force_required."},
	{EnvSyncForwardSecs, "60", "Overrides server.sync_forward_timeout, in seconds."},
	{EnvToolsFetchTimeoutMS, "30000", "Overrides server.tools_fetch_timeout, in milliseconds."},
	{EnvToolsMaxPages, "100", "Overrides server.tools_max_pages."},
	{EnvDataDir, "", "Data directory; when tasks.store.type is auto (the default) or file and tasks.store.path is unset, the task store is <dir>/tasks.db. Unset: $XDG_STATE_HOME/tollgate, ~/.local/state/tollgate or /var/lib/tollgate, the first writable (auto only)."},
	{EnvAdminToken, "", "Bearer token of a single approver named \"admin\" for the admin API, in addition to approvers[]."},
	{EnvAdminURL, DefaultAdminURL, "Admin API base URL used by the `tollgate approvals` CLI."},
	{EnvLogLevel, DefaultLogLevel, "Log level: debug, info, warn or error."},
	{EnvOwnerHashKey, "", "HMAC key under which a 2026-07-28 caller's Authorization credential owns its tasks (same on every replica), also keying the owner hashes approvers see; unset = derived from the arguments hash key (memory store: random per process)."},
	{EnvArgumentHashKey, "", "Secret (at least 32 bytes) keying the HMAC that binds an approval to the call's arguments. Required with tasks.store.type redis (the same value on every replica); the file store otherwise keeps a random key in <store path>.key; the memory store draws one per process."},
	{EnvSlackBotToken, "", "Slack bot token (xoxb-…, scope chat:write) for slack destinations with a channel: posts the approval message with Approve / Reject buttons and updates it when decided. Never logged."},
	{EnvSlackSigningSecret, "", "Slack app signing secret; set, POST /api/v1/slack/interactions on the admin listener accepts button clicks signed with it. Never logged."},
	{EnvSlackAPIURL, DefaultSlackAPIURL, "Slack Web API base URL (chat.postMessage, chat.update); for tests."},
	{EnvAdminToken + FileSuffix, "", "File holding $TOLLGATE_ADMIN_TOKEN instead (at least 16 bytes; a trailing newline is dropped), so the token is not in Tollgate's environment. Read at start; setting both is an error. The CLI reads it too."},
	{EnvOwnerHashKey + FileSuffix, "", "File holding $TOLLGATE_OWNER_HASH_KEY instead (at least 32 bytes). Read at start; setting both is an error."},
	{EnvArgumentHashKey + FileSuffix, "", "File holding $TOLLGATE_ARGUMENT_HASH_KEY instead (at least 32 bytes). Read at start; setting both is an error."},
	{EnvSlackBotToken + FileSuffix, "", "File holding $TOLLGATE_SLACK_BOT_TOKEN instead. Read at start; setting both is an error."},
	{EnvSlackSigningSecret + FileSuffix, "", "File holding $TOLLGATE_SLACK_SIGNING_SECRET instead. Read at start; setting both is an error."},
	{EnvRedisSentinelPassword, "", "Password of the Redis Sentinels named by tasks.store.sentinel (their requirepass, or the password of tasks.store.sentinel.username). The Redis primary's own password goes in tasks.store.url. Never logged."},
	{EnvRedisSentinelPassword + FileSuffix, "", "File holding $TOLLGATE_REDIS_SENTINEL_PASSWORD instead. Read at start; setting both is an error."},
}

// expand replaces ${VAR} and ${VAR:-default} in s; "$$" is a literal "$" and any
// other "$" is kept as is. ${VAR:-default} uses default when VAR is unset or empty;
// ${VAR} fails when VAR is unset (an empty value is allowed).
func expand(s string, lookupEnv func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '$' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", fmt.Errorf("unterminated \"${\" (write \"$$\" for a literal dollar)")
			}
			ref := s[i+2 : i+2+end]
			name, def, hasDef := strings.Cut(ref, ":-")
			if !validEnvName(name) {
				return "", fmt.Errorf("invalid variable reference \"${%s}\": want ${NAME} or ${NAME:-default}", ref)
			}
			v, ok := lookupEnv(name)
			switch {
			case hasDef && v == "":
				v = def
			case !ok:
				return "", fmt.Errorf("environment variable %s is not set (write ${%s:-default} to give a default)", name, name)
			}
			b.WriteString(v)
			i += 2 + end
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// applyEnv applies the TOLLGATE_* overrides (after defaults, before validation).
// It records which path each variable set, so validation messages can name it.
func (c *Config) applyEnv(lookupEnv func(string) (string, bool), m *meta) []error {
	var errs []error
	get := func(name string) (string, bool) {
		v, ok := lookupEnv(name)
		v = strings.TrimSpace(v)
		return v, ok && v != ""
	}
	bad := func(name, path, msg string) {
		errs = append(errs, &FieldError{Path: path, Msg: fmt.Sprintf("$%s %s", name, msg)})
		m.bad[path] = true
	}
	positive := func(name, path, unit string) (int64, bool) {
		v, ok := get(name)
		if !ok {
			return 0, false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			bad(name, path, fmt.Sprintf("must be a positive integer (%s), got %q", unit, v))
			return 0, false
		}
		m.fromEnv[path] = name
		return n, true
	}
	// Upper bound keeps n*unit inside time.Duration (about 292 years).
	durEnv := func(name, path string, unit time.Duration, unitName string, dst *Duration) {
		n, ok := positive(name, path, unitName)
		if !ok {
			return
		}
		if n > int64(1<<62)/int64(unit) {
			bad(name, path, "is too large")
			return
		}
		*dst = Duration(time.Duration(n) * unit)
	}

	durEnv(EnvTaskDefaultTTLMS, "tasks.default_ttl", time.Millisecond, "milliseconds", &c.Tasks.DefaultTTL)
	durEnv(EnvTaskMaxTTLMS, "tasks.max_ttl", time.Millisecond, "milliseconds", &c.Tasks.MaxTTL)
	if _, inFile := m.lines["tasks.execution_timeout"]; !inFile && c.Tasks.MaxTTL > 0 && c.Tasks.ExecutionTimeout > c.Tasks.MaxTTL {
		c.Tasks.ExecutionTimeout = c.Tasks.MaxTTL // the default is clamped to a max_ttl set here too
	}
	durEnv(EnvSyncForwardSecs, "server.sync_forward_timeout", time.Second, "seconds", &c.Server.SyncForwardTimeout)
	durEnv(EnvToolsFetchTimeoutMS, "server.tools_fetch_timeout", time.Millisecond, "milliseconds", &c.Server.ToolsFetchTimeout)
	if n, ok := positive(EnvToolsMaxPages, "server.tools_max_pages", "pages"); ok {
		if n > 1<<31-1 {
			bad(EnvToolsMaxPages, "server.tools_max_pages", "is too large")
		} else {
			c.Server.ToolsMaxPages = int(n)
		}
	}

	if v, ok := get(EnvTaskForceRequired); ok {
		// REQ-CORE-007 §5.2: comma list, added to the file's list.
		have := make(map[string]bool, len(c.TaskAnnotationOverrides.ForceRequired))
		for _, t := range c.TaskAnnotationOverrides.ForceRequired {
			have[t] = true
		}
		for _, t := range strings.Split(v, ",") {
			if t = strings.TrimSpace(t); t != "" && !have[t] {
				have[t] = true
				c.TaskAnnotationOverrides.ForceRequired = append(c.TaskAnnotationOverrides.ForceRequired, t)
			}
		}
		m.fromEnv["task_annotation_overrides.force_required"] = EnvTaskForceRequired
	}

	if v, ok := get(EnvUpstreamURL); ok {
		if len(c.Sources) == 0 {
			// Lets a file without sources run against an upstream named only here.
			c.Sources = append(c.Sources, Source{ID: "upstream", Kind: SourceKindMCP, ConnectTimeout: Duration(DefaultConnectTimeout)})
		}
		c.Sources[0].URL = v
		m.fromEnv["sources[0].url"] = EnvUpstreamURL
	}
	if v, ok := get(EnvListen); ok {
		c.Server.Listen = v
		m.fromEnv["server.listen"] = EnvListen
	}
	if v, ok := get(EnvAdminListen); ok {
		c.Server.AdminListen = v
		m.fromEnv["server.admin_listen"] = EnvAdminListen
	}
	if v, ok := get(EnvDataDir); ok && (c.Tasks.Store.Type == StoreFile || c.Tasks.Store.Type == StoreAuto) && c.Tasks.Store.Path == "" {
		c.Tasks.Store.Path = filepath.Join(v, DefaultStoreFileName)
		m.fromEnv["tasks.store.path"] = EnvDataDir
	}
	return errs
}
