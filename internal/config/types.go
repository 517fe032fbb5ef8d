// Package config holds Tollgate's configuration: the YAML schema (docs/contract.md §4), strict
// loading with ${VAR} expansion, defaults, environment overrides and validation.
//
// A loaded *Config is immutable; reloads build a new one.
package config

import (
	"slices"
	"strings"
	"time"

	"github.com/tollgate-mcp/tollgate/internal/identity"
)

// Action is what governance does with a tool call.
type Action string

const (
	ActionForward Action = "forward"
	ActionApprove Action = "approve"
	ActionDeny    Action = "deny"
	ActionPolicy  Action = "policy"
)

// Sync approval modes for clients that do not use tasks (docs/contract.md §3).
const (
	SyncApprovalError   = "error"
	SyncApprovalPromote = "promote"
	SyncApprovalBlock   = "block"
	SyncApprovalHold    = "hold"
)

// Config is the whole configuration file, schema 1.
type Config struct {
	Schema                  int                 `yaml:"schema"`
	Sources                 []Source            `yaml:"sources"`
	Governance              Governance          `yaml:"governance"`
	Approval                map[string]Workflow `yaml:"approval"`
	Approvers               []Approver          `yaml:"approvers"`
	ApproverGroups          map[string][]string `yaml:"approver_groups"` // name → approvers; workflows name them "group:<name>"
	Cedar                   Cedar               `yaml:"cedar"`
	TaskAnnotationOverrides Overrides           `yaml:"task_annotation_overrides"`
	Tasks                   Tasks               `yaml:"tasks"`
	Server                  Server              `yaml:"server"`
	Audit                   Audit               `yaml:"audit"`
	Telemetry               Telemetry           `yaml:"telemetry"`

	// Path is the file the config was loaded from ("" when parsed from bytes).
	// Relative policy paths are resolved against its directory.
	Path string `yaml:"-"`

	// meta is set by Parse: key lines, env-set paths; nil for configs built in code.
	meta *meta
}

// Source is the one upstream MCP server Tollgate fronts: a streamable HTTP endpoint (URL) or
// a command Tollgate runs and speaks to over stdin/stdout (Command; exactly one of the two).
type Source struct {
	ID   string `yaml:"id"`
	Kind string `yaml:"kind"` // "mcp"
	URL  string `yaml:"url"`
	// ConnectTimeout bounds dialing the upstream (default 5s).
	ConnectTimeout Duration `yaml:"connect_timeout"`

	// Command runs a stdio MCP server (internal/stdio), with Args, in Cwd. Its environment is
	// PATH and HOME from Tollgate's, then Env: nothing else of Tollgate's reaches it.
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"`
	Cwd     string            `yaml:"cwd"`
	// Share runs one process for every client (a stateless server); default one per session.
	Share bool `yaml:"share"`
	// MaxProcesses bounds live processes (default 16); IdleTimeout ends a session idle that
	// long, and its process (default 10m).
	MaxProcesses int      `yaml:"max_processes"`
	IdleTimeout  Duration `yaml:"idle_timeout"`
	// RunAs runs the processes under another user and group (Tollgate must run as root): they
	// can then neither read Tollgate's memory and environment (/proc) nor signal it.
	RunAs RunAs `yaml:"run_as"`

	// ForwardAuthorization passes the caller's verified bearer token to the upstream (with
	// server.caller_auth): only for an upstream that is the same OAuth resource and validates
	// the same audience. Default false: the upstream never sees callers' tokens.
	ForwardAuthorization bool `yaml:"forward_authorization"`
	// Credential is Tollgate's own credential for the upstream, sent on every request to it
	// (forwarded calls, approved calls run later, Tollgate's own sessions): the caller's
	// token is never it (no token passthrough).
	Credential Credential `yaml:"credential"`
}

