package config

// Pool is one thing callers can make Tollgate hold, with its bounds: the rows of
// docs/SECURITY.md's limits table (CONVENTIONS 10: every pool bounded per source and in total).
// A key is a configuration key (its full YAML path); a bound without one is "fixed: …"; a
// per-source share kept by fair eviction rather than a number is "fair: …"; a pool bounded per
// source through another pool it lives in is "via: <pool name>".
type Pool struct {
	Name      string   // as SECURITY.md's limits table names it: the start of its "What" cell
	PerSource string   // one source's share
	Total     string   // the bound in all
	Finer     []string // further keys of the pool (per session, owner, task…)
	// TotalOnly says why the pool has no per-source share; only the pools the test of this
	// registry lists may have one.
	TotalOnly string
}

// Pools lists every pool; TestPoolsBoundedPerSource checks it against Limits, Quotas and
// docs/SECURITY.md.
var Pools = []Pool{
	{Name: "Request-body bytes held", PerSource: "server.limits.max_inflight_body_bytes_per_source",
		Total: "server.limits.max_inflight_body_bytes", Finer: []string{"server.max_body_bytes"}},
	{Name: "Open connections, MCP listener", Total: "server.limits.max_connections",
		TotalOnly: "a connection's source (identity header or verified caller) is known only once its request is read; every caller-held pool behind the listener (bodies, streams, sessions, parked calls) has a share per source, and a connection that sends nothing is closed after header_timeout"},
	{Name: "Open connections, admin listener", Total: "server.limits.admin_max_connections",
		TotalOnly: "the admin listener's own budget, apart from the MCP listener; its callers are approvers and probes, and failed credentials are bounded per address below"},
	{Name: "Open GET streams", PerSource: "server.limits.max_streams_per_source", Total: "server.limits.max_streams",
		Finer: []string{"server.limits.max_streams_per_session"}},
	{Name: "MCP sessions tracked", PerSource: "fair: source.Victim (the idle session of the source holding the most gives way)",
		Total: "server.limits.max_sessions", Finer: []string{"server.limits.sessions_per_second", "server.limits.session_burst"}},
	{Name: "Session ids kept in the task store", Total: "fixed: 100,000, 24 h",
		TotalOnly: "ids of sessions Tollgate saw created, new ones at most sessions_per_second per source; an id that gives way costs its client one initialize, no state"},
	{Name: "Pending tasks", PerSource: "tasks.quotas.max_pending_per_source", Total: "tasks.quotas.max_pending_total",
		Finer: []string{"tasks.quotas.max_pending_per_owner"}},
	{Name: "Pending tasks' argument bytes", PerSource: "tasks.quotas.max_stored_bytes_per_source", Total: "tasks.quotas.max_stored_bytes",
		Finer: []string{"tasks.quotas.max_argument_bytes"}},
	{Name: "Upstream task ids bound", PerSource: "tasks.quotas.max_upstream_tasks_per_source", Total: "tasks.quotas.max_upstream_tasks_total"},
	{Name: "Upstream sessions held for bridged", PerSource: "fair: source.Victim", Total: "fixed: 1000"},
	{Name: "Bridged 2026-07-28 calls parked", PerSource: "server.limits.max_parked_calls_per_source", Total: "server.limits.max_parked_calls"},
	{Name: "Approval votes kept on one task", PerSource: "via: Pending tasks", Total: "via: Pending tasks"},
	{Name: "Questions of the upstream's", PerSource: "via: Pending tasks", Total: "via: Pending tasks"},
	{Name: "A stdio server's processes", PerSource: "fair: source.Victim (idle and busy processes)", Total: "sources[].max_processes"},
	{Name: "Failed admin bearer tokens per address", PerSource: "fixed: 20 at once, then 1/s", Total: "fixed: 4096 addresses (LRU)"},
	{Name: "Slack interactivity callbacks", Total: "fixed: 10000 signatures",
		TotalOnly: "every callback is signed by Slack with the signing secret; callers of the MCP listener cannot send one"},
	{Name: "Slack messages waiting", Total: "fixed: 1000 queued, 10000 (channel, ts) pairs",
		TotalOnly: "jobs are made by task changes (pending tasks are shared per source) and signed clicks; a dropped job loses one message update, never a decision: the task, its state and the console are in the store"},
	{Name: "Caller-token introspection answers", Total: "fixed: 10000 cached",
		TotalOnly: "a cache: an answer that gives way costs one introspection again, never a caller's state; cached answers are keyed by the token, which the caller has before its source is charged"},
	{Name: "Signing-key refreshes of a caller-auth issuer", Total: "fixed: one per 10 s per issuer for unknown key ids, every 5 min otherwise",
		TotalOnly: "one fetch per interval whoever asks: no caller can cause more, so there is nothing to share"},
}
