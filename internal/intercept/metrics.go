package intercept

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-mcp/tollgate/internal/metrics"
	"github.com/tollgate-mcp/tollgate/internal/rules"
)

type gatewayMetrics struct {
	byAnnotation   *prometheus.GaugeVec
	validationErrs *prometheus.CounterVec
	decisions      *prometheus.CounterVec
	rateLimits     prometheus.Counter
	toolCalls      *prometheus.CounterVec
	toolLimit      *metrics.Limiter
	toolLabel      func(tool string) string
}

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
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tollgate_tool_calls_total",
			Help: "Governed tool calls by tool (tools the upstream lists and Tollgate's own, first 100 called; any other name is \"other\") and effective action."}, []string{"tool", "action"}),
		toolLimit: metrics.NewLimiter(nil, maxToolLabels),
		toolLabel: label,
	}
	m.rateLimits = prometheus.NewCounter(prometheus.CounterOpts{Name: "tollgate_rate_limited_total",
		Help: "tools/call requests refused by server.rate_limit (-32009)."})
	reg.MustRegister(m.rateLimits)
	reg.MustRegister(m.byAnnotation, m.validationErrs, m.decisions, m.toolCalls)
	for _, a := range []rules.TaskSupport{rules.Forbidden, rules.Optional, rules.Required} {
		m.byAnnotation.WithLabelValues(string(a))
	}
	for _, e := range []string{"required", "forbidden", "malformed"} {
		m.validationErrs.WithLabelValues(e)
	}
	for _, a := range []string{"forward", "approve", "deny"} {
		m.decisions.WithLabelValues(a)
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