// Credential is a header Tollgate sends the upstream: a static value read at start from an
// environment variable or a file (never written in the configuration), or an OAuth access
// token Tollgate obtains and refreshes with the client-credentials grant.
type Credential struct {
	Header    string `yaml:"header"`     // default Authorization
	ValueEnv  string `yaml:"value_env"`  // variable holding the whole header value, e.g. "Bearer …"
	ValueFile string `yaml:"value_file"` // or a file holding it
	// ClientCredentials: the value is "Bearer <token>" from this authorization server.
	ClientCredentials ClientCredentials `yaml:"client_credentials"`
}

// ClientCredentials is an OAuth 2.1 client-credentials grant (RFC 6749 §4.4) for the
// upstream's access token, with a resource indicator (RFC 8707) and an audience.
type ClientCredentials struct {
	TokenURL         string   `yaml:"token_url"`
	ClientID         string   `yaml:"client_id"`
	ClientSecretEnv  string   `yaml:"client_secret_env"`  // or client_secret_file
	ClientSecretFile string   `yaml:"client_secret_file"` // relative to the configuration file
	Scopes           []string `yaml:"scopes"`
	Resource         string   `yaml:"resource"` // RFC 8707 resource parameter ("" = none)
	Audience         string   `yaml:"audience"` // audience parameter, for servers that take one ("" = none)
	// AuthStyle: how the client authenticates at the token endpoint: "basic"
	// (client_secret_basic, the default) or "post" (client_secret_post).
	AuthStyle string `yaml:"auth_style"`
}

// Set reports whether any client_credentials key is given.
func (c ClientCredentials) Set() bool {
	return c.TokenURL != "" || c.ClientID != "" || c.ClientSecretEnv != "" || c.ClientSecretFile != "" ||
		len(c.Scopes) > 0 || c.Resource != "" || c.Audience != "" || c.AuthStyle != ""
}

// Credential auth styles (sources[].credential.client_credentials.auth_style).
const (
	AuthStyleBasic = "basic"
	AuthStylePost  = "post"
)

// Set reports whether a credential is configured.
func (c Credential) Set() bool {
	return c.ValueEnv != "" || c.ValueFile != "" || c.ClientCredentials.Set()
}

// RunAs is the numeric user and group a stdio server's processes run as (supplementary
// groups are dropped). Zero is root and never a choice: both zero means not set.
type RunAs struct {
	UID int `yaml:"uid"`
	GID int `yaml:"gid"`
}

// Set reports whether run_as names a user.
func (r RunAs) Set() bool { return r.UID != 0 || r.GID != 0 }

// Stdio reports whether the source is a command Tollgate runs.
func (s *Source) Stdio() bool { return s.Command != "" }

// InheritedEnv are the variables of Tollgate's own environment a stdio server gets without
// listing them in env (docs/configuration.md): what finding and running an interpreter
// (npx, uvx, node) needs.
var InheritedEnv = []string{"PATH", "HOME"}

