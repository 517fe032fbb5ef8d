package telemetry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/tollgate-mcp/tollgate/internal/config"
)

// instrumentation is the tracer name on every span Tollgate starts.
const instrumentation = "github.com/tollgate-mcp/tollgate"

// Setup returns the tracer provider for cfg. With no otlp_endpoint it is a no-op provider (no
// exporter, no spans; Middleware passes requests through untouched) and shutdown does nothing.
// Otherwise spans go in batches to the OTLP/HTTP (protobuf) collector at the endpoint: a URL
// without a path gets the standard /v1/traces. sample_ratio applies to new traces (0 = all);
// a client's sampled flag is honoured. shutdown flushes pending spans within its context.
// The exporter (otlp.go) also reads the standard OTEL_EXPORTER_OTLP_* variables for headers,
// compression, timeout and TLS; the endpoint from the config wins.
func Setup(ctx context.Context, cfg config.Telemetry, version string) (trace.TracerProvider, func(context.Context) error, error) {
	nop := func(context.Context) error { return nil }
	if cfg.OTLPEndpoint == "" {
		return noop.NewTracerProvider(), nop, nil
	}
	endpoint, err := tracesURL(cfg.OTLPEndpoint)
	if err != nil {
		return nil, nop, err
	}
	exp, err := newExporter(endpoint, 10*time.Second, os.LookupEnv)
	if err != nil {
		return nil, nop, fmt.Errorf("telemetry.otlp_endpoint: %w", err)
	}
	name := cfg.ServiceName
	if name == "" {
		name = "tollgate"
	}
	ratio := cfg.SampleRatio
	if ratio <= 0 || ratio > 1 {
		ratio = 1
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))),
		sdktrace.WithResource(resource.NewSchemaless(
			attribute.String("service.name", name), attribute.String("service.version", version))),
	)
	return tp, tp.Shutdown, nil
}

// tracesURL turns the configured endpoint into the traces URL (OTLP/HTTP convention: a base
// URL gets /v1/traces appended; a URL with a path is used as it is).
func tracesURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("telemetry.otlp_endpoint %q: must be an absolute http(s) URL, e.g. http://otel-collector:4318", raw)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}

// enabled is false for a nil or no-op provider: then nothing is wrapped.
func enabled(tp trace.TracerProvider) bool {
	if tp == nil {
		return false
	}
	_, isNoop := tp.(noop.TracerProvider)
	return !isNoop
}

// Middleware starts a server span per request, continuing a valid client traceparent (an
// invalid one starts a new trace, W3C Trace Context §3.2). With tracing off it returns next.
func Middleware(next http.Handler, tp trace.TracerProvider) http.Handler {
	if !enabled(tp) {
		return next
	}
	tracer := tp.Tracer(instrumentation)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if tps := r.Header.Values(HeaderTraceparent); len(tps) == 1 {
			if sc, ok := remoteContext(tps[0], r.Header.Values(HeaderTracestate)); ok {
				ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
			}
		}
		ctx, span := tracer.Start(ctx, r.Method+" "+r.URL.Path, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(
				attribute.String("http.request.method", r.Method),
				attribute.String("url.path", r.URL.Path),
				attribute.String("network.protocol.version", protoVersion(r)),
			))
		defer span.End()
		sw := &StatusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r.WithContext(ctx))
		code := sw.Code
		if code == 0 {
			code = http.StatusOK
		}
		span.SetAttributes(attribute.Int("http.response.status_code", code))
		if code >= 500 {
			span.SetStatus(codes.Error, http.StatusText(code))
		}
	})
}

// Annotate names the current server span after the JSON-RPC method (e.g. "tools/call") and
// records it as mcp.method.name; a no-op when tracing is off. Never pass tool arguments.
func Annotate(ctx context.Context, method string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() || method == "" {
		return
	}
	span.SetName(method)
	span.SetAttributes(attribute.String("mcp.method.name", method))
}

func protoVersion(r *http.Request) string {
	return strings.TrimPrefix(r.Proto, "HTTP/")
}

// StatusWriter records the status a handler answered with (0 until it writes; a body without
// WriteHeader is 200); Unwrap keeps http.ResponseController (flush per SSE event) working on
// the real writer. Also used by the admin API's failed-token throttle.
type StatusWriter struct {
	http.ResponseWriter
	Code int
}

func (w *StatusWriter) WriteHeader(code int) {
	if w.Code == 0 {
		w.Code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *StatusWriter) Write(b []byte) (int, error) {
	if w.Code == 0 {
		w.Code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *StatusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Transport wraps rt: a request whose context carries a span (set by Middleware) gets a client
// span and the traceparent/tracestate of that span, replacing the client's copied headers.
// Requests without a span — tracing off, background probes, approved tasks run later — pass
// unchanged, so the client's own traceparent still reaches the upstream.
func Transport(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return &tracingTransport{next: rt}
}

type tracingTransport struct{ next http.RoundTripper }

func (t *tracingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	parent := trace.SpanFromContext(req.Context())
	if !parent.SpanContext().IsValid() {
		return t.next.RoundTrip(req)
	}
	tracer := parent.TracerProvider().Tracer(instrumentation)
	ctx, span := tracer.Start(req.Context(), req.Method, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("http.request.method", req.Method),
			attribute.String("server.address", req.URL.Hostname()),
			attribute.String("url.path", req.URL.Path),
		))
	// A RoundTripper must not modify the caller's request: send a copy with fresh headers.
	out := req.Clone(ctx)
	sc := span.SpanContext()
	out.Header.Set(HeaderTraceparent, Traceparent{Version: 0, TraceID: sc.TraceID(), SpanID: sc.SpanID(), Flags: sc.TraceFlags()}.String())
	if ts := sc.TraceState().String(); ts != "" {
		out.Header.Set(HeaderTracestate, ts)
	} else {
		out.Header.Del(HeaderTracestate)
	}
	resp, err := t.next.RoundTrip(out)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "upstream request failed")
		span.End()
		return nil, err
	}
	span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	if resp.StatusCode >= 500 {
		span.SetStatus(codes.Error, http.StatusText(resp.StatusCode))
	}
	// The exchange lasts until the body is done (an SSE answer streams): end the span then.
	resp.Body = &spanBody{ReadCloser: resp.Body, span: span}
	return resp, nil
}

type spanBody struct {
	io.ReadCloser
	span trace.Span
	once sync.Once
}

func (b *spanBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() { b.span.End() })
	return err
}
