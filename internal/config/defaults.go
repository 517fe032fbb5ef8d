package config

import (
	"math"
	"time"
)

// Ports and listen addresses (docs/contract.md §4). Kubernetes manifests set 0.0.0.0 explicitly.
const (
	DefaultListenPort  = 7467
	DefaultAdminPort   = 7469
	DefaultListen      = "127.0.0.1:7467"
	DefaultAdminListen = "127.0.0.1:7469"
	DefaultAdminURL    = "http://127.0.0.1:7469"
)

// Defaults for keys left out of the file. A key that is present keeps its value,
// so an explicit 0 where a positive value is needed is reported, not replaced.
const (
	DefaultMaxBodyBytes       int64 = 4 << 20
	DefaultSyncForwardTimeout       = 60 * time.Second // REQ-CORE-007 §5.2
	DefaultRequestTimeout           = 60 * time.Second
	DefaultShutdownTimeout          = 10 * time.Second
	DefaultToolsFetchTimeout        = 30 * time.Second
	DefaultToolsMaxPages            = 100
	DefaultReloadSettle             = 500 * time.Millisecond
	DefaultReloadWeakerSettle       = 5 * time.Second
	DefaultConnectTimeout           = 5 * time.Second
	DefaultMaxProcesses             = 16 // sources[].max_processes (a stdio server)
	DefaultProcessIdleTimeout       = 10 * time.Minute

	DefaultMaxConnections             = 1024
	DefaultAdminMaxConnections        = 64
	DefaultHeaderTimeout              = 10 * time.Second
	DefaultBodyTimeout                = 30 * time.Second
	DefaultIdleTimeout                = 120 * time.Second
	DefaultWriteTimeout               = 30 * time.Second
	DefaultMaxInflightBodyBytes int64 = 64 << 20
	DefaultMaxStreams                 = 1000
	DefaultMaxStreamsPerSession       = 4
	DefaultMaxParkedCalls             = 256
	DefaultMaxSessions                = 10000
	DefaultSessionsPerSecond          = 10.0
	DefaultSessionBurst               = 50

	DefaultTaskTTL      = 10 * time.Minute // REQ-CORE-007 §5.2: 600000 ms
	DefaultTaskMaxTTL   = 24 * time.Hour   // REQ-CORE-007 §5.2: 86400000 ms
	DefaultPollInterval = 2 * time.Second
	// DefaultExecutionTimeout bounds a task's upstream call so a hung upstream cannot hold it
	// for the whole TTL (clamped to tasks.max_ttl when that is shorter).
	DefaultExecutionTimeout = 5 * time.Minute
	// DefaultInputTimeout bounds the wait for a task owner's answer to the upstream's
	// question during the call (tasks.input_timeout); never above execution_timeout.
	DefaultInputTimeout = 2 * time.Minute
	// DefaultExecutionLease is how long a task stays executing in a shared store without its
	// replica renewing it (every third of it: two missed renewals are survived); a task whose
	// replica was killed fails this long after its last renewal at the latest.
	DefaultExecutionLease = 30 * time.Second
	// MinExecutionLease keeps renewals (a store write per executing task every lease/3) rare.
	MinExecutionLease   = 3 * time.Second
	DefaultSyncApproval = SyncApprovalHold
	// DefaultHoldBudget stays below the ~60 s request timeout of common MCP clients (the
	// TypeScript SDK's default), so a held call is answered before the client gives up.
	DefaultHoldBudget   = 50 * time.Second
	DefaultReplayWindow = 10 * time.Minute
	DefaultStoreType    = StoreAuto

	DefaultMaxPendingPerOwner              = 100
	DefaultMaxPendingPerSource             = 1000
	DefaultMaxPendingTotal                 = 10000
	DefaultMaxUpstreamTasksPerSource       = 1000
	DefaultMaxUpstreamTasksTotal           = 100000
	DefaultMaxArgumentBytes          int64 = 1 << 20
	// DefaultMaxStoredBytes fits the shipped manifests' 256 Mi memory limit with room: the
	// memory store holds the arguments, and the console's pages copy what they show.
	DefaultMaxStoredBytes int64 = 64 << 20

	DefaultAction          = ActionForward
	DefaultWorkflow        = "default"
	DefaultWorkflowTimeout = 10 * time.Minute
	DefaultOnTimeout       = OnTimeoutDeny
	DefaultMinApprovals    = 1
	DefaultDestination     = DestinationConsole
	DefaultLogLevel        = "info"
	DefaultStoreFileName   = "tasks.db" // under TOLLGATE_DATA_DIR

	// The headers oauth2-proxy sets with --set-xauthrequest (auth_request mode, e.g. behind
	// ingress-nginx); in its reverse-proxy mode (--pass-user-headers) they are X-Forwarded-*.
	DefaultUserHeader   = "X-Auth-Request-User"
	DefaultEmailHeader  = "X-Auth-Request-Email"
	DefaultGroupsHeader = "X-Auth-Request-Groups"
)

