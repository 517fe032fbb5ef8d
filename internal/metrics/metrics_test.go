package metrics

import (
	"errors"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// samples gathers family name from reg: label values joined by "," → value (histograms: count).
func samples(t *testing.T, reg *prometheus.Registry, name string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			key := ""
			for i, lp := range m.GetLabel() {
				if i > 0 {
					key += ","
				}
				key += lp.GetValue()
			}
			switch mf.GetType() {
			case dto.MetricType_GAUGE:
				out[key] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			default:
				out[key] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

func equal(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestPendingTasksBounded(t *testing.T) {
	tests := []struct {
		name      string
		workflows []string
		pending   map[string]int
		want      map[string]float64
	}{
		{"not wired", nil, nil, map[string]float64{"other": 0}},
		{"configured names and other", []string{"default", "finance"},
			map[string]int{"default": 2, "ghost": 3, "removed": 1},
			map[string]float64{"default": 2, "finance": 0, "other": 4}},
		{"a workflow named other", []string{"other"}, map[string]int{"other": 1, "x": 1}, map[string]float64{"other": 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m := New(reg, "test")
			if tt.workflows != nil {
				m.SetPendingTasks(func() []string { return tt.workflows }, func() map[string]int { return tt.pending })
			}
			if got := samples(t, reg, "tollgate_pending_tasks"); !equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestActiveSessions(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "test")
	if got := samples(t, reg, "tollgate_active_sessions"); !equal(got, map[string]float64{"": 0}) {
		t.Fatalf("before wiring: %v", got)
	}
	n := 3
	m.SetSessionCount(func() int { return n })
	if got := samples(t, reg, "tollgate_active_sessions"); !equal(got, map[string]float64{"": 3}) {
		t.Errorf("after wiring: %v", got)
	}
}

type fakeRT struct {
	status int
	err    error
}

func (f fakeRT) RoundTrip(*http.Request) (*http.Response, error) {
	if f.err != nil {
		return nil, f.err
	}
	return &http.Response{StatusCode: f.status, Body: http.NoBody}, nil
}

func TestInstrumentTransport(t *testing.T) {
	tests := []struct {
		method string
		rt     fakeRT
		key    string
	}{
		{http.MethodPost, fakeRT{status: 200}, "POST,2xx"},
		{http.MethodGet, fakeRT{status: 405}, "GET,4xx"},
		{http.MethodDelete, fakeRT{status: 502}, "DELETE,5xx"},
		{"PATCH", fakeRT{err: errors.New("dial tcp: refused")}, "other,error"},
	}
	reg := prometheus.NewRegistry()
	m := New(reg, "test")
	want := map[string]float64{}
	for _, tt := range tests {
		req, _ := http.NewRequest(tt.method, "http://127.0.0.1:1/mcp", nil)
		resp, err := m.InstrumentTransport(tt.rt).RoundTrip(req)
		if (err != nil) != (tt.rt.err != nil) {
			t.Fatalf("%s: err %v", tt.method, err)
		}
		if resp != nil {
			resp.Body.Close()
		}
		want[tt.key] = 1
	}
	if got := samples(t, reg, "tollgate_upstream_request_duration_seconds"); !equal(got, want) {
		t.Errorf("observations %v, want %v", got, want)
	}
}

func TestLimiter(t *testing.T) {
	l := NewLimiter([]string{"a"}, 2)
	got := []string{l.Label("a"), l.Label("b"), l.Label("c"), l.Label("d"), l.Label("b"), l.Label("a")}
	want := []string{"a", "b", "c", "other", "b", "a"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("label %d = %q, want %q", i, got[i], want[i])
		}
	}
}
