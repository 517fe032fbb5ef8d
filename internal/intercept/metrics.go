package intercept

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-mcp/tollgate/internal/metrics"
	"github.com/tollgate-mcp/tollgate/internal/rules"
	"github.com/tollgate-mcp/tollgate/internal/source"
)

type gatewayMetrics struct {
	byAnnotation   *prometheus.GaugeVec
	validationErrs *prometheus.CounterVec
	decisions      *prometheus.CounterVec
	wouldDecisions *prometheus.CounterVec
	rateLimits     prometheus.Counter
	toolCalls      *prometheus.CounterVec
	toolLimit      *metrics.Limiter
	toolLabel      func(tool string) string

	// The hold path (tasks.sync_approval: hold): plain calls waiting on their connection.
	held, heldAttached, heldSettled, heldReplayed prometheus.Counter
	heldNow                                       prometheus.Gauge
	holdWait                                      *prometheus.HistogramVec

	// 2026-07-28 upstream task ids bound to their creators that gave way (source share, total).
	upTasksEvicted *prometheus.CounterVec
	parkedEvicted  *prometheus.CounterVec
	parkedAway     prometheus.Counter
}

// Outcomes of a held call, the label of tollgate_hold_wait_seconds.
const (
	holdAnswered   = "answered"    // the call's outcome (its result or the error that ended it)
	holdSettled    = "settled"     // undecided when tasks.hold_budget ran out: the settled result
	holdClientGone = "client_gone" // the client went away first; the task goes on
)

// maxToolLabels bounds tollgate_tool_calls_total{tool}: only tools the upstream listed are
// label values (see Gateway.toolLabel), and of those the first this many called.
const maxToolLabels = 100

// newGatewayMetrics registers the gateway's metrics; label maps a called tool's name to its
// label value ("other" for names the upstream never listed).
func newGatewayMetrics(reg prometheus.Registerer, label func(tool string) string) *gatewayMetrics {
	if reg == nil {
		return nil
	}
	m := &gatewayMetrics{
		byAnnotation: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tollgate_tools_by_annotation",
			Help: "Upstream tools by the execution.taskSupport Tollgate advertises."}, []string{"annotation"}),
		validationErrs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_task_validation_errors_total",
			Help: "tools/call requests refused for their task metadata (required, forbidden, malformed)."}, []string{"error"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_decisions_total",
			Help: "Governance decisions for tool calls by effective action."}, []string{"action"}),
		wouldDecisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_would_decisions_total",
			Help: "Decisions of rules in audit mode that were recorded, not enforced (the call was forwarded), by the action enforce mode would have taken (deny, approve)."}, []string{"action"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_tool_calls_total",
			Help: "Governed tool calls by tool (tools the upstream lists and Tollgate's own, first 100 called; any other name is \"other\") and effective action."}, []string{"tool", "action"}),
		toolLimit: metrics.NewLimiter(nil, maxToolLabels),
		toolLabel: label,
	}
	m.rateLimits = prometheus.NewCounter(prometheus.CounterOpts{Name: "tollgate_rate_limited_total",
		Help: "tools/call requests refused by server.rate_limit (-32009)."})
	reg.MustRegister(m.rateLimits)
	m.held = prometheus.NewCounter(prometheus.CounterOpts{Name: "tollgate_held_calls_total",
		Help: "Plain tools/call requests held on their connection for an approval (tasks.sync_approval: hold)."})
	m.heldAttached = prometheus.NewCounter(prometheus.CounterOpts{Name: "tollgate_held_calls_attached_total",
		Help: "Held calls that were retries attached to the same call's unfinished task (no second approval)."})
	m.heldSettled = prometheus.NewCounter(prometheus.CounterOpts{Name: "tollgate_held_calls_settled_total",
		Help: "Held calls still undecided when tasks.hold_budget ran out, answered with the result naming the task."})
	m.heldReplayed = prometheus.NewCounter(prometheus.CounterOpts{Name: "tollgate_held_calls_replayed_total",
		Help: "Retries of a plain call whose task had already finished, answered at once with its stored outcome."})
	m.heldNow = prometheus.NewGauge(prometheus.GaugeOpts{Name: "tollgate_held_calls",
		Help: "Plain calls held on their connection now."})
	m.holdWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tollgate_hold_wait_seconds",
		Help:    "Time a held call waited on its connection, by outcome (answered, settled, client_gone).",
		Buckets: []float64{.1, .5, 1, 5, 10, 20, 30, 40, 50, 60, 120, 300}}, []string{"outcome"})
	reg.MustRegister(m.held, m.heldAttached, m.heldSettled, m.heldReplayed, m.heldNow, m.holdWait)
	m.upTasksEvicted = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_upstream_task_bindings_evicted_total",
		Help: "2026-07-28 upstream task ids bound to their creators that gave way to a new binding, by table (memory: this process's; store: the shared Redis store's, when this replica made the new binding) and reason (source_share: the source holding it was at tasks.quotas.max_upstream_tasks_per_source; total: the table was at max_upstream_tasks_total). The creator then gets \"not found\" for that task through Tollgate."}, []string{"table", "reason"})
	reg.MustRegister(m.upTasksEvicted)
	m.parkedEvicted = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_parked_calls_evicted_total",
		Help: "Bridged 2026-07-28 calls parked between MRTR rounds that gave way to a new one, by reason (source_share: their source was at server.limits.max_parked_calls_per_source; total: all were at max_parked_calls and their source held the most). The upstream call is cancelled; its requestState is then refused."}, []string{"reason"})
	reg.MustRegister(m.parkedEvicted)
	m.parkedAway = prometheus.NewCounter(prometheus.CounterOpts{Name: "tollgate_parked_calls_elsewhere_total",
		Help: "Retries of bridged 2026-07-28 calls whose requestState another replica (or this one before a restart) issued: refused with -32602 RequestStateOnOtherReplica. Non-zero with several replicas: the load balancer does not keep a caller on one replica."})
	reg.MustRegister(m.parkedAway)
	for _, r := range []string{source.EvictedSourceShare, source.EvictedTotal} {
		m.parkedEvicted.WithLabelValues(r)
	}
	for _, table := range []string{upTasksMemory, upTasksStore} {
		for _, r := range []string{source.EvictedSourceShare, source.EvictedTotal} {
			m.upTasksEvicted.WithLabelValues(table, r)
		}
	}
	for _, o := range []string{holdAnswered, holdSettled, holdClientGone} {
		m.holdWait.WithLabelValues(o)
	}
	reg.MustRegister(m.byAnnotation, m.validationErrs, m.decisions, m.wouldDecisions, m.toolCalls)
	for _, a := range []rules.TaskSupport{rules.Forbidden, rules.Optional, rules.Required} {
		m.byAnnotation.WithLabelValues(string(a))
	}
	for _, e := range []string{"required", "forbidden", "malformed"} {
		m.validationErrs.WithLabelValues(e)
	}
	for _, a := range []string{"forward", "approve", "deny"} {
		m.decisions.WithLabelValues(a)
	}
	for _, a := range []string{"approve", "deny"} {
		m.wouldDecisions.WithLabelValues(a)
	}
	return m
}

