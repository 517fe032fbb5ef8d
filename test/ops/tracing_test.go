package ops

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/trace"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate-mcp/tollgate/internal/telemetry"
	"github.com/tollgate-mcp/tollgate/test/testkit"
)

const (
	clientTrace = "0af7651916cd43dd8448eb211c80319c"
	clientSpan  = "b7ad6b7169203331"
	clientTP    = "00-" + clientTrace + "-" + clientSpan + "-01"
)

// tracedCall sends one forwarded tools/call carrying clientTP and returns the traceparent the
// upstream received with it.
func tracedCall(t *testing.T, g *testkit.Gateway, up *opsUpstream) string {
	t.Helper()
	c := g.NewClient(t)
	c.Header = http.Header{"Traceparent": {clientTP}, "Tracestate": {"ops=1"}}
	if m := c.Call(1, "echo", map[string]any{}, 0); m["result"] == nil {
		t.Fatalf("tools/call: %v", m)
	}
	calls := up.toolCalls()
	if len(calls) != 1 {
		t.Fatalf("upstream saw %d tools/call requests, want 1", len(calls))
	}
	return calls[0].Get("Traceparent")
}

// TestTraceparentTracingOff: without telemetry.otlp_endpoint the client's traceparent reaches
// the upstream byte for byte.
func TestTraceparentTracingOff(t *testing.T) {
	up := newOpsUpstream(t, func(w http.ResponseWriter, _ *http.Request, body []byte) { echoResult(w, body) })
	g := testkit.StartGateway(t, testkit.BasicConfig(up.url(), ""), nil, nil)
	g.WaitReady(t)
	if got := tracedCall(t, g, up); got != clientTP {
		t.Errorf("upstream traceparent %q, want the client's %q unchanged", got, clientTP)
	}
	if got := up.toolCalls()[0].Get("Tracestate"); got != "ops=1" {
		t.Errorf("upstream tracestate %q, want ops=1", got)
	}
}

// TestTraceparentTracingOn: with an OTLP endpoint the upstream sees the client's trace id with
// Tollgate's client span as parent, and the collector receives Tollgate's spans.
//
// Relies on the server wiring: telemetry.Setup from cfg.Telemetry in server.New,
// telemetry.Middleware around /mcp, telemetry.Transport in the upstream client, shutdown at
// the end of Run.
func TestTraceparentTracingOn(t *testing.T) {
	col := newCollector(t)
	up := newOpsUpstream(t, func(w http.ResponseWriter, _ *http.Request, body []byte) { echoResult(w, body) })
	g := testkit.StartGateway(t, testkit.BasicConfig(up.url(), "telemetry:\n  otlp_endpoint: "+col.srv.URL+"\n  service_name: tollgate-ops\n"), nil, nil)
	g.WaitReady(t)
	got := tracedCall(t, g, up)
	p, err := telemetry.ParseTraceparent(got)
	if err != nil {
		t.Fatalf("upstream traceparent %q: %v", got, err)
	}
	if p.TraceID.String() != clientTrace {
		t.Errorf("upstream trace id %s, want the client's %s", p.TraceID, clientTrace)
	}
	if p.SpanID.String() == clientSpan {
		t.Errorf("upstream parent span is the client's; want Tollgate's own span")
	}
	g.Stop() // shutdown flushes the batch exporter
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.spans) == 0 {
		t.Fatal("collector received no spans")
	}
	if col.services["tollgate-ops"] == 0 {
		t.Errorf("no spans from service tollgate-ops: %v", col.services)
	}
	parent, ok := col.spans[p.SpanID.String()]
	if !ok {
		t.Fatalf("the upstream's parent span %s was not exported (got %v)", p.SpanID, col.spans)
	}
	if col.spans[parent] != clientSpan {
		t.Errorf("server span %s has parent %q, want the client's %s", parent, col.spans[parent], clientSpan)
	}
	if !col.traces[clientTrace] {
		t.Errorf("exported traces %v lack the client's %s", col.traces, clientTrace)
	}
}

// collector accepts OTLP/HTTP protobuf exports at /v1/traces.
type collector struct {
	mu       sync.Mutex
	spans    map[string]string // span id → parent span id (hex)
	traces   map[string]bool
	services map[string]int
	srv      *httptest.Server
}

func newCollector(t *testing.T) *collector {
	c := &collector{spans: map[string]string{}, traces: map[string]bool{}, services: map[string]int{}}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want POST /v1/traces application/x-protobuf", http.StatusBadRequest)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var req coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			svc := ""
			for _, a := range rs.GetResource().GetAttributes() {
				if a.GetKey() == "service.name" {
					svc = a.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					parent := ""
					if len(s.GetParentSpanId()) == 8 {
						parent = trace.SpanID(s.GetParentSpanId()).String()
					}
					c.spans[trace.SpanID(s.GetSpanId()).String()] = parent
					c.traces[trace.TraceID(s.GetTraceId()).String()] = true
					c.services[svc]++
				}
			}
		}
		c.mu.Unlock()
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(c.srv.Close)
	return c
}
