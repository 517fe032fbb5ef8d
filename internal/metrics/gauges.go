package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// The gauges below read their values at scrape time from functions the server sets once its
// parts exist; until then they report zero, so every documented family is always present.

var pendingDesc = prometheus.NewDesc("tollgate_pending_tasks",
	"Tasks awaiting an approval decision, by approval workflow (configured names, else \"other\").",
	[]string{"workflow"}, nil)

// pendingSource is what SetPendingTasks stores.
type pendingSource struct {
	workflows func() []string
	pending   func() map[string]int
}

func (m *Metrics) sessionsGauge() prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tollgate_active_sessions",
		Help: "MCP sessions Tollgate currently tracks."}, func() float64 {
		if fn := m.sessionsFn.Load(); fn != nil {
			return float64((*fn)())
		}
		return 0
	})
}

// SetSessionCount makes tollgate_active_sessions report n() at each scrape (e.g. the session
// registry's Len). n must be safe for concurrent use.
func (m *Metrics) SetSessionCount(n func() int) {
	if n != nil {
		m.sessionsFn.Store(&n)
	}
}

func (m *Metrics) stdioGauge() prometheus.GaugeFunc {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tollgate_stdio_processes",
		Help: "Live processes of the stdio MCP server Tollgate runs (sources[0].command); 0 for a url."}, func() float64 {
		if fn := m.stdioFn.Load(); fn != nil {
			return float64((*fn)())
		}
		return 0
	})
}

// SetStdioProcesses makes tollgate_stdio_processes report n() at each scrape (the stdio
// transport's Processes). n must be safe for concurrent use.
func (m *Metrics) SetStdioProcesses(n func() int) {
	if n != nil {
		m.stdioFn.Store(&n)
	}
}

// SetPendingTasks makes tollgate_pending_tasks report pending() at each scrape. workflows
// returns the configured workflow names (read per scrape, so reloads apply): only those become
// label values, every other name is summed into "other", which keeps the label set bounded
// whatever the store holds. Both must be safe for concurrent use.
func (m *Metrics) SetPendingTasks(workflows func() []string, pending func() map[string]int) {
	if workflows != nil && pending != nil {
		m.pendingFn.Store(&pendingSource{workflows: workflows, pending: pending})
	}
}

// pendingCollector emits one sample per configured workflow plus "other".
type pendingCollector struct{ m *Metrics }

func (c *pendingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- pendingDesc }

func (c *pendingCollector) Collect(ch chan<- prometheus.Metric) {
	out := map[string]int{"other": 0}
	if src := c.m.pendingFn.Load(); src != nil {
		for _, w := range src.workflows() {
			out[w] = 0
		}
		for w, n := range src.pending() {
			if _, ok := out[w]; ok && w != "other" {
				out[w] += n
			} else {
				out["other"] += n
			}
		}
	}
	for w, n := range out {
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(n), w)
	}
}
