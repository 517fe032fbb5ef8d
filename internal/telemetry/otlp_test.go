package telemetry

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// rawCollector records each export request as the collector received it.
type rawCollector struct {
	mu      sync.Mutex
	reqs    []*coltrace.ExportTraceServiceRequest
	headers []http.Header
	status  []int // answers to give, in order; then 200
	srv     *httptest.Server
}

func newRawCollector(t *testing.T, status ...int) *rawCollector {
	c := &rawCollector{status: status}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
		defer c.mu.Unlock()
		c.reqs = append(c.reqs, &req)
		c.headers = append(c.headers, r.Header.Clone())
		if len(c.status) > 0 {
			code := c.status[0]
			c.status = c.status[1:]
			w.WriteHeader(code)
			return
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func lookupOf(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}

// TestExporterEncodesSpans: every field Tollgate's exporter writes decodes with the generated
// OTLP types to what the span held (ids, parent, names, kind, times, attributes of each type,
// events, links, status, flags, resource and scope), the standard headers and gzip variables
// apply, and the TRACES_ variant replaces the generic one.
func TestExporterEncodesSpans(t *testing.T) {
	col := newRawCollector(t)
	exp, err := newExporter(col.srv.URL+"/v1/traces", 5*time.Second, lookupOf(map[string]string{
		"OTEL_EXPORTER_OTLP_HEADERS":            "x-tenant=t1,x-generic=1",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS":     "authorization=Bearer%20abc, x-tenant=t2",
		"OTEL_EXPORTER_OTLP_COMPRESSION":        "none",
		"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "gzip",
	}))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "svc"))))
	remote := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:  trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8}, TraceFlags: trace.FlagsSampled, Remote: true,
	})
	link := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{9}, SpanID: trace.SpanID{9}})
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), remote)
	start := time.Unix(1_700_000_000, 5)
	_, span := tp.Tracer("scope-a", trace.WithInstrumentationVersion("v1")).Start(ctx, "tools/call",
		trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(start), trace.WithLinks(trace.Link{SpanContext: link}),
		trace.WithAttributes(attribute.String("s", "x"), attribute.Int("i", -3), attribute.Bool("b", false),
			attribute.Float64("f", 1.5), attribute.StringSlice("ss", []string{"a", "b"})))
	span.AddEvent("ev", trace.WithTimestamp(start.Add(time.Millisecond)), trace.WithAttributes(attribute.Int("n", 7)))
	span.SetStatus(codes.Error, "boom")
	span.End(trace.WithTimestamp(start.Add(time.Second)))
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.reqs) != 1 {
		t.Fatalf("%d export requests, want 1", len(col.reqs))
	}
	h := col.headers[0]
	// The TRACES_ variable replaces the generic one whole (OTel SDK environment variables).
	if h.Get("Content-Encoding") != "gzip" || h.Get("Authorization") != "Bearer abc" || h.Get("X-Tenant") != "t2" || h.Get("X-Generic") != "" ||
		h.Get("Content-Type") != "application/x-protobuf" {
		t.Errorf("export headers %v", h)
	}
	rs := col.reqs[0].GetResourceSpans()
	if len(rs) != 1 || len(rs[0].GetScopeSpans()) != 1 || len(rs[0].GetScopeSpans()[0].GetSpans()) != 1 {
		t.Fatalf("request shape: %v", col.reqs[0])
	}
	if a := rs[0].GetResource().GetAttributes(); len(a) != 1 || a[0].GetKey() != "service.name" || a[0].GetValue().GetStringValue() != "svc" {
		t.Errorf("resource %v", rs[0].GetResource())
	}
	ss := rs[0].GetScopeSpans()[0]
	if ss.GetScope().GetName() != "scope-a" || ss.GetScope().GetVersion() != "v1" {
		t.Errorf("scope %v", ss.GetScope())
	}
	s := ss.GetSpans()[0]
	sc := span.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	if string(s.GetTraceId()) != string(tid[:]) || string(s.GetSpanId()) != string(sid[:]) ||
		string(s.GetParentSpanId()) != string([]byte{1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Errorf("ids: trace %x span %x parent %x", s.GetTraceId(), s.GetSpanId(), s.GetParentSpanId())
	}
	if s.GetName() != "tools/call" || s.GetKind() != tracepb.Span_SPAN_KIND_SERVER ||
		s.GetStartTimeUnixNano() != uint64(start.UnixNano()) || s.GetEndTimeUnixNano() != uint64(start.Add(time.Second).UnixNano()) {
		t.Errorf("name/kind/times: %v", s)
	}
	attrs := map[string]any{}
	for _, kv := range s.GetAttributes() {
		v := kv.GetValue()
		switch {
		case v.GetArrayValue() != nil:
			var xs []string
			for _, e := range v.GetArrayValue().GetValues() {
				xs = append(xs, e.GetStringValue())
			}
			attrs[kv.GetKey()] = xs
		default:
			attrs[kv.GetKey()] = v.GetValue()
		}
	}
	if attrs["s"].(*commonpb.AnyValue_StringValue).StringValue != "x" {
		t.Errorf("attributes %v", attrs)
	}
	if got := attrs["i"].(*commonpb.AnyValue_IntValue).IntValue; got != -3 {
		t.Errorf("int attribute %d", got)
	}
	if _, ok := attrs["b"].(*commonpb.AnyValue_BoolValue); !ok {
		t.Errorf("bool attribute false lost: %v", attrs["b"])
	}
	if got := attrs["f"].(*commonpb.AnyValue_DoubleValue).DoubleValue; got != 1.5 {
		t.Errorf("float attribute %v", got)
	}
	if got := attrs["ss"].([]string); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("string slice attribute %v", got)
	}
	if ev := s.GetEvents(); len(ev) != 1 || ev[0].GetName() != "ev" || ev[0].GetTimeUnixNano() != uint64(start.Add(time.Millisecond).UnixNano()) ||
		ev[0].GetAttributes()[0].GetValue().GetIntValue() != 7 {
		t.Errorf("events %v", ev)
	}
	if l := s.GetLinks(); len(l) != 1 || l[0].GetTraceId()[0] != 9 || l[0].GetSpanId()[0] != 9 {
		t.Errorf("links %v", l)
	}
	if st := s.GetStatus(); st.GetCode() != tracepb.Status_STATUS_CODE_ERROR || st.GetMessage() != "boom" {
		t.Errorf("status %v", st)
	}
	if f := s.GetFlags(); f&0xff != 1 || f&0x100 == 0 || f&0x200 == 0 {
		t.Errorf("flags %#x: want sampled, has-is-remote, parent remote", f)
	}
}

