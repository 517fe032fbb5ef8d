package notify

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

// Results of tollgate_notifications_total.
const (
	resultSent    = "sent"
	resultFailed  = "failed"
	resultDropped = "dropped"
)

// metrics is nil-safe: a Notifier without a Registerer records nothing.
type metrics struct {
	total *prometheus.CounterVec // tollgate_notifications_total{destination,result}
}

func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		return nil
	}
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_notifications_total",
		Help: "Approval notifications by destination type and result (sent, failed, dropped).",
	}, []string{"destination", "result"})
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			panic(err)
		}
		existing, ok := are.ExistingCollector.(*prometheus.CounterVec)
		if !ok {
			panic(err)
		}
		c = existing
	}
	// bounded label sets, present from the start so dashboards (and test/ops) see zeros
	for _, d := range []string{config.DestinationWebhook, config.DestinationSlack} {
		for _, r := range []string{resultSent, resultFailed, resultDropped} {
			c.WithLabelValues(d, r)
		}
	}
	return &metrics{total: c}
}

func (m *metrics) count(destination, result string) {
	if m == nil {
		return
	}
	m.total.WithLabelValues(destination, result).Inc()
}
