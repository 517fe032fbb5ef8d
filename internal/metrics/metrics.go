// Package metrics holds the transport-level Prometheus metrics. Registerers are injected, never
// global (docs/contract.md §5); label sets are bounded.
package metrics

import (
	"runtime"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the proxy's request metrics; it implements proxy.Observer.
type Metrics struct {
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	upstream    *prometheus.CounterVec
	streams     prometheus.Gauge
	upstreamUp  prometheus.Gauge
	reloads     *prometheus.CounterVec
	reloadTime  prometheus.Gauge
	reloadOK    prometheus.Gauge
	policyErrs  prometheus.Gauge
	isUp        atomic.Bool
	methodLimit *Limiter

	upstreamDur *prometheus.HistogramVec
	refusals    *prometheus.CounterVec
	signIn      *prometheus.CounterVec
	sessionsFn  atomic.Pointer[func() int]
	stdioFn     atomic.Pointer[func() int]
	pendingFn   atomic.Pointer[pendingSource]
}

// knownMethods are the MCP methods used as label values as they are; anything else is "other"
// so a client cannot grow the label set.
var knownMethods = []string{
	"initialize", "ping", "tools/list", "tools/call", "tasks/get", "tasks/result", "tasks/cancel", "tasks/list",
	"resources/list", "resources/read", "resources/templates/list", "resources/subscribe", "resources/unsubscribe",
	"prompts/list", "prompts/get", "completion/complete", "logging/setLevel",
	"notifications/initialized", "notifications/cancelled", "notifications/progress",
	"notifications/roots/list_changed", "invalid",
	"server/discover", "tasks/update", "subscriptions/listen", // protocol 2026-07-28
}

// New registers the metrics on reg.
func New(reg prometheus.Registerer, version string) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_requests_total",
			Help: "JSON-RPC messages received on /mcp by method and outcome."}, []string{"method", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tollgate_request_duration_seconds",
			Help:    "Time from receiving a /mcp POST to the end of its answer, by method.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}, []string{"method"}),
		upstream: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_upstream_requests_total",
			Help: "Exchanges forwarded to the upstream by outcome."}, []string{"outcome"}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tollgate_active_streams",
			Help: "Open server-to-client SSE streams (GET /mcp)."}),
		upstreamUp: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tollgate_upstream_up",
			Help: "1 when the upstream answered the last probe."}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_config_reloads_total",
			Help: "Configuration reload attempts by result (success, failure)."}, []string{"result"}),
		reloadTime: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tollgate_config_last_reload_timestamp_seconds",
			Help: "Unix time of the last reload attempt."}),
		reloadOK: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tollgate_config_last_reload_success",
			Help: "1 if the last reload attempt succeeded (or none was made), else 0."}),
		policyErrs: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tollgate_policy_validation_errors",
			Help: "Mistakes found in the loaded Cedar policies when last validated against the upstream's tools (cedar.validation); 0 when they match or are not checked."}),
		methodLimit: NewLimiter(knownMethods, 0),
		upstreamDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tollgate_upstream_request_duration_seconds",
			Help:    "Time from sending an HTTP request to the upstream until its response headers (or the failure), by HTTP method and result.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}, []string{"http_method", "result"}),
	}
	m.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_limit_refusals_total",
		Help: "Requests and connections refused by a server.limits bound, by limit."}, []string{"limit"})
	m.signIn = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_signin_refused_total",
		Help: "Login-proxy sign-ins refused by reason: lookalike (a name only looking like an approver's), unknown, ambiguous."}, []string{"reason"})
	for _, r := range signInReasons {
		m.signIn.WithLabelValues(r)
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tollgate_build_info",
		Help: "Build information; always 1."}, []string{"version", "goversion"})
	build.WithLabelValues(version, runtime.Version()).Set(1)
	reg.MustRegister(m.requests, m.duration, m.upstream, m.streams, m.upstreamUp, m.reloads, m.reloadTime, m.reloadOK, m.policyErrs, build,
		m.upstreamDur, m.sessionsGauge(), m.stdioGauge(), &pendingCollector{m: m}, m.refusals, m.signIn)
	for _, l := range Limits {
		m.refusals.WithLabelValues(l)
	}
	m.reloadOK.Set(1)
	for _, r := range []string{"success", "failure"} {
		m.reloads.WithLabelValues(r)
	}
	return m
}

// Exchange records one /mcp POST.
func (m *Metrics) Exchange(method, outcome string, d time.Duration) {
	method = m.methodLimit.Label(method)
	m.requests.WithLabelValues(method, outcome).Inc()
	m.duration.WithLabelValues(method).Observe(d.Seconds())
	switch outcome {
	case "ok", "upstream_http_error", "upstream_invalid_reply", "timeout", "upstream_unreachable", "client_gone":
		m.upstream.WithLabelValues(outcome).Inc()
	}
}

var signInReasons = []string{"lookalike", "unknown", "ambiguous"}

// SignInRefused counts a login-proxy sign-in its names refused (one of signInReasons).
func (m *Metrics) SignInRefused(reason string) {
	for _, r := range signInReasons {
		if r == reason {
			m.signIn.WithLabelValues(r).Inc()
		}
	}
}

// Limits are the label values of tollgate_limit_refusals_total.
var Limits = []string{
	"connections_mcp", "connections_admin", "body_bytes", "source_body_bytes", "streams", "session_streams", "source_streams",
	"sessions", "session_rate", "unknown_session", "foreign_session", "admin_auth", "admin_proxy_header",
}

// Limited counts one refusal by limit (one of Limits; anything else is dropped so a caller
// cannot grow the label set).
func (m *Metrics) Limited(limit string) {
	for _, l := range Limits {
		if l == limit {
			m.refusals.WithLabelValues(limit).Inc()
			return
		}
	}
}

// StreamOpened / StreamClosed track open GET streams.
func (m *Metrics) StreamOpened() { m.streams.Inc() }
func (m *Metrics) StreamClosed() { m.streams.Dec() }

// UpstreamUp records the probe result.
func (m *Metrics) UpstreamUp(up bool) {
	m.isUp.Store(up)
	if up {
		m.upstreamUp.Set(1)
	} else {
		m.upstreamUp.Set(0)
	}
}

// IsUpstreamUp is the last probe result.
func (m *Metrics) IsUpstreamUp() bool { return m.isUp.Load() }

// Reloaded records a reload attempt.
func (m *Metrics) Reloaded(ok bool) {
	m.reloadTime.SetToCurrentTime()
	if ok {
		m.reloads.WithLabelValues("success").Inc()
		m.reloadOK.Set(1)
	} else {
		m.reloads.WithLabelValues("failure").Inc()
		m.reloadOK.Set(0)
	}
}

// PolicyValidation records how many mistakes the last validation of the loaded Cedar policies
// against the upstream's tools found.
func (m *Metrics) PolicyValidation(problems int) { m.policyErrs.Set(float64(problems)) }