// TestExporterRetries: 503 and 429 are retried within the timeout; 400 is not.
func TestExporterRetries(t *testing.T) {
	col := newRawCollector(t, http.StatusServiceUnavailable, http.StatusTooManyRequests)
	exp, err := newExporter(col.srv.URL, 10*time.Second, lookupOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	_, span := tp.Tracer("x").Start(context.Background(), "one")
	span.End() // the syncer exports now: two refusals, then accepted
	col.mu.Lock()
	n := len(col.reqs)
	col.mu.Unlock()
	if n != 3 {
		t.Errorf("%d attempts, want 3 (503, 429, then 200)", n)
	}
	_ = tp.Shutdown(context.Background())

	bad := newRawCollector(t, http.StatusBadRequest)
	exp, _ = newExporter(bad.srv.URL, 10*time.Second, lookupOf(nil))
	if err := exp.ExportSpans(context.Background(), []sdktrace.ReadOnlySpan{endedSpan(t)}); err == nil {
		t.Error("a 400 answer was not an error")
	}
	bad.mu.Lock()
	defer bad.mu.Unlock()
	if len(bad.reqs) != 1 {
		t.Errorf("%d attempts after 400, want 1", len(bad.reqs))
	}
}

// TestExporterConfigErrors: malformed variables are refused at start, naming the variable.
func TestExporterConfigErrors(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"compression": {"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"},
		"timeout":     {"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "soon"},
		"headers":     {"OTEL_EXPORTER_OTLP_HEADERS": "novalue"},
		"certificate": {"OTEL_EXPORTER_OTLP_CERTIFICATE": "/nonexistent/ca.pem"},
	} {
		if _, err := newExporter("http://127.0.0.1:1/v1/traces", time.Second, lookupOf(env)); err == nil {
			t.Errorf("%s: %v accepted", name, env)
		}
	}
}

func endedSpan(t *testing.T) sdktrace.ReadOnlySpan {
	t.Helper()
	var got sdktrace.ReadOnlySpan
	rec := spanRecorder(func(s sdktrace.ReadOnlySpan) { got = s })
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	_, span := tp.Tracer("x").Start(context.Background(), "one")
	span.End()
	if got == nil {
		t.Fatal(errors.New("no span recorded"))
	}
	return got
}

// spanRecorder is a span processor that hands each ended span to a func.
type spanRecorder func(sdktrace.ReadOnlySpan)

func (r spanRecorder) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (r spanRecorder) OnEnd(s sdktrace.ReadOnlySpan)                   { r(s) }
func (r spanRecorder) Shutdown(context.Context) error                  { return nil }
func (r spanRecorder) ForceFlush(context.Context) error                { return nil }