// Enumerated values.
const (
	SourceKindMCP = "mcp"

	StoreMemory = "memory"
	StoreFile   = "file"
	// StoreAuto (the default) is the file store in the data directory when one is writable,
	// else memory with a warning: pending approvals should survive a restart unless the
	// operator chose otherwise (internal/server picks it at start).
	StoreAuto  = "auto"
	StoreRedis = "redis"

	OnTimeoutDeny    = "deny"
	OnTimeoutApprove = "approve"

	DestinationConsole     = "console"
	DestinationWebhook     = "webhook"
	DestinationSlack       = "slack"
	DestinationElicitation = "elicitation"
)

// ApplyDefaults fills every unset (zero) setting with its default and adds the
// "default" approval workflow when the config has none. Parse calls it for you;
// it is exported for configs built in code.
func (c *Config) ApplyDefaults() { c.applyDefaults(nil) }

// applyDefaults sets defaults for zero fields whose YAML path is not in present.
// present is nil for configs built in code: then every zero field is defaulted.
func (c *Config) applyDefaults(present map[string]int) {
	set := func(path string) bool { _, ok := present[path]; return ok }
	dur := func(d *Duration, path string, def time.Duration) {
		if *d == 0 && !set(path) {
			*d = Duration(def)
		}
	}
	str := func(s *string, path, def string) {
		if *s == "" && !set(path) {
			*s = def
		}
	}
	i64 := func(v *int64, path string, def int64) {
		if *v == 0 && !set(path) {
			*v = def
		}
	}
	num := func(v *int, path string, def int) {
		if *v == 0 && !set(path) {
			*v = def
		}
	}

	for i := range c.Sources {
		p := idx("sources", i)
		dur(&c.Sources[i].ConnectTimeout, p+".connect_timeout", DefaultConnectTimeout)
		if c.Sources[i].Stdio() {
			num(&c.Sources[i].MaxProcesses, p+".max_processes", DefaultMaxProcesses)
			dur(&c.Sources[i].IdleTimeout, p+".idle_timeout", DefaultProcessIdleTimeout)
		}
		if cc := &c.Sources[i].Credential.ClientCredentials; cc.Set() {
			str(&cc.AuthStyle, p+".credential.client_credentials.auth_style", AuthStyleBasic)
		}
	}

	g := &c.Governance
	if g.Defaults.Action == "" && !set("governance.defaults.action") {
		g.Defaults.Action = DefaultAction
	}
	str(&g.Defaults.Approval, "governance.defaults.approval", DefaultWorkflow)
	str(&c.Audit.Forward, "audit.forward", AuditForwardAll)
	str(&g.Mode, "governance.mode", ModeEnforce)
	str(&c.Cedar.Validation, "cedar.validation", ValidationWarn)
	str(&g.Pins.Mode, "governance.pins.mode", PinsOff)
	str(&g.Pins.NewTools, "governance.pins.new_tools", PinsAccept)
	str(&g.Pins.OnChange, "governance.pins.on_change", PinsQuarantine)
	num(&g.Pins.MaxDefinitionBytes, "governance.pins.max_definition_bytes", DefaultPinMaxDefinitionBytes)
	num(&g.Pins.MaxTools, "governance.pins.max_tools", DefaultPinMaxTools)
	str(&g.Pins.Workflow, "governance.pins.workflow", DefaultWorkflow)
	for i := range g.Rules {
		r := &g.Rules[i]
		if r.Action == ActionApprove || r.Action == ActionPolicy {
			str(&r.Approval, idx("governance.rules", i)+".approval", DefaultWorkflow)
		}
	}

	if c.Approval == nil {
		c.Approval = map[string]Workflow{}
	}
	if _, ok := c.Approval[DefaultWorkflow]; !ok {
		c.Approval[DefaultWorkflow] = Workflow{}
	}
	for name, w := range c.Approval {
		p := "approval." + name
		str(&w.Destination.Type, p+".destination.type", DefaultDestination)
		dur(&w.Timeout, p+".timeout", DefaultWorkflowTimeout)
		str(&w.OnTimeout, p+".on_timeout", DefaultOnTimeout)
		num(&w.MinApprovals, p+".min_approvals", DefaultMinApprovals)
		c.Approval[name] = w
	}

	if rl := &c.Server.RateLimit; rl.RequestsPerSecond > 0 && rl.Burst == 0 {
		rl.Burst = int(math.Ceil(rl.RequestsPerSecond))
	}

	t := &c.Tasks
	dur(&t.DefaultTTL, "tasks.default_ttl", DefaultTaskTTL)
	dur(&t.MaxTTL, "tasks.max_ttl", DefaultTaskMaxTTL)
	dur(&t.PollInterval, "tasks.poll_interval", DefaultPollInterval)
	if t.MaxTTL > 0 {
		dur(&t.ExecutionTimeout, "tasks.execution_timeout", min(DefaultExecutionTimeout, t.MaxTTL.D()))
	} else {
		dur(&t.ExecutionTimeout, "tasks.execution_timeout", DefaultExecutionTimeout)
	}
	if t.ExecutionTimeout > 0 {
		dur(&t.InputTimeout, "tasks.input_timeout", min(DefaultInputTimeout, t.ExecutionTimeout.D()))
	} else {
		dur(&t.InputTimeout, "tasks.input_timeout", DefaultInputTimeout)
	}
	dur(&t.ExecutionLease, "tasks.execution_lease", DefaultExecutionLease)
	str(&t.SyncApproval, "tasks.sync_approval", DefaultSyncApproval)
	dur(&t.HoldBudget, "tasks.hold_budget", DefaultHoldBudget)
	dur(&t.ReplayWindow, "tasks.replay_window", DefaultReplayWindow)
	str(&t.Store.Type, "tasks.store.type", DefaultStoreType)
	num(&t.Quotas.MaxPendingPerOwner, "tasks.quotas.max_pending_per_owner", DefaultMaxPendingPerOwner)
	num(&t.Quotas.MaxPendingPerSource, "tasks.quotas.max_pending_per_source", DefaultMaxPendingPerSource)
	num(&t.Quotas.MaxPendingTotal, "tasks.quotas.max_pending_total", DefaultMaxPendingTotal)
	num(&t.Quotas.MaxUpstreamTasksTotal, "tasks.quotas.max_upstream_tasks_total", DefaultMaxUpstreamTasksTotal)
	if t.Quotas.MaxUpstreamTasksTotal > 0 { // a total set below the default share is the share too
		num(&t.Quotas.MaxUpstreamTasksPerSource, "tasks.quotas.max_upstream_tasks_per_source", min(DefaultMaxUpstreamTasksPerSource, t.Quotas.MaxUpstreamTasksTotal))
	} else {
		num(&t.Quotas.MaxUpstreamTasksPerSource, "tasks.quotas.max_upstream_tasks_per_source", DefaultMaxUpstreamTasksPerSource)
	}
	i64(&t.Quotas.MaxArgumentBytes, "tasks.quotas.max_argument_bytes", DefaultMaxArgumentBytes)
	i64(&t.Quotas.MaxStoredBytes, "tasks.quotas.max_stored_bytes", DefaultMaxStoredBytes)
	// One source's share: a quarter, never less than one task's largest arguments.
	i64(&t.Quotas.MaxStoredBytesPerSource, "tasks.quotas.max_stored_bytes_per_source",
		min(max(t.Quotas.MaxStoredBytes/4, t.Quotas.MaxArgumentBytes), t.Quotas.MaxStoredBytes))

	s := &c.Server
	str(&s.Listen, "server.listen", DefaultListen)
	str(&s.AdminListen, "server.admin_listen", DefaultAdminListen)
	i64(&s.MaxBodyBytes, "server.max_body_bytes", DefaultMaxBodyBytes)
	dur(&s.SyncForwardTimeout, "server.sync_forward_timeout", DefaultSyncForwardTimeout)
	dur(&s.RequestTimeout, "server.request_timeout", DefaultRequestTimeout)
	dur(&s.ShutdownTimeout, "server.shutdown_timeout", DefaultShutdownTimeout)
	dur(&s.ToolsFetchTimeout, "server.tools_fetch_timeout", DefaultToolsFetchTimeout)
	num(&s.ToolsMaxPages, "server.tools_max_pages", DefaultToolsMaxPages)
	dur(&s.Reload.Settle, "server.reload.settle", DefaultReloadSettle)
	dur(&s.Reload.WeakerSettle, "server.reload.weaker_settle", DefaultReloadWeakerSettle)
	str(&s.AdminAuth.UserHeader, "server.admin_auth.user_header", DefaultUserHeader)
	str(&s.AdminAuth.EmailHeader, "server.admin_auth.email_header", DefaultEmailHeader)
	str(&s.AdminAuth.GroupsHeader, "server.admin_auth.groups_header", DefaultGroupsHeader)
	str(&s.CallerAuth.Type, "server.caller_auth.type", CallerAuthNone)
	dur(&s.CallerAuth.ClockSkew, "server.caller_auth.clock_skew", DefaultClockSkew)
	str(&s.CallerAuth.ToolView, "server.caller_auth.tool_view", ToolViewCaller)

	l := &s.Limits
	num(&l.MaxConnections, "server.limits.max_connections", DefaultMaxConnections)
	num(&l.AdminMaxConnections, "server.limits.admin_max_connections", DefaultAdminMaxConnections)
	dur(&l.HeaderTimeout, "server.limits.header_timeout", DefaultHeaderTimeout)
	dur(&l.BodyTimeout, "server.limits.body_timeout", DefaultBodyTimeout)
	dur(&l.IdleTimeout, "server.limits.idle_timeout", DefaultIdleTimeout)
	dur(&l.WriteTimeout, "server.limits.write_timeout", DefaultWriteTimeout)
	i64(&l.MaxInflightBodyBytes, "server.limits.max_inflight_body_bytes", DefaultMaxInflightBodyBytes)
	// One source's share: a quarter of the budget, so one client's stalled bodies leave room for
	// others, but never less than one largest body (nor more than the budget).
	i64(&l.MaxInflightBodyBytesPerSource, "server.limits.max_inflight_body_bytes_per_source",
		min(max(l.MaxInflightBodyBytes/4, s.MaxBodyBytes), l.MaxInflightBodyBytes))
	num(&l.MaxStreams, "server.limits.max_streams", DefaultMaxStreams)
	num(&l.MaxStreamsPerSession, "server.limits.max_streams_per_session", DefaultMaxStreamsPerSession)
	num(&l.MaxStreamsPerSource, "server.limits.max_streams_per_source",
		min(max(l.MaxStreams/4, l.MaxStreamsPerSession), l.MaxStreams))
	num(&l.MaxSessions, "server.limits.max_sessions", DefaultMaxSessions)
	if l.SessionsPerSecond == 0 && !set("server.limits.sessions_per_second") {
		l.SessionsPerSecond = DefaultSessionsPerSecond
	}
	num(&l.SessionBurst, "server.limits.session_burst", DefaultSessionBurst)
	num(&l.MaxParkedCalls, "server.limits.max_parked_calls", DefaultMaxParkedCalls)
	num(&l.MaxParkedCallsPerSource, "server.limits.max_parked_calls_per_source", max(l.MaxParkedCalls/4, 1))
}
