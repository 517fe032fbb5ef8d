package tasks

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are nil-safe: a Manager without a Registerer records nothing.
type metrics struct {
	tasks      *prometheus.GaugeVec     // tollgate_tasks{state}
	wait       *prometheus.HistogramVec // tollgate_approval_wait_seconds{outcome}
	executions *prometheus.CounterVec   // tollgate_task_executions_total{result}
	questions  *prometheus.CounterVec   // tollgate_task_questions_total{outcome}
	lapsed     prometheus.Counter       // tollgate_task_leases_lapsed_total
}

func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		return nil
	}
	m := &metrics{
		tasks: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tollgate_tasks",
			Help: "Tollgate-owned tasks held by this replica, by internal state.",
		}, []string{"state"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tollgate_approval_wait_seconds",
			Help:    "Time from task creation to the approval outcome.",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 24 * 3600},
		}, []string{"outcome"}),
		executions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_task_executions_total",
			Help: "Approved task executions against the upstream, by result.",
		}, []string{"result"}),
		questions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_task_questions_total",
			Help: "Questions the upstream asked a task's owner during its call (asked), and those nobody answered within tasks.input_timeout (timed_out).",
		}, []string{"outcome"}),
		lapsed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tollgate_task_leases_lapsed_total",
			Help: "Tasks this replica failed as ExecutionInterrupted because their execution lease lapsed (shared store): the replica running the call stopped renewing it, or the replica that created an approved task never started it.",
		}),
	}
	m.tasks = register(reg, m.tasks)
	m.lapsed = register(reg, m.lapsed)
	m.questions = register(reg, m.questions)
	m.wait = register(reg, m.wait)
	m.executions = register(reg, m.executions)
	// bounded label sets, present from the start so dashboards see zeros
	for _, s := range States() {
		m.tasks.WithLabelValues(string(s))
	}
	for _, r := range []string{"completed", "failed"} {
		m.executions.WithLabelValues(r)
	}
	for _, o := range []string{"asked", "timed_out"} {
		m.questions.WithLabelValues(o)
	}
	return m
}

// register tolerates a second Manager on the same registry by reusing the first collector.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}

func (m *metrics) moved(from, to State) {
	if m == nil {
		return
	}
	if from != "" {
		m.tasks.WithLabelValues(string(from)).Dec()
	}
	if to != "" {
		m.tasks.WithLabelValues(string(to)).Inc()
	}
}

func (m *metrics) decided(outcome string, seconds float64) {
	if m == nil {
		return
	}
	m.wait.WithLabelValues(outcome).Observe(seconds)
}

func (m *metrics) executed(result string) {
	if m == nil {
		return
	}
	m.executions.WithLabelValues(result).Inc()
}

func (m *metrics) asked() {
	if m != nil {
		m.questions.WithLabelValues("asked").Inc()
	}
}

func (m *metrics) inputTimedOut() {
	if m != nil {
		m.questions.WithLabelValues("timed_out").Inc()
	}
}

// leaseLapsed counts a task failed because its executing replica's lease lapsed.
func (m *metrics) leaseLapsed() {
	if m != nil {
		m.lapsed.Inc()
	}
}
