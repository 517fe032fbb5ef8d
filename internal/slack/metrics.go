package slack

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Results of tollgate_slack_requests_total.
const (
	resultSent    = "sent"
	resultFailed  = "failed"
	resultDropped = "dropped"
)

// metrics is nil-safe: a Slack without a Registerer records nothing.
type metrics struct {
	requests *prometheus.CounterVec // tollgate_slack_requests_total{method,result}
	refusals *prometheus.CounterVec // tollgate_slack_interactions_refused_total{reason}
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			panic(err)
		}
		existing, ok := are.ExistingCollector.(C)
		if !ok {
			panic(err)
		}
		return existing
	}
	return c
}

func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		return nil
	}
	m := &metrics{
		requests: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_slack_requests_total",
			Help: "Requests to Slack by method (chat.postMessage, chat.update, response_url) and result (sent, failed, dropped).",
		}, []string{"method", "result"})),
		refusals: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_slack_interactions_refused_total",
			Help: "Slack interactivity callbacks that decided nothing, by reason.",
		}, []string{"reason"})),
	}
	// bounded label sets, present from the start so dashboards (and test/ops) see zeros
	for _, meth := range []string{methodPost, methodUpdate, methodRespond} {
		for _, r := range []string{resultSent, resultFailed, resultDropped} {
			m.requests.WithLabelValues(meth, r)
		}
	}
	for _, r := range Reasons {
		m.refusals.WithLabelValues(r)
	}
	return m
}

// Reasons lists every refusal reason (docs/metrics.md).
var Reasons = []string{ReasonDisabled, ReasonTooLarge, ReasonBadSignature, ReasonStale, ReasonReplay, ReasonReplayFull,
	ReasonMalformed, ReasonUnmapped, ReasonSelf, ReasonNotAllowed, ReasonNotPending, ReasonForeignMessage, ReasonTruncated, ReasonError}

func (m *metrics) sent(method, result string) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(method, result).Inc()
}

func (m *metrics) refused(reason string) {
	if m == nil {
		return
	}
	m.refusals.WithLabelValues(reason).Inc()
}
