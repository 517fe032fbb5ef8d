package telemetry

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// collector accepts OTLP/HTTP protobuf exports at /v1/traces and keeps the spans.
type collector struct {
	mu    sync.Mutex
	spans map[string]string // span id (hex) → parent span id (hex)
	names map[string]string // span id → name
	tids  map[string]bool
	srv   *httptest.Server
}

func newCollector(t *testing.T) *collector {
	c := &collector{spans: map[string]string{}, names: map[string]string{}, tids: map[string]bool{}}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want POST /v1/traces application/x-protobuf", http.StatusBadRequest)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, _ := io.ReadAll(body)
		var req coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					id := trace.SpanID(s.GetSpanId()).String()
					c.spans[id] = hexOf(s.GetParentSpanId())
					c.names[id] = s.GetName()
					c.tids[trace.TraceID(s.GetTraceId()).String()] = true
				}
			}
		}
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func hexOf(b []byte) string {
	if len(b) != 8 {
		return ""
	}
	return trace.SpanID(b).String()
}

// chain is client → Middleware(handler) → handler calls upstream through Transport; it returns
// the traceparent the upstream saw.
func chain(t *testing.T, tp trace.TracerProvider, clientTraceparent string) string {
	t.Helper()
	var mu sync.Mutex
	seen := ""
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = r.Header.Get("Traceparent")
		mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	}))
	defer up.Close()
	hc := &http.Client{Transport: Transport(&http.Transport{})}
	defer hc.CloseIdleConnections()
	gw := httptest.NewServer(Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Annotate(r.Context(), "tools/call")
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, up.URL+"/mcp", nil)
		req.Header.Set("Traceparent", r.Header.Get("Traceparent")) // the proxy copies it
		resp, err := hc.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		w.WriteHeader(http.StatusNoContent)
	}), tp))
	defer gw.Close()
	req, _ := http.NewRequest(http.MethodPost, gw.URL+"/mcp", nil)
	if clientTraceparent != "" {
		req.Header.Set("Traceparent", clientTraceparent)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("gateway status %d", resp.StatusCode)
	}
	http.DefaultClient.CloseIdleConnections()
	mu.Lock()
	defer mu.Unlock()
	return seen
}

func TestTracingOff(t *testing.T) {
	tp, shutdown, err := Setup(context.Background(), config.Telemetry{}, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(context.Background())
	if enabled(tp) {
		t.Fatal("no endpoint must mean tracing off")
	}
	in := "00-" + validTID + "-" + validSID + "-01"
	if got := chain(t, tp, in); got != in {
		t.Errorf("upstream saw traceparent %q, want the client's %q unchanged", got, in)
	}
	if got := chain(t, tp, ""); got != "" {
		t.Errorf("upstream saw traceparent %q with tracing off and none from the client", got)
	}
}

func TestTracingOn(t *testing.T) {
	tests := []struct {
		name      string
		client    string
		wantTrace string // "" = any new trace
		exported  bool
	}{
		{"continues a sampled client trace", "00-" + validTID + "-" + validSID + "-01", validTID, true},
		{"honours an unsampled client trace", "00-" + validTID + "-" + validSID + "-00", validTID, false},
		{"starts a trace without traceparent", "", "", true},
		{"starts a trace on an invalid traceparent", "00-" + validTID + "-" + validSID, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			col := newCollector(t)
			tp, shutdown, err := Setup(context.Background(), config.Telemetry{OTLPEndpoint: col.srv.URL, ServiceName: "tollgate-test"}, "test")
			if err != nil {
				t.Fatal(err)
			}
			got := chain(t, tp, tt.client)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := shutdown(ctx); err != nil {
				t.Fatalf("shutdown: %v", err)
			}
			p, err := ParseTraceparent(got)
			if err != nil {
				t.Fatalf("upstream traceparent %q: %v", got, err)
			}
			if tt.wantTrace != "" && p.TraceID.String() != tt.wantTrace {
				t.Errorf("upstream trace id %s, want %s", p.TraceID, tt.wantTrace)
			}
			if tt.wantTrace == "" && p.TraceID.String() == validTID {
				t.Errorf("an invalid or missing traceparent must start a new trace")
			}
			if p.SpanID.String() == validSID {
				t.Errorf("upstream parent span id is the client's; want Tollgate's client span")
			}
			if p.Sampled() != tt.exported {
				t.Errorf("sampled flag %v, want %v", p.Sampled(), tt.exported)
			}
			col.mu.Lock()
			defer col.mu.Unlock()
			if !tt.exported {
				if len(col.spans) != 0 {
					t.Errorf("unsampled trace exported %d spans", len(col.spans))
				}
				return
			}
			// client span (the upstream's parent) → server span → the client's span.
			server, ok := col.spans[p.SpanID.String()]
			if !ok {
				t.Fatalf("client span %s not exported; got %v", p.SpanID, col.names)
			}
			if col.names[p.SpanID.String()] != "POST" || col.names[server] != "tools/call" {
				t.Errorf("span names %v", col.names)
			}
			if tt.client != "" && tt.wantTrace != "" && col.spans[server] != validSID {
				t.Errorf("server span's parent %q, want the client's %s", col.spans[server], validSID)
			}
			if !col.tids[p.TraceID.String()] || len(col.tids) != 1 {
				t.Errorf("exported trace ids %v, want only %s", col.tids, p.TraceID)
			}
		})
	}
}

func TestSetupEndpoint(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"http://collector:4318", "http://collector:4318/v1/traces", true},
		{"http://collector:4318/", "http://collector:4318/v1/traces", true},
		{"https://otel.example.com/custom/traces", "https://otel.example.com/custom/traces", true},
		{"collector:4318", "", false},
		{"ftp://x", "", false},
	}
	for _, tt := range tests {
		got, err := tracesURL(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("tracesURL(%q) = %q, %v", tt.in, got, err)
		}
	}
	if _, _, err := Setup(context.Background(), config.Telemetry{OTLPEndpoint: "collector:4318"}, "x"); err == nil {
		t.Error("Setup accepted an endpoint without scheme")
	}
}