// ProcessEnv is the stdio server's whole environment ("NAME=value", sorted by name): the
// InheritedEnv variables that are set in Tollgate's environment, then env, which wins.
func (s *Source) ProcessEnv(lookupEnv func(string) (string, bool)) []string {
	m := map[string]string{}
	for _, k := range InheritedEnv {
		if v, ok := lookupEnv(k); ok {
			m[k] = v
		}
	}
	for k, v := range s.Env {
		m[k] = v
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// Governance is the ordered rule list plus the fallback action.
type Governance struct {
	// Mode is enforce (default) or audit: every decision is made and recorded ("would
	// deny", "would hold") and the call is forwarded, except under rules marked enforce.
	Mode     string   `yaml:"mode"`
	Defaults Defaults `yaml:"defaults"`
	Rules    []Rule   `yaml:"rules"`
	Pins     Pins     `yaml:"pins"`
}

// Values of governance.mode and governance.rules[].mode.
const (
	ModeEnforce = "enforce"
	ModeAudit   = "audit"
)

// Pins configures pinned tool definitions (package pins, docs/contract.md "Pinned tool
// definitions"): each upstream tool's definition is kept as a digest; a changed one is
// quarantined until an approver accepts it.
type Pins struct {
	Mode     string `yaml:"mode"`      // off | trust_first | file
	File     string `yaml:"file"`      // pin file (mode file), as `tollgate pins export` writes it
	NewTools string `yaml:"new_tools"` // accept | quarantine: a tool first seen after the first listing
	OnChange string `yaml:"on_change"` // quarantine (hidden, calls refused) | hold (hidden, calls held for approval)
	// MaxDefinitionBytes bounds one tool's canonical definition; a larger one is quarantined.
	MaxDefinitionBytes int `yaml:"max_definition_bytes"`
	// MaxTools bounds the pins kept (one per tool); a tool beyond it is quarantined.
	MaxTools int `yaml:"max_tools"`
	// Workflow names the approval workflow whose approvers (approval.<name>.approvers) may see
	// and decide pins, and whose destination is told of quarantines and decisions; default
	// "default". Live: a reload applies it.
	Workflow string `yaml:"workflow"`
}

// Pin modes and reactions (governance.pins).
const (
	PinsOff        = "off"
	PinsTrustFirst = "trust_first"
	PinsFile       = "file"
	PinsAccept     = "accept"
	PinsQuarantine = "quarantine"
	PinsHold       = "hold"

	DefaultPinMaxDefinitionBytes = 64 << 10
	DefaultPinMaxTools           = 10000
)

// Enabled reports whether tool definitions are pinned.
func (p Pins) Enabled() bool { return p.Mode != "" && p.Mode != PinsOff }

// Defaults apply when no rule matches.
type Defaults struct {
	Action   Action `yaml:"action"`   // default forward
	Approval string `yaml:"approval"` // workflow for a default approve (default "default")
}

// Rule matches tool names with a glob; first match wins.
type Rule struct {
	Match    string `yaml:"match"`
	Action   Action `yaml:"action"`
	Approval string `yaml:"approval"`  // workflow name for approve (and policy → approve); default "default"
	PolicyID string `yaml:"policy_id"` // passed to Cedar in context.policy_id for action: policy
	// MatchAnnotations narrows the rule to tools whose MCP tool annotations (from the
	// upstream's tools/list) have these values, e.g. {destructiveHint: true}. Absent hints
	// count with the spec's defaults (see rules.Hints).
	MatchAnnotations map[string]bool `yaml:"match_annotations"`
	// Callers narrows the rule to some callers: "user:<subject>" (the verified subject, or
	// the server.identity_header value, exactly) or "group:<name>" (a verified caller's
	// groups claim). Absent: every caller.
	Callers []string `yaml:"callers"`
	// Mode overrides governance.mode for this rule: audit (record, forward) or enforce; ""
	// inherits it.
	Mode string `yaml:"mode"`
}

// Prefixes of governance.rules[].callers entries.
const (
	CallerUserPrefix  = "user:"
	CallerGroupPrefix = "group:"
)

// Annotation hints a rule can match (spec 2025-11-25 ToolAnnotations).
const (
	HintReadOnly    = "readOnlyHint"
	HintDestructive = "destructiveHint"
	HintIdempotent  = "idempotentHint"
	HintOpenWorld   = "openWorldHint"
)

// AnnotationHints lists the hints match_annotations accepts.
var AnnotationHints = []string{HintReadOnly, HintDestructive, HintIdempotent, HintOpenWorld}

// Workflow is one named approval workflow (approval.<name>).
type Workflow struct {
	Destination  Destination `yaml:"destination"`
	Timeout      Duration    `yaml:"timeout"`    // default 10m
	OnTimeout    string      `yaml:"on_timeout"` // deny (default) | approve
	RedactFields []string    `yaml:"redact_fields"`
	Approvers    []string    `yaml:"approvers"` // who may see and decide its calls (names, "group:<name>"); absent = every approver
	// MinApprovals is how many distinct approvers must approve before the call runs
	// (two-person rule); default 1. One reject rejects.
	MinApprovals int `yaml:"min_approvals"`
}

// GroupPrefix marks a group in a workflow's approvers list ("group:finance").
const GroupPrefix = "group:"

// Destination says where approvers are asked.
type Destination struct {
	Type string `yaml:"type"` // console (default) | webhook | slack | elicitation
	URL  string `yaml:"url"`  // webhook / slack incoming webhook
	// Channel: slack with the bot token ($TOLLGATE_SLACK_BOT_TOKEN, chat.postMessage) and
	// Approve / Reject buttons, instead of an incoming webhook (package slack).
	Channel string `yaml:"channel"`
}

// Approver maps a bearer token (read from an env var or a file) to a name.
type Approver struct {
	Name     string `yaml:"name"`
	TokenEnv string `yaml:"token_env"` // optional when server.admin_auth.trusted_proxy signs approvers in
	// TokenFile is the file holding the token instead (a mounted Secret): the token then never
	// sits in Tollgate's environment. Read at start and on every reload.
	TokenFile string `yaml:"token_file"`
	Email     string `yaml:"email"` // matched against server.admin_auth.email_header; optional
	// SlackUserID is the approver's Slack member id (U…/W…): a click on a Slack button by
	// that user decides as this approver.
	SlackUserID string `yaml:"slack_user_id"`
	// Subjects are the approver's verified token subjects (server.caller_auth: the subject as
	// Tollgate names it, issuer-prefixed when several issuers are configured): a call made
	// with such a token is this approver's own call, which they may not approve, and an admin
	// API request with such a token (server.admin_auth.issuers) is this approver.
	Subjects []string `yaml:"subjects"`
}

// Person is the approver as identity.Person: every name they carry.
func (a Approver) Person() identity.Person {
	p := identity.Person{Name: a.Name, Subjects: a.Subjects}
	if a.Email != "" {
		p.Emails = []string{a.Email}
	}
	if a.SlackUserID != "" {
		p.SlackIDs = []string{a.SlackUserID}
	}
	return p
}

// Directory maps every name of the configured approvers (and "admin", the holder of
// $TOLLGATE_ADMIN_TOKEN) to the person carrying it (identity.Directory).
func (c *Config) Directory() *identity.Directory {
	people := make([]identity.Person, 0, len(c.Approvers)+1)
	for _, a := range c.Approvers {
		people = append(people, a.Person())
	}
	people = append(people, identity.Person{Name: AdminApprover})
	return identity.NewDirectory(people)
}

// Cedar lists the policy files for action: policy.
type Cedar struct {
	Policies []string `yaml:"policies"`
	Schema   string   `yaml:"schema"`
	// Validation checks the policies against a schema built from the upstream's tools/list
	// (package policyschema) at every load, reload and tools change: off | warn | strict.
	Validation string `yaml:"validation"`
}

// Policy validation modes (cedar.validation).
const (
	ValidationOff    = "off"
	ValidationWarn   = "warn"
	ValidationStrict = "strict"
)

// Overrides force annotations regardless of rules.
type Overrides struct {
	ForceRequired []string `yaml:"force_required"`
}

// Tasks configures Tollgate-owned tasks.
type Tasks struct {
	DefaultTTL   Duration `yaml:"default_ttl"`   // default 10m (TOLLGATE_TASK_DEFAULT_TTL_MS)
	MaxTTL       Duration `yaml:"max_ttl"`       // default 24h (TOLLGATE_TASK_MAX_TTL_MS)
	PollInterval Duration `yaml:"poll_interval"` // advertised pollInterval, default 2s
	SyncApproval string   `yaml:"sync_approval"` // hold (default) | error | promote | block
	HoldBudget   Duration `yaml:"hold_budget"`   // hold: longest a plain call is held, default 50s
	ReplayWindow Duration `yaml:"replay_window"` // a held call's task outlives its approval timeout by this, default 10m
	PromoteAfter Duration `yaml:"promote_after"` // 0 = off
	// ExecutionTimeout bounds how long a task's call (approved, accelerated or promoted) may
	// run upstream; default 5m, at most max_ttl.
	ExecutionTimeout Duration `yaml:"execution_timeout"`
	// InputTimeout bounds how long a question the upstream asks during a task's call
	// (elicitation, sampling, roots) waits for the task owner's answer; then the upstream is
	// answered as declined. Default 2m, at most execution_timeout.
	InputTimeout Duration `yaml:"input_timeout"`
	// ExecutionLease is how long a task stays executing without its replica renewing it
	// (renewed every third of it); then any replica fails it as ExecutionInterrupted. Only
	// used with a shared store. Default 30s, at least 3s.
	ExecutionLease Duration `yaml:"execution_lease"`
	Retention      Duration `yaml:"retention"` // keep finished tasks at least this long past TTL end; default 0
	Store          Store    `yaml:"store"`
	Quotas         Quotas   `yaml:"quotas"`
}

// Store selects the task store backend.
type Store struct {
	Type string `yaml:"type"` // auto (default: file if a data directory is writable, else memory) | file | memory | redis
	Path string `yaml:"path"` // file store
	URL  string `yaml:"url"`  // redis://…
	// Sentinel reaches the Redis primary through Redis Sentinel (a failover client) instead of
	// the host in URL; URL then names no host and carries only credentials, database and options.
	Sentinel RedisSentinel `yaml:"sentinel"`
	// TLS names a private CA, a client certificate and the name to verify for rediss:// (or
	// Sentinel with TLS); any key set turns TLS on.
	TLS RedisTLS `yaml:"tls"`
}

// RedisSentinel names the Sentinel-monitored primary (tasks.store.sentinel). The Sentinels'
// password, if they require one, is $TOLLGATE_REDIS_SENTINEL_PASSWORD (or its _FILE).
type RedisSentinel struct {
	MasterName string   `yaml:"master_name"` // the name the Sentinels monitor (sentinel monitor <name> …)
	Addresses  []string `yaml:"addresses"`   // host:port of each Sentinel (at least one)
	Username   string   `yaml:"username"`    // ACL user on the Sentinels; "" = password only
}

// Set reports whether any Sentinel key is given.
func (s RedisSentinel) Set() bool {
	return s.MasterName != "" || len(s.Addresses) > 0 || s.Username != ""
}

// RedisTLS configures TLS to Redis (and to the Sentinels) (tasks.store.tls).
type RedisTLS struct {
	CAFile     string `yaml:"ca_file"`     // PEM CA bundle to verify the server; "" = system roots
	CertFile   string `yaml:"cert_file"`   // PEM client certificate (Redis tls-auth-clients)
	KeyFile    string `yaml:"key_file"`    // its private key
	ServerName string `yaml:"server_name"` // name to verify in the server's certificate; "" = the host dialled
}

// Set reports whether any TLS key is given.
func (t RedisTLS) Set() bool {
	return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != ""
}

// Quotas bound what callers can hold (docs/contract.md §3).
type Quotas struct {
	MaxPendingPerOwner int `yaml:"max_pending_per_owner"` // default 100
	// MaxPendingPerSource bounds one source (package source: identity header, else address or
	// IPv6 /64), whatever owners it presents; default 1000.
	MaxPendingPerSource int `yaml:"max_pending_per_source"`
	MaxPendingTotal     int `yaml:"max_pending_total"` // default 10000
	// MaxUpstreamTasksPerSource and MaxUpstreamTasksTotal bound the 2026-07-28 upstream task
	// ids kept bound to their creators (defaults 1000 and 100000): past its share a source's
	// oldest binding gives way, at the total the oldest of the source holding the most.
	MaxUpstreamTasksPerSource int   `yaml:"max_upstream_tasks_per_source"`
	MaxUpstreamTasksTotal     int   `yaml:"max_upstream_tasks_total"`
	MaxArgumentBytes          int64 `yaml:"max_argument_bytes"` // per task, default 1 MiB
	MaxStoredBytes            int64 `yaml:"max_stored_bytes"`   // all pending tasks, default 64 MiB
	// MaxStoredBytesPerSource is one source's share of MaxStoredBytes, default a quarter.
	MaxStoredBytesPerSource int64 `yaml:"max_stored_bytes_per_source"`
}

// Server holds listener and transport settings (none of these can change on reload).
type Server struct {
	Listen             string    `yaml:"listen"`               // default 127.0.0.1:7467 (TOLLGATE_LISTEN)
	AdminListen        string    `yaml:"admin_listen"`         // default 127.0.0.1:7469 (TOLLGATE_ADMIN_LISTEN)
	AllowedOrigins     []string  `yaml:"allowed_origins"`      // browser Origins allowed in addition to loopback ones
	AllowedHosts       []string  `yaml:"allowed_hosts"`        // Host headers allowed besides loopback and the listen address
	IdentityHeader     string    `yaml:"identity_header"`      // header a trusted auth proxy sets to the caller's identity; "" = owner is the MCP session
	RateLimit          RateLimit `yaml:"rate_limit"`           // per caller, on tools/call; off by default
	MaxBodyBytes       int64     `yaml:"max_body_bytes"`       // default 4 MiB
	SyncForwardTimeout Duration  `yaml:"sync_forward_timeout"` // default 60s (TOLLGATE_SYNC_FORWARD_TIMEOUT_SECS)
	RequestTimeout     Duration  `yaml:"request_timeout"`      // non-tool JSON replies, default 60s
	ShutdownTimeout    Duration  `yaml:"shutdown_timeout"`     // drain bound, default 10s
	ToolsFetchTimeout  Duration  `yaml:"tools_fetch_timeout"`  // default 30s (TOLLGATE_TOOLS_FETCH_TIMEOUT_MS)
	ToolsMaxPages      int       `yaml:"tools_max_pages"`      // default 100 (TOLLGATE_TOOLS_MAX_PAGES)
	Limits             Limits    `yaml:"limits"`               // what one client can make Tollgate hold
	AdminAuth          AdminAuth `yaml:"admin_auth"`           // approvers signed in by the cluster's login proxy
	Reload             Reload    `yaml:"reload"`               // when a changed config file is complete enough to use
	// PublicURL is the URL clients reach Tollgate at (scheme, host, optional path prefix):
	// the OAuth resource is PublicURL + "/mcp" (RFC 8707, RFC 9728). Default: from listen.
	PublicURL string `yaml:"public_url"`
	// CallerAuth makes /mcp an OAuth 2.1 resource server: the caller is who a verified bearer
	// token says (docs/contract.md §6).
	CallerAuth CallerAuth `yaml:"caller_auth"`
}

// Caller authentication types (server.caller_auth.type).
const (
	CallerAuthNone          = "none"
	CallerAuthJWT           = "jwt"
	CallerAuthIntrospection = "introspection"
)

// CallerAuth is server.caller_auth: the first issuer's settings at the top, more issuers
// under issuers (each with a name), and what applies to all.
type CallerAuth struct {
	// The top-level issuer, its keys inline (server.caller_auth.issuer, …), so the common
	// one-issuer form stays flat YAML. Type: none (default) | jwt | introspection.
	CallerIssuer `yaml:",inline"`

	Issuers   []CallerIssuer `yaml:"issuers"`    // more issuers (agents and humans)
	ClockSkew Duration       `yaml:"clock_skew"` // exp/nbf/iat tolerance, default 60s
	// ToolView: "caller" (default with caller auth) lists to each caller only the tools it may
	// call; "all" lists every tool (calls are governed either way).
	ToolView string `yaml:"tool_view"`
}

// CallerIssuer is one trusted token issuer (server.caller_auth, or one of its issuers).
type CallerIssuer struct {
	Type             string   `yaml:"type"` // jwt | introspection; in issuers[] default the caller_auth type
	Name             string   `yaml:"name"` // prefix of this issuer's subjects ("name:sub"); required with issuers
	Issuer           string   `yaml:"issuer"`
	Audience         string   `yaml:"audience"` // default: public_url + "/mcp"
	JWKSURL          string   `yaml:"jwks_url"` // default: from the issuer's metadata
	Algorithms       []string `yaml:"algorithms"`
	SubjectClaim     string   `yaml:"subject_claim"` // default sub
	GroupsClaim      string   `yaml:"groups_claim"`  // default groups
	EmailClaim       string   `yaml:"email_claim"`   // default email
	RequiredScopes   []string `yaml:"required_scopes"`
	MaxKeyAge        Duration `yaml:"max_key_age"` // cached keys stay usable this long while the issuer is unreachable; default 1h
	IntrospectionURL string   `yaml:"introspection_url"`
	ClientID         string   `yaml:"client_id"`          // introspection client
	ClientSecretFile string   `yaml:"client_secret_file"` // or client_secret_env
	ClientSecretEnv  string   `yaml:"client_secret_env"`
	CacheTTL         Duration `yaml:"cache_ttl"` // introspection answers kept at most this long (and never past exp); default 60s
}

// Caller-auth defaults and values (docs/configuration.md server.caller_auth).
const (
	DefaultClockSkew = 60 * time.Second
	DefaultMaxKeyAge = time.Hour
	DefaultCacheTTL  = 60 * time.Second
	ToolViewCaller   = "caller"
	ToolViewAll      = "all"
)

// DefaultAlgorithms are the JWS algorithms accepted by default: asymmetric only (an HMAC
// key could be taken from a public key; "none" is no signature).
var DefaultAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// Resource is the OAuth resource identifier of /mcp (RFC 8707, RFC 9728): public_url +
// "/mcp", public_url defaulting to http://<listen>.
func (s Server) Resource() string {
	base := strings.TrimRight(s.PublicURL, "/")
	if base == "" {
		base = "http://" + s.Listen
	}
	return base + "/mcp"
}

// Enabled reports whether the issuer is configured (server.admin_auth.token_issuer).
func (i CallerIssuer) Enabled() bool { return i.Issuer != "" || i.Type != "" || i.Audience != "" }

// AsCallerAuth is the issuer as a one-issuer server.caller_auth (to build a verifier); an
// empty type is jwt.
func (i CallerIssuer) AsCallerAuth(skew Duration) CallerAuth {
	if i.Type == "" {
		i.Type = CallerAuthJWT
	}
	return CallerAuth{CallerIssuer: i, ClockSkew: skew, ToolView: ToolViewAll}
}

// Enabled reports whether /mcp requires a verified bearer token.
func (c CallerAuth) Enabled() bool { return c.Type != "" && c.Type != CallerAuthNone }

// All lists every configured issuer, the top-level one first.
func (c CallerAuth) All() []CallerIssuer {
	if !c.Enabled() {
		return nil
	}
	out := []CallerIssuer{c.CallerIssuer}
	for _, i := range c.Issuers {
		if i.Type == "" {
			i.Type = c.Type
		}
		out = append(out, i)
	}
	return out
}

// Reload says when the reloader trusts a changed config file to be completely written
// (docs/configuration.md "Reload"): a file read mid-write may itself be valid and weaker.
type Reload struct {
	// Settle is how long the files must stay byte for byte the same (read again after it)
	// before a reload uses them; default 500ms.
	Settle Duration `yaml:"settle"`
	// WeakerSettle is how long they must have been unchanged before a reload that weakens
	// governance (config.Weakens) applies; default 5s. SIGHUP needs only Settle.
	WeakerSettle Duration `yaml:"weaker_settle"`
	// EndMarker, when set, is the line the config file must end with to be used at all.
	EndMarker string `yaml:"end_marker"`
}

// AdminAuth lets a login proxy (oauth2-proxy) in front of the admin listener sign approvers in:
// a request from a TrustedProxy address carrying UserHeader or EmailHeader is the approver
// those name (docs/SECURITY.md "Sign-in through a login proxy"). Empty TrustedProxy = off.
type AdminAuth struct {
	TrustedProxy []string `yaml:"trusted_proxy"` // CIDRs of the proxy's peers, e.g. 10.42.0.0/16
	UserHeader   string   `yaml:"user_header"`   // default X-Auth-Request-User
	EmailHeader  string   `yaml:"email_header"`  // default X-Auth-Request-Email
	GroupsHeader string   `yaml:"groups_header"` // default X-Auth-Request-Groups (comma-separated)
	// TokenIssuer lets approvers (people, automation) use the admin API with an access token
	// of this issuer: its subject or e-mail names the approver exactly (approvers[].subjects,
	// email), its groups are the approver's groups. Empty issuer = off.
	TokenIssuer CallerIssuer `yaml:"token_issuer"`
}

// Limits bound the connections, bytes, streams and sessions clients can make Tollgate hold
// (docs/SECURITY.md). All are fixed at start.
type Limits struct {
	MaxConnections       int      `yaml:"max_connections"`         // MCP listener, default 1024
	AdminMaxConnections  int      `yaml:"admin_max_connections"`   // admin listener (its own budget), default 64
	HeaderTimeout        Duration `yaml:"header_timeout"`          // receiving request headers, default 10s
	BodyTimeout          Duration `yaml:"body_timeout"`            // receiving a request body, default 30s
	IdleTimeout          Duration `yaml:"idle_timeout"`            // keep-alive connection without a request, default 120s
	WriteTimeout         Duration `yaml:"write_timeout"`           // one write to a client that does not read, default 30s
	MaxInflightBodyBytes int64    `yaml:"max_inflight_body_bytes"` // request bodies held at once, default 64 MiB
	// MaxInflightBodyBytesPerSource is one source's share of it (identity, else address);
	// default a quarter of the budget, at least server.max_body_bytes.
	MaxInflightBodyBytesPerSource int64 `yaml:"max_inflight_body_bytes_per_source"`
	MaxStreams                    int   `yaml:"max_streams"`             // open GET streams in all, default 1000
	MaxStreamsPerSession          int   `yaml:"max_streams_per_session"` // open GET streams of one session, default 4
	// MaxStreamsPerSource is one source's share of MaxStreams (it may open sessions at will),
	// default a quarter of it, at least MaxStreamsPerSession.
	MaxStreamsPerSource int     `yaml:"max_streams_per_source"`
	MaxSessions         int     `yaml:"max_sessions"`        // sessions tracked, default 10000
	SessionsPerSecond   float64 `yaml:"sessions_per_second"` // new sessions per source, default 10; 0 = no limit
	SessionBurst        int     `yaml:"session_burst"`       // default 50
	// MaxParkedCalls bounds the bridged 2026-07-28 calls parked between MRTR rounds (each
	// holds its upstream call open: a connection's place in max_connections), default 256;
	// MaxParkedCallsPerSource is one source's share, default a quarter of it.
	MaxParkedCalls          int `yaml:"max_parked_calls"`
	MaxParkedCallsPerSource int `yaml:"max_parked_calls_per_source"`
}

// RateLimit bounds how fast one caller (task owner) may call tools (JSON-RPC -32009 beyond it).
type RateLimit struct {
	RequestsPerSecond float64 `yaml:"requests_per_second"` // 0 = no limit
	Burst             int     `yaml:"burst"`               // default: requests_per_second rounded up
}

// Audit configures the append-only audit log.
type Audit struct {
	Path string `yaml:"path"` // "" or "-" = stderr
	// Forward says which forwarded calls get a decision line: all (default), sampled (at
	// most audit.ForwardSampleRate a second, each line counting the ones left out) or none.
	// Denials, holds and would-be decisions of audit mode are always written.
	Forward string `yaml:"forward"`
}

// Values of audit.forward.
const (
	AuditForwardAll     = "all"
	AuditForwardSampled = "sampled"
	AuditForwardNone    = "none"
)

// Telemetry configures tracing export (off by default).
type Telemetry struct {
	OTLPEndpoint string  `yaml:"otlp_endpoint"`
	ServiceName  string  `yaml:"service_name"`
	SampleRatio  float64 `yaml:"sample_ratio"`
}

// Duration is a time.Duration written in YAML as "10m", "1h30m" or "250ms".
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }
