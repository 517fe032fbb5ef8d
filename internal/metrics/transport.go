package metrics

import (
	"net/http"
	"strconv"
	"time"
)

// InstrumentTransport wraps rt so every upstream HTTP request is timed into
// tollgate_upstream_request_duration_seconds{http_method,result}. The time ends when the
// response headers arrive: for an SSE answer that is the time to the first byte, not the
// stream's life (tollgate_request_duration_seconds covers the whole exchange).
func (m *Metrics) InstrumentTransport(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return &timedTransport{next: rt, m: m}
}

type timedTransport struct {
	next http.RoundTripper
	m    *Metrics
}

func (t *timedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	result := "error"
	if err == nil {
		result = statusClass(resp.StatusCode)
	}
	t.m.upstreamDur.WithLabelValues(httpMethod(req.Method), result).Observe(time.Since(start).Seconds())
	return resp, err
}

// httpMethod bounds the label: the streamable HTTP transport uses only these three.
func httpMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodDelete:
		return m
	}
	return "other"
}

func statusClass(code int) string {
	if code < 100 || code > 599 {
		return "error"
	}
	return strconv.Itoa(code/100) + "xx"
}