func (m *gatewayMetrics) setAnnotations(c map[rules.TaskSupport]int) {
	if m == nil {
		return
	}
	for _, a := range []rules.TaskSupport{rules.Forbidden, rules.Optional, rules.Required} {
		m.byAnnotation.WithLabelValues(string(a)).Set(float64(c[a]))
	}
}

func (m *gatewayMetrics) validation(kind string) {
	if m != nil {
		m.validationErrs.WithLabelValues(kind).Inc()
	}
}

// would counts one decision audit mode recorded instead of enforcing.
func (m *gatewayMetrics) would(action string) {
	if m != nil {
		m.wouldDecisions.WithLabelValues(action).Inc()
	}
}

func (m *gatewayMetrics) decision(action string) {
	if m != nil {
		m.decisions.WithLabelValues(action).Inc()
	}
}

// toolCall counts one governed tools/call of tool with its effective action (forward, approve,
// deny). Call it where decision is recorded.
func (m *gatewayMetrics) toolCall(tool, action string) {
	if m != nil {
		if tool = m.toolLabel(tool); tool != "other" {
			tool = m.toolLimit.Label(tool)
		}
		m.toolCalls.WithLabelValues(tool, action).Inc()
	}
}

func (m *gatewayMetrics) rateLimited() {
	if m != nil {
		m.rateLimits.Inc()
	}
}

// holdStarted counts a plain call beginning to wait on its connection; attached when it is a
// retry that attached to its call's unfinished task. The returned func ends the hold with its
// outcome (holdAnswered, holdSettled, holdClientGone).
func (m *gatewayMetrics) holdStarted(attached bool) (end func(outcome string)) {
	if m == nil {
		return func(string) {}
	}
	m.held.Inc()
	if attached {
		m.heldAttached.Inc()
	}
	m.heldNow.Inc()
	start := time.Now()
	return func(outcome string) {
		m.heldNow.Dec()
		if outcome == holdSettled {
			m.heldSettled.Inc()
		}
		m.holdWait.WithLabelValues(outcome).Observe(time.Since(start).Seconds())
	}
}

// holdReplayed counts a retry answered at once with its finished task's stored outcome.
func (m *gatewayMetrics) holdReplayed() {
	if m != nil {
		m.heldReplayed.Inc()
	}
}

func (m *gatewayMetrics) parkedElsewhere() {
	if m != nil {
		m.parkedAway.Inc()
	}
}

func (m *gatewayMetrics) parkedCallEvicted(reason string) {
	if m != nil {
		m.parkedEvicted.WithLabelValues(reason).Inc()
	}
}

func (m *gatewayMetrics) upstreamTaskEvicted(table, reason string) {
	if m != nil {
		m.upTasksEvicted.WithLabelValues(table, reason).Inc()
	}
}
